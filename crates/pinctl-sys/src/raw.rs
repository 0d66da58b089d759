//! One thin wrapper per syscall, returning `io::Result`; private to the crate, which offers
//! them typed through [`Kernel`](crate::Kernel) and [`mbind`](crate::mbind). The masks
//! passed are [`Mask`]s, whose capacity the wrappers pass as the length, so the kernel never
//! reads or writes past them.
//!
//! None of these functions allocates: `io::Error::last_os_error` stores the errno inline, so
//! they are safe to call between `fork` and `exec`.

use std::ffi::{c_int, c_long, c_uint, c_ulong, c_void};
use std::io;

use libc::pid_t;

use crate::mask::Mask;

fn check(ret: c_long) -> io::Result<c_long> {
    if ret < 0 { Err(io::Error::last_os_error()) } else { Ok(ret) }
}

/// `set_mempolicy(mode, nodes, maxnode)` for the calling thread. `mode` comes from
/// [`encode`](crate::mode::encode), flags included. `None` passes a NULL mask (for
/// `MPOL_DEFAULT`, `MPOL_LOCAL`).
pub(crate) fn set_mempolicy(mode: c_int, nodes: Option<&Mask>) -> io::Result<()> {
    let (ptr, maxnode) = nodes.map_or((std::ptr::null(), 0), |m| (m.as_ptr(), m.maxnode()));
    // SAFETY: `ptr` is NULL with maxnode 0, or points to a live mask of `maxnode - 1` bits
    // (Mask::maxnode is bits + 1 and the kernel reads maxnode - 1 bits); the kernel only reads it.
    check(unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode) }).map(drop)
}

/// `get_mempolicy(&mode, nodes, maxnode, addr, flags)`; returns the mode (or, with
/// `MPOL_F_NODE`, a node id). `nodes` is filled when given; the kernel fails with EINVAL when
/// it is smaller than its node id space (`nr_node_ids`).
pub(crate) fn get_mempolicy(
    nodes: Option<&mut Mask>,
    addr: usize,
    flags: c_int,
) -> io::Result<c_int> {
    let mut mode: c_int = 0;
    let (ptr, maxnode) = nodes.map_or((std::ptr::null_mut(), 0), |m| (m.as_mut_ptr(), m.maxnode()));
    // SAFETY: `mode` is a live c_int; `ptr` is NULL with maxnode 0 or a live, writable mask of
    // maxnode - 1 bits, which is all the kernel writes. `addr` is only looked up, never
    // dereferenced by us.
    check(unsafe {
        libc::syscall(libc::SYS_get_mempolicy, &mut mode as *mut c_int, ptr, maxnode, addr, flags)
    })?;
    Ok(mode)
}

/// `mbind(addr, len, mode, nodes, maxnode, flags)`: the policy of an address range of this
/// process. The kernel validates the range (EFAULT/EINVAL); a policy change never changes the
/// contents of memory, only where its pages live.
pub(crate) fn mbind(
    addr: usize,
    len: usize,
    mode: c_int,
    nodes: Option<&Mask>,
    flags: c_uint,
) -> io::Result<()> {
    let (ptr, maxnode) = nodes.map_or((std::ptr::null(), 0), |m| (m.as_ptr(), m.maxnode()));
    // SAFETY: the mask is NULL or a live mask of maxnode - 1 bits, only read; the range is
    // checked by the kernel and its contents are preserved.
    check(unsafe { libc::syscall(libc::SYS_mbind, addr, len, mode, ptr, maxnode, flags) }).map(drop)
}

/// `migrate_pages(pid, maxnode, old, new)`: moves a process's pages from `old` to `new` nodes.
/// Returns the number of pages that could not be moved. Both masks must have the same
/// capacity (the call takes one `maxnode` for both).
pub(crate) fn migrate_pages(pid: pid_t, old: &Mask, new: &Mask) -> io::Result<usize> {
    if old.bits() != new.bits() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "migrate_pages needs masks of equal capacity",
        ));
    }
    // SAFETY: both masks are live and hold maxnode - 1 bits; the kernel only reads them.
    let r = check(unsafe {
        libc::syscall(libc::SYS_migrate_pages, pid, old.maxnode(), old.as_ptr(), new.as_ptr())
    })?;
    Ok(r as usize)
}

/// `move_pages(pid, count, pages, nodes, status, flags)`. With `nodes` the pages move there;
/// without, `status` receives each page's current node (or a negative errno).
pub(crate) fn move_pages(
    pid: pid_t,
    pages: &[usize],
    nodes: Option<&[c_int]>,
    status: &mut [c_int],
    flags: c_int,
) -> io::Result<()> {
    if status.len() != pages.len() || nodes.is_some_and(|n| n.len() != pages.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "move_pages needs one node and one status per page",
        ));
    }
    let nodes_ptr = nodes.map_or(std::ptr::null(), <[c_int]>::as_ptr);
    // SAFETY: `pages`, `nodes` and `status` are live slices of `pages.len()` elements (checked
    // above); the kernel reads the first two and writes the third. The page addresses are
    // looked up in the target's address space, never dereferenced here; moving a page keeps
    // its contents.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid,
            pages.len() as c_ulong,
            pages.as_ptr() as *const *const c_void,
            nodes_ptr,
            status.as_mut_ptr(),
            flags,
        )
    })
    .map(drop)
}

/// `sched_setaffinity(pid, len, mask)`; pid 0 is the calling thread.
pub(crate) fn sched_setaffinity(pid: pid_t, cpus: &Mask) -> io::Result<()> {
    // SAFETY: the mask is live and `byte_len` bytes long; the kernel only reads it.
    check(unsafe {
        libc::syscall(libc::SYS_sched_setaffinity, pid, cpus.byte_len(), cpus.as_ptr())
    })
    .map(drop)
}

/// `sched_getaffinity(pid, len, mask)`; fails with EINVAL when the mask is smaller than the
/// kernel's CPU id space (`nr_cpu_ids`). Clears the bits the kernel does not write.
pub(crate) fn sched_getaffinity(pid: pid_t, cpus: &mut Mask) -> io::Result<()> {
    cpus.clear();
    // SAFETY: the mask is live, writable and `byte_len` bytes long; the raw syscall writes at
    // most that many bytes (it returns how many it wrote).
    check(unsafe {
        libc::syscall(libc::SYS_sched_getaffinity, pid, cpus.byte_len(), cpus.as_mut_ptr())
    })
    .map(drop)
}

/// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)`: fresh
/// zeroed memory of this process, no page of it allocated until touched.
pub(crate) fn mmap_anonymous(len: usize) -> io::Result<*mut c_void> {
    // SAFETY: a new private anonymous mapping at an address the kernel chooses overlaps no
    // existing memory; the call reads nothing of ours.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED { Err(io::Error::last_os_error()) } else { Ok(addr) }
}

/// `munmap(addr, len)`. The caller guarantees no reference into the range outlives the call.
pub(crate) fn munmap(addr: *mut c_void, len: usize) -> io::Result<()> {
    // SAFETY: the caller passes a range it mapped with `mmap_anonymous` and holds no reference
    // into it any more (see `MappedBuffer`'s Drop).
    check(unsafe { libc::munmap(addr, len) } as c_long).map(drop)
}

/// `madvise(addr, len, advice)` with an advice that never changes the range's contents
/// (`MADV_HUGEPAGE`): the kernel checks the range (EINVAL, ENOMEM).
pub(crate) fn madvise(addr: usize, len: usize, advice: c_int) -> io::Result<()> {
    // SAFETY: the advices passed here only tell the kernel how to back the range; memory
    // contents stay as they are, and the kernel validates the range.
    check(unsafe { libc::madvise(addr as *mut c_void, len, advice) } as c_long).map(drop)
}

/// `setfsuid(uid)` for the calling thread: the system call, not the C library's wrapper (which
/// may change every thread). It returns the previous file-system user id and never fails
/// visibly, so the caller reads the id back with [`fs_uid_now`].
pub(crate) fn setfsuid(uid: c_uint) {
    // SAFETY: takes an integer by value and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_setfsuid, uid) };
}

/// `setfsgid(gid)` for the calling thread, as [`setfsuid`].
pub(crate) fn setfsgid(gid: c_uint) {
    // SAFETY: takes an integer by value and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_setfsgid, gid) };
}

/// The calling thread's file-system user id: `setfsuid(-1)` changes nothing (an id of -1 is
/// never valid) and returns the current one.
pub(crate) fn fs_uid_now() -> c_uint {
    // SAFETY: as `setfsuid`; -1 is refused by the kernel, which only reports the current id.
    unsafe { libc::syscall(libc::SYS_setfsuid, c_uint::MAX) as c_uint }
}

/// The calling thread's file-system group id, as [`fs_uid_now`].
pub(crate) fn fs_gid_now() -> c_uint {
    // SAFETY: as `setfsgid`; -1 is refused by the kernel, which only reports the current id.
    unsafe { libc::syscall(libc::SYS_setfsgid, c_uint::MAX) as c_uint }
}

/// `setgroups(groups)` for the calling thread only (the raw system call: the C library's
/// wrapper changes every thread of the process).
pub(crate) fn set_thread_groups(groups: &[libc::gid_t]) -> io::Result<()> {
    // SAFETY: `groups` is a live slice of `groups.len()` ids that the kernel only reads.
    check(unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) }).map(drop)
}
