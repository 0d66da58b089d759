//! The memory allocator of the static (musl) build: dlmalloc instead of musl's own.
//!
//! musl's allocator returns freed memory to the kernel eagerly: starting `pinctl exec -c` made
//! about 60 `mmap`/`munmap` calls as the argument parser, the config reader and the planner
//! allocated and freed, a third of its system calls, each new mapping faulting its pages in
//! again. dlmalloc keeps what it got (in 64 KiB steps, handing memory back above 2 MiB of
//! free space). Builds against glibc keep glibc's malloc, which already does the same.
//!
//! The supervisor forks children and the drift watcher allocates on its own thread: a fork
//! while that thread held the allocator's lock would leave the child with a lock nobody
//! releases. Children never allocate between fork and exec (see `spawn`), and
//! [`prepare_allocator`] also registers dlmalloc's `pthread_atfork` handlers, which take the
//! lock around every fork, so the child's copy is always free.

#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// Makes the allocator safe to use after `fork` in the static build (nothing elsewhere). Call
/// it first thing in `main`, while the process has one thread.
pub fn prepare_allocator() {
    #[cfg(target_env = "musl")]
    // SAFETY: called at the start of `main`, before any thread is started; registering the
    // fork handlers takes and releases dlmalloc's lock, which no one else holds yet.
    unsafe {
        dlmalloc::enable_alloc_after_fork();
    }
}
