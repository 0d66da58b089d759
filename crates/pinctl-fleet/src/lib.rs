//! Planning a fleet offline: every host planned on its own capture (`pinctl topology
//! --capture`, a snapshot or hwloc XML), one host at a time, so that memory stays that of one
//! host whatever the fleet's size; and a TiUP cluster topology filled in with the plan's
//! `numa_node`/`numa_cores`, every other byte of it kept.
//!
//! A host is planned exactly as `pinctl plan -c FILE --topology CAPTURE` plans it (the same
//! [`pinctl_launch::ServiceFile`] route); this crate adds no placement rule of its own. It
//! never looks at the machine it runs on, and it deploys nothing: the deployer (TiUP,
//! Ansible) stays the engine.
#![forbid(unsafe_code)]

mod document;
mod fleet;
mod hosts;

pub use document::HostDocument;
pub use fleet::{HostError, HostSummary, plan_host, plan_hosts};
pub use hosts::{HostCapture, HostsError, captures_in, host_capture, refuse_twice};

pub mod tiup;
