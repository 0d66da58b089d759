//! Applying a [`ChildSetup`] to a child between `fork` and `exec`, behind a safe API: crates
//! that forbid `unsafe` (the supervisor) cannot call `Command::pre_exec` themselves.
//!
//! The standard library reports a `pre_exec` failure to the parent as the raw errno of the
//! returned error (through its CLOEXEC pipe). pinctl folds the failed [`Stage`] into that number
//! so the parent learns both; [`SetupError::from_spawn_error`] unfolds it. (`tokio` users build
//! a `std::process::Command` and convert it with `tokio::process::Command::from`.)

use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

use crate::kernel::LinuxKernel;
use crate::setup::{ChildSetup, SetupError, Stage};

/// Marks an errno as carrying a stage: real errnos are below 4096.
const STAGE_MARK: i32 = 0x5e70_0000;

impl Stage {
    const ALL: [Stage; 6] = [
        Stage::SetAffinity,
        Stage::SetMemoryPolicy,
        Stage::ReadAffinity,
        Stage::ReadMemoryPolicy,
        Stage::AffinityMismatch,
        Stage::MemoryPolicyMismatch,
    ];

    fn index(self) -> i32 {
        Stage::ALL.iter().position(|&s| s == self).unwrap_or(0) as i32
    }
}

impl SetupError {
    /// The single `i32` a failed `pre_exec` can hand to the parent.
    fn encode(self) -> i32 {
        STAGE_MARK | (self.stage.index() << 16) | (self.errno & 0xffff)
    }

    /// The setup failure behind a `spawn` error, or `None` when the spawn failed otherwise
    /// (command not found, fork failed...).
    pub fn from_spawn_error(e: &io::Error) -> Option<SetupError> {
        let raw = e.raw_os_error()?;
        if raw & !0x000f_ffff != STAGE_MARK {
            return None;
        }
        let stage = *Stage::ALL.get(((raw >> 16) & 0xf) as usize)?;
        Some(SetupError { stage, errno: raw & 0xffff })
    }
}

/// Placement for a [`Command`] about to be spawned.
///
/// ```
/// use pinctl_sys::{ChildSetup, CommandPlacement, Kernel, LinuxKernel, Mask, SetupError};
///
/// let k = LinuxKernel;
/// // In the parent: size the masks and compute the placement (here: our own CPUs).
/// let (cpu_bits, node_bits) = (k.cpu_mask_bits()?, k.node_mask_bits()?);
/// let mut cpus = Mask::with_bits(cpu_bits);
/// k.get_affinity(&mut cpus)?;
/// let setup = ChildSetup::new(Some(&cpus.to_set()), None, cpu_bits, node_bits, true);
/// match std::process::Command::new("true").placement(setup).status() {
///     Ok(status) => assert!(status.success()),
///     Err(e) => match SetupError::from_spawn_error(&e) {
///         Some(failed) => panic!("{failed} (stage {:?})", failed.stage),
///         None => panic!("cannot run `true`: {e}"),
///     },
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait CommandPlacement {
    /// Applies `setup` in the child after `fork`, before `exec`: CPU affinity, memory policy,
    /// read-back. A failure makes `spawn` fail; [`SetupError::from_spawn_error`] tells which
    /// stage and errno.
    fn placement(&mut self, setup: ChildSetup) -> &mut Self;
}

impl CommandPlacement for Command {
    fn placement(&mut self, mut setup: ChildSetup) -> &mut Self {
        let hook =
            move || setup.apply(&LinuxKernel).map_err(|e| io::Error::from_raw_os_error(e.encode()));
        // SAFETY: the hook runs in the forked child, where only async-signal-safe work is
        // allowed: ChildSetup::apply with LinuxKernel makes four raw syscalls on masks
        // allocated in the parent, and compares them without allocating, locking or logging;
        // io::Error::from_raw_os_error stores the code inline (no allocation).
        unsafe { self.pre_exec(hook) }
    }
}

/// Moves the child into a cgroup between `fork` and `exec`, before anything else is applied.
///
/// A supervisor that moved its child after `spawn` would let the kernel undo its placement:
/// attaching a task to a cgroup whose cpuset controller is enabled resets the task's CPU
/// affinity to the cpuset's CPUs (Linux before 6.2 does so unconditionally), so the child would
/// run on every CPU after its first instructions. Joining first, then setting affinity and
/// policy, keeps the child placed from its first instruction on. Register it before any hook
/// that drops privileges: once the child runs as another user it may no longer write the file.
pub trait CommandCgroup {
    /// `procs` is the cgroup's `cgroup.procs`, opened for writing in the parent; the child
    /// writes `0` to it (the kernel reads 0 as "the writing process"). A failure makes `spawn`
    /// fail with the write's errno.
    fn join_cgroup(&mut self, procs: std::fs::File) -> &mut Self;
}

impl CommandCgroup for Command {
    fn join_cgroup(&mut self, procs: std::fs::File) -> &mut Self {
        let hook = move || {
            use std::io::Write as _;
            (&procs).write_all(b"0")
        };
        // SAFETY: the hook runs in the forked child, where only async-signal-safe work is
        // allowed: one write(2) of a static buffer to a descriptor opened in the parent. On
        // failure io::Error holds the raw errno inline, or the static "failed to write whole
        // buffer" message: nothing is allocated.
        unsafe { self.pre_exec(hook) }
    }
}

/// Signal dispositions of a child, set between `fork` and `exec`.
pub trait CommandSignals {
    /// The child starts with `SIGPIPE` ignored, as systemd starts services (`IgnoreSIGPIPE=`,
    /// default yes): a write to a pipe nobody reads any more (the output relay of a supervisor
    /// that was detached) fails with `EPIPE` instead of killing the service.
    fn ignore_sigpipe(&mut self) -> &mut Self;
}

impl CommandSignals for Command {
    fn ignore_sigpipe(&mut self) -> &mut Self {
        let hook = || {
            // SAFETY: signal(2) is async-signal-safe and takes no memory of the parent's; it
            // runs after the standard library reset SIGPIPE to its default for the child.
            if unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) } == libc::SIG_ERR {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        };
        // SAFETY: the hook runs in the forked child and makes one async-signal-safe call.
        unsafe { self.pre_exec(hook) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::{MemoryPolicyRequest, PolicyMode};
    use crate::{Kernel, Mask};

    #[test]
    fn stage_and_errno_survive_the_round_trip() {
        for stage in Stage::ALL {
            for errno in [0, libc::EINVAL, libc::EPERM, 4095] {
                let e = SetupError { stage, errno };
                let io = io::Error::from_raw_os_error(e.encode());
                assert_eq!(SetupError::from_spawn_error(&io), Some(e));
            }
        }
        let plain = io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(SetupError::from_spawn_error(&plain), None);
    }

    #[test]
    fn a_spawned_child_gets_the_placement() {
        let k = LinuxKernel;
        let bits = k.cpu_mask_bits().unwrap();
        let mut mine = Mask::with_bits(bits);
        k.get_affinity(&mut mine).unwrap();
        let first: pinctl_topology::CpuSet = mine.iter().take(1).map(|c| c as u32).collect();
        let setup = ChildSetup::new(Some(&first), None, bits, 1024, true);
        let out = Command::new("cat").arg("/proc/self/status").placement(setup).output().unwrap();
        let status = String::from_utf8(out.stdout).unwrap();
        let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")).unwrap();
        assert_eq!(line.split_whitespace().nth(1).unwrap(), first.to_string());
        // The parent is untouched.
        let mut after = Mask::with_bits(bits);
        k.get_affinity(&mut after).unwrap();
        assert!(after.same_ids(&mine));
    }

    #[test]
    fn a_failing_setup_fails_the_spawn_with_its_stage() {
        let req = MemoryPolicyRequest::new(PolicyMode::Bind, Some("1023".parse().unwrap()));
        let setup = ChildSetup::new(None, Some(&req), 1024, 1024, true);
        let err = Command::new("true").placement(setup).spawn().unwrap_err();
        assert_eq!(
            SetupError::from_spawn_error(&err),
            Some(SetupError { stage: Stage::SetMemoryPolicy, errno: libc::EINVAL })
        );
    }

    #[test]
    fn a_child_joins_its_cgroup_before_exec() {
        // A cgroup v2 directory stand-in is not possible without the kernel; the hook's effect
        // is checked on a plain file: the child wrote `0` (itself) to it before exec.
        let dir = std::env::temp_dir().join(format!("pinctl-join-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let procs = dir.join("cgroup.procs");
        std::fs::write(&procs, "").unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&procs).unwrap();
        let status = Command::new("true").join_cgroup(file).status().unwrap();
        assert!(status.success());
        assert_eq!(std::fs::read_to_string(&procs).unwrap(), "0");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
