//! This process's placement as the kernel reports it (what `numactl --show` prints).

use std::io;

use pinctl_sys::{Kernel, Mask, ReportedPolicy};
use pinctl_topology::{CpuSet, NodeId, NodeSet};
use rustix::io::Errno;

/// CPU affinity and memory policy of the calling thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentPlacement {
    /// `sched_getaffinity`.
    pub cpus: CpuSet,
    /// The memory policy (`get_mempolicy`), `None` when the kernel has no NUMA support.
    pub policy: Option<ReportedPolicy>,
    /// The policy's nodes.
    pub nodes: NodeSet,
    /// The node the next interleaved allocation goes to (libnuma's
    /// `numa_get_interleave_node`), 0 when the kernel says nothing.
    pub next_node: NodeId,
}

/// Reads the calling thread's placement.
pub fn current_placement<K: Kernel + ?Sized>(kernel: &K) -> io::Result<CurrentPlacement> {
    let mut cpus = Mask::with_bits(kernel.cpu_mask_bits()?);
    kernel.get_affinity(&mut cpus)?;
    let cpus = cpus.to_set();
    let node_bits = match kernel.node_mask_bits() {
        Ok(b) => b,
        Err(e) if Errno::from_io_error(&e) == Some(Errno::NOSYS) => {
            return Ok(CurrentPlacement {
                cpus,
                policy: None,
                nodes: NodeSet::new(),
                next_node: 0,
            });
        }
        Err(e) => return Err(e),
    };
    let mut nodes = Mask::with_bits(node_bits);
    let policy = kernel.get_mempolicy(&mut nodes)?;
    let next_node = kernel.interleave_next_node().unwrap_or(0);
    Ok(CurrentPlacement { cpus, policy: Some(policy), nodes: nodes.to_set(), next_node })
}
