//! The kernel side of pinning: thin wrappers over `set_mempolicy`, `get_mempolicy`, `mbind`,
//! `migrate_pages`, `move_pages`, `sched_setaffinity` and `sched_getaffinity`, the bitmaps they
//! take, and [`ChildSetup`], the placement a launcher applies to itself (or to a child between
//! `fork` and `exec`) before running a service.
//!
//! This is the only pinctl crate allowed `unsafe`; every block says why it is sound. It must
//! not read files, parse user input, decide placements or log: it turns masks into syscalls and
//! errnos into [`std::io::Error`]s. Everything above it calls the kernel through the
//! [`Kernel`] trait so the exact call sequence can be asserted in unit tests
//! ([`RecordingKernel`]) without touching the test process.

mod credentials;
mod kernel;
mod mask;
mod mode;
mod probe;
pub mod raw;
mod setup;
mod spawn;

pub use credentials::{ChildCredentials, CommandCredentials, Rlimit};
pub use kernel::{Call, Kernel, LinuxKernel, RecordingKernel};
pub use mask::{Mask, maxnode_for_bits};
pub use mode::{
    MPOL_BIND, MPOL_DEFAULT, MPOL_F_ADDR, MPOL_F_MEMS_ALLOWED, MPOL_F_NODE, MPOL_F_NUMA_BALANCING,
    MPOL_F_RELATIVE_NODES, MPOL_F_STATIC_NODES, MPOL_INTERLEAVE, MPOL_LOCAL, MPOL_MF_MOVE,
    MPOL_MF_MOVE_ALL, MPOL_MF_STRICT, MPOL_MODE_FLAGS, MPOL_PREFERRED, MPOL_PREFERRED_MANY,
    MPOL_WEIGHTED_INTERLEAVE, PolicyMode, mode_of,
};
pub use probe::{KernelSupport, probe_support};
pub use setup::{
    Applied, ChildSetup, MemoryPolicyRequest, SetupError, Stage, default_cpu_mask_bits,
    default_node_mask_bits,
};
pub use spawn::CommandPlacement;

/// The errnos callers interpret, so they need not depend on libc themselves.
pub mod errno {
    pub use libc::{EINVAL, ENOSYS, EOPNOTSUPP, EPERM};
}
