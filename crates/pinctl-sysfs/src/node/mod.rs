//! The files of each NUMA node that the watcher reads every cycle (`sys/devices/system/node`),
//! one module per file. (Discovery reads the rest: [`crate::read_topology`].)

pub mod meminfo;
pub mod numastat;

use pinctl_topology::NodeId;

use crate::error::DiscoveryError;
use crate::fsroot::KernelFiles;

/// Where the nodes' folders are, relative to the root.
pub const DIR: &str = "sys/devices/system/node";

/// The path of `node`'s file `name`, relative to the root.
pub(crate) fn file(node: NodeId, name: &str) -> String {
    format!("{DIR}/node{node}/{name}")
}

/// The nodes that have a folder under the root of `files`, ascending.
pub fn ids(files: &mut dyn KernelFiles) -> Result<Vec<NodeId>, DiscoveryError> {
    let names = files.names(DIR)?.unwrap_or_default();
    let mut ids: Vec<NodeId> =
        names.iter().filter_map(|n| crate::parse::folder_number(n, "node")?.parse().ok()).collect();
    ids.sort_unstable();
    Ok(ids)
}
