//! Launching a process where it belongs: a request as a command line or a plan states it
//! (`--nodes`, `--cpus`, `--near`, `-c FILE --service NAME`, numactl's options) resolved into
//! one typed placement on this host, the child setup built for it over the [`pinctl_sys::Kernel`]
//! trait, applied to this process or to a child between fork and exec, and read back.
//!
//! Shared by `pinctl exec`, the numactl personality and the supervisor, so all three place a
//! process the same way and fail with the same statuses ([`ExitStatus`]). It returns warnings
//! and errors instead of printing them, and it must not load an async runtime or hwloc: it sits
//! in every unit's start-up. Facts of the host come from [`pinctl_sysfs::Host`], never from
//! paths spelt here.
#![forbid(unsafe_code)]

mod apply;
mod current;
pub mod emit;
mod error;
mod host;
pub mod numactl;
pub mod options;
mod planned;
mod policies;
mod request;
pub mod spec;
mod startable;
mod status;

pub use apply::{INSTANCE_ENV, Launch, LaunchSetup, Warning, apply_to_self, exec, explain, setup};
pub use current::{CurrentPlacement, current_placement};
pub use error::{Dialect, LaunchError, chain};
pub use host::{
    Gathered, Host, MAX_HOST_FILES, host_wide_keys, join, live_files, load_gathered, pinned_on,
    planned_placement,
};
pub use planned::{
    PlannedPlacement, ServiceFile, default_route_if_unset, devices_needed, live_topology,
    load_config, near_nodes, near_nodes_on, read_needed,
};
pub use policies::probe_memory_policies;
pub use request::{CpuTarget, Nodes, Request, ResolveError, Resolved, device_nodes};
pub use startable::{DEFAULT_PATH, NotStartable, lookup_group, lookup_user, resolve_program};
pub use status::ExitStatus;
