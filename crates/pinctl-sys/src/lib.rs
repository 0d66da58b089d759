//! The kernel side of pinning: typed calls over `set_mempolicy`, `get_mempolicy`, `mbind`,
//! `migrate_pages`, `move_pages`, `sched_setaffinity` and `sched_getaffinity`, the bitmaps they
//! take, memory mapped apart from the allocator for measuring ([`MappedBuffer`]: `mmap`,
//! `madvise`), and [`ChildSetup`], the placement a launcher applies to itself (or to a child between
//! `fork` and `exec`) before running a service; and the name service's users and groups
//! ([`user_by_name`], [`group_list`]), which only the C library can ask.
//!
//! It also lets one thread open files as another user without becoming that user
//! ([`set_thread_file_identity`]: file-system ids only, for the supervisor's output writers).
//!
//! This is the only pinctl crate allowed `unsafe`; every block says why it is sound. The raw
//! system calls sit in one private module of thin wrappers (`raw`); what needs the C library
//! itself (the name service in `users`, credentials and the allocator between `fork` and
//! `exec`, the mapped buffer) stays in the module of its job. Above it, rustix is the one
//! system-call crate (safe calls only) and its `Errno` the one errno type; libc is used here
//! alone. It must not read files (its own thread's `/proc` status in tests aside), parse user input,
//! decide placements or log: it turns masks and typed policies ([`MemoryPolicyRequest`],
//! [`PolicyMode`], [`PolicyFlags`]) into syscalls and errnos into [`std::io::Error`]s; the
//! kernel's `MPOL_*` numbers never leave it. Everything above it calls the kernel through the
//! [`Kernel`] trait, including the calls that act on another process or thread (a
//! supervisor's), so the exact call sequence can be asserted in unit tests
//! ([`RecordingKernel`]) without touching the test process.

mod alloc;
mod buffer;
mod credentials;
mod file_identity;
mod kernel;
mod mask;
mod mode;
mod probe;
mod range;
mod raw;
mod setup;
mod spawn;
mod users;

pub use alloc::prepare_allocator;
pub use buffer::{HUGE_PAGE_BYTES, MappedBuffer};
pub use credentials::{ChildCredentials, CommandCredentials, Rlimit};
pub use file_identity::{set_thread_file_identity, thread_file_identity};
pub use kernel::{Call, Kernel, LinuxKernel, PageStatus, RecordingKernel};
pub use mask::{Mask, maxnode_for_bits};
pub use mode::{MemoryPolicyRequest, PolicyFlags, PolicyMode, ReportedPolicy, UnknownMode};
pub use probe::{KernelSupport, probe_support};
pub use range::{get_mempolicy_at, mbind};
pub use setup::{
    Applied, ChildSetup, SetupError, Stage, default_cpu_mask_bits, default_node_mask_bits,
};
pub use spawn::{CommandCgroup, CommandPlacement, CommandSignals};
pub use users::{User, group_by_name, group_list, user_by_id, user_by_name};
