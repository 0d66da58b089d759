//! What `pinctl-alloc-probe`, the VM test bed's allocator, prints: per-node page counts. The
//! kernel's files (`/proc/PID/maps`, `status`, `numa_maps`) are parsed with pinctl-sysfs's
//! parsers, the ones pinctl itself uses, so the probe cannot disagree with it about a policy's
//! spelling or a mapping's range.
//!
//! This crate must not set policies or affinity itself: the point of the probe is to observe a
//! placement applied by someone else (numactl, `pinctl exec`), so everything it reports must
//! come from the kernel, never from its own arguments.
#![forbid(unsafe_code)]

use std::fmt;

use pinctl_topology::NodeId;

/// Per-node page counts (as numa_maps' `N<node>=<pages>`, ascending by node) in the probe's
/// report form: `0:12,2:16372` (nodes with pages only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePages<'a>(pub &'a [(NodeId, u64)]);

impl fmt::Display for NodePages<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (node, pages) in self.0.iter().filter(|(_, p)| *p > 0) {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{node}:{pages}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_pages_list_nodes_with_pages() {
        assert_eq!(NodePages(&[(0, 1), (1, 0), (3, 6)]).to_string(), "0:1,3:6");
        assert_eq!(NodePages(&[(1, 4), (3, 6)]).to_string(), "1:4,3:6");
        assert_eq!(NodePages(&[(2, 0)]).to_string(), "");
    }
}
