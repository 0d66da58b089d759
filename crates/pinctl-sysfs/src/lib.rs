//! Discovery of a machine's NUMA topology: nodes, CPUs, memory, distances, device locality and
//! the host settings that decide whether pinning holds, read from sysfs and procfs under a root
//! directory (`/` for the live machine), or from a captured tarball, a `pinctl topology --json`
//! snapshot or (feature `hwloc`) an hwloc XML file.
//!
//! Parsers ([`parse`]) work on strings and never touch the file system; readers ([`read_topology`])
//! resolve every path relative to a root so a captured tree stands in for a machine. This crate
//! must not decide placements, call NUMA syscalls or print anything: it only describes the
//! machine (docs/topology.md says where each fact comes from).
#![forbid(unsafe_code)]

mod capture;
mod devices;
mod discover;
mod error;
mod fsroot;
mod host;
mod memtree;
mod near;
pub mod parse;
mod process;
mod source;

pub use capture::{CaptureSummary, capture_topology};
pub use discover::read_topology;
pub use error::{DiscoveryError, NearError};
pub use host::{Allowed, DeviceRef, Host, HostError};
pub use near::{default_route_interfaces, resolve_near};
pub use process::{Pid, read_allowed, read_cgroup_numa_stat, read_node_numastat, read_numa_maps};
pub use source::{
    LoadedTopology, TopologySource, UnpackedTree, load_topology, read_tarball, unpack_tarball,
};
