//! Why a probe could not run, or stopped.

use std::io;
use std::time::Duration;

use pinctl_topology::{CpuId, NodeId};

/// Why the probe could not measure. Every variant names the node, CPU or figure at fault and,
/// where the kernel refused, the call and its errno.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No pair of a usable CPU node and a usable memory node: the reasons, node by node.
    #[error("nothing to measure: {why}")]
    NothingToMeasure { why: String },
    /// A budget too short for one pass of every pair.
    #[error(
        "a budget of {budget:.1?} cannot measure {pairs} pair{s}: give at least {minimum:.1?}",
        s = if *pairs == 1 { "" } else { "s" }
    )]
    BudgetTooSmall { budget: Duration, pairs: usize, minimum: Duration },
    /// The buffer could not be mapped.
    #[error("cannot map the probe's {bytes}-byte buffer")]
    Map {
        bytes: u64,
        #[source]
        source: io::Error,
    },
    /// The kernel refused to bind the buffer to a node.
    #[error("cannot bind the probe's buffer to node {node}{hint}")]
    Bind {
        node: NodeId,
        hint: &'static str,
        #[source]
        source: io::Error,
    },
    /// The kernel refused to move a measuring thread to a CPU.
    #[error("cannot run a measuring thread on CPU {cpu} (node {node}){hint}")]
    Affinity {
        cpu: CpuId,
        node: NodeId,
        hint: &'static str,
        #[source]
        source: io::Error,
    },
    /// The buffer's pages are not where it was bound: the figures would be for another node.
    #[error(
        "the probe's buffer for node {node} has pages on {found} after binding it there: \
         refusing to report its figures as node {node}'s"
    )]
    Misplaced { node: NodeId, found: String },
    /// Asking the kernel where the buffer's pages are failed.
    #[error("cannot ask the kernel where the probe's buffer for node {node} is")]
    Locate {
        node: NodeId,
        #[source]
        source: io::Error,
    },
    /// A measuring thread could not be started or died.
    #[error("a measuring thread failed: {what}")]
    Thread { what: String },
}

/// What to add when the kernel says EPERM: containers block the NUMA calls.
pub(crate) fn permission_hint(e: &io::Error) -> &'static str {
    if rustix::io::Errno::from_io_error(e) == Some(rustix::io::Errno::PERM) {
        " (a container's seccomp profile blocks it without CAP_SYS_NICE)"
    } else {
        ""
    }
}
