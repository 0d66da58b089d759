//! This process's placement as the kernel reports it (what `numactl --show` prints).

use std::ffi::c_int;
use std::io;

use pinctl_sys::{Kernel, MPOL_F_NODE, Mask};
use pinctl_topology::{CpuSet, NodeSet};

/// CPU affinity and memory policy of the calling thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentPlacement {
    /// `sched_getaffinity`.
    pub cpus: CpuSet,
    /// The policy's raw mode (`get_mempolicy`), `None` when the kernel has no NUMA support.
    pub mode: Option<c_int>,
    /// The policy's nodes.
    pub nodes: NodeSet,
    /// The node the next interleaved allocation goes to (libnuma's
    /// `numa_get_interleave_node`), 0 when the kernel says nothing.
    pub next_node: c_int,
}

/// Reads the calling thread's placement.
pub fn current_placement<K: Kernel + ?Sized>(kernel: &K) -> io::Result<CurrentPlacement> {
    let mut cpus = Mask::with_bits(kernel.cpu_mask_bits()?);
    kernel.get_affinity(&mut cpus)?;
    let cpus = cpus.to_set();
    let node_bits = match kernel.node_mask_bits() {
        Ok(b) => b,
        Err(e) if e.raw_os_error() == Some(pinctl_sys::errno::ENOSYS) => {
            return Ok(CurrentPlacement { cpus, mode: None, nodes: NodeSet::new(), next_node: 0 });
        }
        Err(e) => return Err(e),
    };
    let mut nodes = Mask::with_bits(node_bits);
    let mode = kernel.get_mempolicy(&mut nodes, 0)?;
    let next_node = pinctl_sys::raw::get_mempolicy(None, 0, MPOL_F_NODE).unwrap_or(0);
    Ok(CurrentPlacement { cpus, mode: Some(mode), nodes: nodes.to_set(), next_node })
}
