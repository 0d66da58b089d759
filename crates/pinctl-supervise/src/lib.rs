//! `pinctl run`: the supervisor that launches every instance of a service file where the plan
//! puts it, restarts them by their policy, applies a changed file by difference, answers a
//! control socket, and adopts the instances of an earlier supervisor instead of starting
//! copies.
//!
//! The rules are pure and clock-injected ([`lifecycle::step`], [`reload::step`],
//! [`spec::diff`], [`adopt::decide`]): they read no clock, draw no random number and do no I/O, so they are
//! tested without processes. A thin tokio runtime turns their actions into spawns, signals,
//! timers and socket replies. Around it, what makes it safe as root: [`statefile`] (a locked
//! state file read only when root alone could have written it), [`socket`] (the control
//! socket, bounded, peers checked; [`client`] its other end), a cgroup subtree of its own (the `cgroup` module), and
//! [`relay`] (its output, never blocking the loop) and [`output`] (each instance's output
//! through a FIFO that outlives a detach, and its file written as its user and reopened for
//! logrotate). This crate must not contain `unsafe` (the
//! child setup between fork and exec lives in `pinctl-sys`), and every call into `pinctl-sys`
//! and `pinctl-plan` goes through its `launch` module.
#![forbid(unsafe_code)]

pub mod adopt;
mod cgroup;
pub mod client;
pub mod launch;
pub mod lifecycle;
pub mod notify;
pub mod observe;
pub mod output;
pub mod protocol;
pub mod relay;
pub mod reload;
pub mod runtime;
pub mod socket;
pub mod spec;
pub mod statefile;

pub use runtime::{Options, Outcome, Planner, Replan, RunError, run, run_observed};
