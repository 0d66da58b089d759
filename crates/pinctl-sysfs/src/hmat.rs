//! ACPI HMAT as the kernel publishes it (Documentation/admin-guide/mm/numaperf.rst): for each
//! memory node, `sys/devices/system/node/nodeN/accessC/initiators/` holds a link `nodeX` per
//! initiator node that reaches it best and the figures those get: `read_latency`,
//! `write_latency` (nanoseconds), `read_bandwidth`, `write_bandwidth` (MB/s). Class 0 counts
//! every initiator, class 1 (Linux 5.10+) only those with CPUs. Initiators that are not the
//! best are not listed: sysfs says nothing about them.

use pinctl_topology::{AccessClass, HmatAccess, MAX_NODE_ID, NodeSet};

use crate::error::DiscoveryError;
use crate::fsroot::{Fact, FsRoot, numbered_folders};
use crate::parse::{self, ParseError};

use crate::node::DIR as NODE_DIR;

/// The access classes the kernel publishes, and their folder names.
const CLASSES: [(AccessClass, &str); 2] =
    [(AccessClass::Access0, "access0"), (AccessClass::Access1, "access1")];

/// One figure file: a decimal number; `None` for 0, which HMAT uses for "not provided" (the
/// kernel writes what the table holds).
pub fn figure(text: &str) -> Result<Option<u32>, ParseError> {
    Ok(Some(parse::uint(text)?).filter(|&v| v > 0))
}

/// Every access class of every node in `nodes` that names an initiator or a figure, by node
/// then class. A node without the folders (no HMAT, or a kernel before 5.1) has none; a figure
/// file that is broken costs that figure, with a warning.
pub(crate) fn read_hmat(
    fs: &mut FsRoot,
    nodes: &NodeSet,
) -> Result<Vec<HmatAccess>, DiscoveryError> {
    let mut out = Vec::new();
    for node in nodes.iter() {
        for (class, folder) in CLASSES {
            let dir = format!("{NODE_DIR}/node{node}/{folder}/initiators");
            if !fs.is_dir(&dir) {
                continue;
            }
            let initiators: NodeSet =
                numbered_folders(fs, &dir, "node", MAX_NODE_ID)?.into_iter().collect();
            let mut read = |file: &str| -> Result<Option<u32>, DiscoveryError> {
                let rel = format!("{dir}/{file}");
                let fact =
                    fs.fact(&rel, figure, || format!("node {node}'s {folder} {file} is unknown"))?;
                Ok(match fact {
                    Fact::Value(v) => v,
                    Fact::Absent | Fact::Broken => None,
                })
            };
            let access = HmatAccess {
                node,
                class,
                initiators,
                read_latency_ns: read("read_latency")?,
                write_latency_ns: read("write_latency")?,
                read_bandwidth_mb_s: read("read_bandwidth")?,
                write_bandwidth_mb_s: read("write_bandwidth")?,
            };
            // A CPU node lists its targets under `accessC/targets` and keeps an empty
            // `initiators/`: nothing to say about its own memory.
            let says_something = !access.initiators.is_empty()
                || access.read_latency_ns.is_some()
                || access.write_latency_ns.is_some()
                || access.read_bandwidth_mb_s.is_some()
                || access.write_bandwidth_mb_s.is_some();
            if says_something {
                out.push(access);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_numbers_and_zero_is_not_given() {
        assert_eq!(figure("26\n"), Ok(Some(26)));
        assert_eq!(figure("0\n"), Ok(None));
        assert!(figure("-1").is_err());
        assert!(figure("fast").is_err());
    }
}
