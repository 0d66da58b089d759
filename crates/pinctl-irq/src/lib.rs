//! Interrupts steered as pinctl's plan says (docs/irq.md): a kept-free NIC's queues on the
//! CPUs of its node, every movable interrupt off the CPUs of quiet instances (the default
//! for every service), a `nic-queues` service's NIC queues on its own CPUs, and irqbalance,
//! when it runs, told which CPUs to avoid instead of fought.
//!
//! - [`inputs`]: what steering needs from the service file and the plan.
//! - [`mod@decide`]: the decision, a pure function of the topology, its interrupts and the plan.
//! - [`landing`]: which interrupts land on the instances' CPUs today (`pinctl plan`).
//! - [`steer`]: carrying a decision out on a host, recording what it changes, putting it back.
//! - [`record`]: the record of what was changed, a file only root can write.
//! - [`irqbalance`]: irqbalance's control socket.
//! - [`observer`]: steering under `pinctl run`, told of the supervisor's instances.
//!
//! It must not touch anything but interrupt affinities, queue masks and irqbalance's
//! settings, nor print: it returns reports for its caller to show. No `unsafe` here.
#![forbid(unsafe_code)]

pub mod by_hand;
pub mod decide;
pub mod inputs;
pub mod irqbalance;
pub mod landing;
pub mod observer;
pub mod record;
pub mod steer;

pub use decide::{Decision, IrqTarget, QueueTarget, Unmovable, Why, decide};
pub use inputs::{Owner, SteerInputs, SteerSettings, physical_nics};
pub use steer::{Files, Report, RootFiles, SteerError, Steerer};
