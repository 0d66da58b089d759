//! Discovery of a machine's NUMA topology: nodes, CPUs, memory, distances, device locality and
//! the host settings that decide whether pinning holds, read from sysfs and procfs under a root
//! directory (`/` for the live machine) or an in-memory [`Tree`]; the launcher's [`Host`]
//! reader of single facts; one reader per kernel file of what runs ([`proc`], [`cgroup`],
//! [`node`]: a process's, a cgroup's and a node's state), which the drift watcher, the
//! rebalancer and the supervisor compose.
//!
//! Parsers ([`parse`], and each file module's `parse`) work on strings and never touch the file
//! system; readers ([`read_topology`], [`Host`], each file module's `read`) resolve every path
//! relative to a root ([`KernelFiles`]: an [`FsRoot`] or the live machine's files [`held`]
//! open) so a captured tree stands in for a machine. This is the light half of discovery: the launcher, the drift sampler and
//! the VM probe use it without archive or compression code, which lives in pinctl-capture
//! (tarballs, snapshots, hwloc XML, writing captures). It must not decide placements, call
//! NUMA syscalls or print anything: it only describes the machine (docs/topology.md says where
//! each fact comes from).
#![forbid(unsafe_code)]

mod caches;
pub mod cgroup;
pub mod clock;
mod devices;
mod discover;
mod error;
pub mod fsroot;
pub mod held;
pub mod hmat;
mod host;
mod interrupts;
pub mod irq;
pub mod irqbalance;
pub mod memory_tiers;
pub mod msi_irqs;
mod near;
pub mod net_queues;
pub mod node;
pub mod parse;
pub mod pci;
pub mod proc;
mod source;
pub mod thp;

pub use devices::DeviceScope;
pub use discover::{read_topology, read_topology_with, read_tree, read_tree_with};
pub use error::{DiscoveryError, NearError};
pub use fsroot::{FsRoot, KernelFiles, Tree};
pub use host::{Allowed, DeviceRef, Host, HostError};
pub use interrupts::attach_interrupts;
pub use near::{default_route_interfaces, is_path, path_device, resolve_near};
pub use proc::pid::Pid;
pub use source::{LoadedTopology, TopologySource, is_compressed};
