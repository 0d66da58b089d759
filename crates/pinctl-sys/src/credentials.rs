//! Resource limits and credentials (supplementary groups, group, user) applied to a child
//! between `fork` and `exec`, behind a safe API for crates that forbid `unsafe` (the
//! supervisor). `std`'s `Command::uid` drops every supplementary group and offers no way to set
//! them on stable Rust, and limits must be raised before the user is dropped; so both are done
//! here, in that order, by a `pre_exec` hook that runs plain syscalls on data prepared in the
//! parent.

use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// A resource limit `pinctl` sets (`u64::MAX` = infinity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rlimit {
    Nofile,
    Nproc,
    Memlock,
    Core,
    Stack,
}

/// `setrlimit`'s resource argument: glibc declares a type of its own for it, musl (the static
/// build's C library) a plain `int`.
#[cfg(target_env = "gnu")]
type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type RlimitResource = libc::c_int;

impl Rlimit {
    fn resource(self) -> RlimitResource {
        (match self {
            Rlimit::Nofile => libc::RLIMIT_NOFILE,
            Rlimit::Nproc => libc::RLIMIT_NPROC,
            Rlimit::Memlock => libc::RLIMIT_MEMLOCK,
            Rlimit::Core => libc::RLIMIT_CORE,
            Rlimit::Stack => libc::RLIMIT_STACK,
        }) as RlimitResource
    }
}

/// What to apply in the child, resolved in the parent (names to ids, lists to vectors).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildCredentials {
    /// `(resource, soft, hard)`: a service's `limits` give both the same value; the supervisor
    /// gives back the soft `RLIMIT_NOFILE` it raised for itself.
    pub limits: Vec<(Rlimit, u64, u64)>,
    /// Supplementary groups; `None` leaves them as inherited.
    pub groups: Option<Vec<u32>>,
    pub gid: Option<u32>,
    pub uid: Option<u32>,
}

/// Credentials for a [`Command`] about to be spawned.
pub trait CommandCredentials {
    /// In the child, after `fork` and before `exec`: `setrlimit` for each limit, then
    /// `setgroups`, `setgid`, `setuid`. A failure makes `spawn` fail with the errno.
    fn credentials(&mut self, credentials: ChildCredentials) -> &mut Self;
}

impl CommandCredentials for Command {
    fn credentials(&mut self, c: ChildCredentials) -> &mut Self {
        let limits: Vec<(RlimitResource, libc::rlimit)> = c
            .limits
            .iter()
            .map(|&(r, soft, hard)| {
                let value =
                    |v: u64| if v == u64::MAX { libc::RLIM_INFINITY } else { v as libc::rlim_t };
                (r.resource(), libc::rlimit { rlim_cur: value(soft), rlim_max: value(hard) })
            })
            .collect();
        let groups: Option<Vec<libc::gid_t>> = c.groups;
        let (gid, uid) = (c.gid, c.uid);
        let hook = move || {
            for (resource, limit) in &limits {
                // SAFETY: `limit` points at a valid rlimit prepared in the parent.
                if unsafe { libc::setrlimit(*resource, limit) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some(groups) = &groups {
                // SAFETY: the pointer and length describe the vector prepared in the parent.
                if unsafe { libc::setgroups(groups.len(), groups.as_ptr()) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some(gid) = gid {
                // SAFETY: plain syscall on an integer.
                if unsafe { libc::setgid(gid) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            if let Some(uid) = uid {
                // SAFETY: plain syscall on an integer.
                if unsafe { libc::setuid(uid) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        };
        // SAFETY: the hook runs in the forked child, where only async-signal-safe work is
        // allowed: it makes setrlimit/setgroups/setgid/setuid syscalls on data allocated in the
        // parent, and io::Error::last_os_error stores the errno inline (no allocation).
        unsafe { self.pre_exec(hook) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_reach_the_child() {
        let c = ChildCredentials { limits: vec![(Rlimit::Nofile, 200, 300)], ..Default::default() };
        let out = Command::new("sh")
            .args(["-c", "ulimit -Sn; ulimit -Hn"])
            .credentials(c)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "200\n300\n");
    }
}
