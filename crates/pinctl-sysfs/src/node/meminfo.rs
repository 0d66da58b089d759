//! `nodeN/meminfo` (and `/proc/meminfo`, in the same format without the `Node N` prefix): a
//! node's total and free memory.

use pinctl_topology::NodeId;

use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::ParseError;

/// Total and free memory of a node, from `nodeN/meminfo`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeMeminfo {
    /// `MemTotal` in bytes.
    pub total_bytes: Option<u64>,
    /// `MemFree` in bytes.
    pub free_bytes: Option<u64>,
}

/// Parses `nodeN/meminfo` (`Node 0 MemTotal:  16747124 kB`) or `/proc/meminfo`
/// (`MemTotal:  16747124 kB`). Only MemTotal and MemFree are kept; blank lines are allowed
/// (some old kernels start the file with one).
pub fn parse(text: &str) -> Result<NodeMeminfo, ParseError> {
    let mut out = NodeMeminfo::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // Strip the `Node N ` prefix of per-node files.
        let rest = match line.strip_prefix("Node ") {
            Some(r) => r.split_once(' ').map_or(r, |(_, r)| r).trim_start(),
            None => line,
        };
        let Some((key, value)) = rest.split_once(':') else {
            return Err(ParseError::new(i + 1, line, "`Key: value kB`"));
        };
        let slot = match key {
            "MemTotal" => &mut out.total_bytes,
            "MemFree" => &mut out.free_bytes,
            _ => continue,
        };
        let mut words = value.split_whitespace();
        let n: u64 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| ParseError::new(i + 1, line, "a size in kB"))?;
        let bytes = match words.next() {
            Some("kB") => n.checked_mul(1024),
            None => Some(n),
            Some(_) => None,
        }
        .ok_or_else(|| ParseError::new(i + 1, line, "a size in kB"))?;
        *slot = Some(bytes);
    }
    Ok(out)
}

/// The `meminfo` of `node` under the root of `files`, `None` when there is none.
pub fn read(
    files: &mut dyn KernelFiles,
    node: NodeId,
) -> Result<Option<NodeMeminfo>, DiscoveryError> {
    parsed(files, &super::file(node, "meminfo"), parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_and_machine_meminfo() {
        let text = "\nNode 0 MemTotal:       16747124 kB\nNode 0 MemFree:        15794148 kB\n\
                    Node 0 MemUsed:          952976 kB\nNode 0 HugePages_Total:     0\n";
        let m = parse(text).unwrap();
        assert_eq!(m.total_bytes, Some(16747124 * 1024));
        assert_eq!(m.free_bytes, Some(15794148 * 1024));
        let m = parse("MemTotal:  1000 kB\nMemFree: 10 kB\nBuffers: 1 kB\n").unwrap();
        assert_eq!(m.total_bytes, Some(1024000));
        let e = parse("Node 0 MemTotal: lots kB\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert_eq!(parse("").unwrap(), NodeMeminfo::default());
        let m = parse("Node 12 MemTotal: 0 kB\n").unwrap();
        assert_eq!(m.total_bytes, Some(0));
    }
}
