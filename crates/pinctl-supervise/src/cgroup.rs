//! One cgroup v2 child per instance, where pinctl may write its subtree (root, or a systemd
//! unit with `Delegate=yes`). cgroup v2 forbids processes in a cgroup that has children with
//! controllers, so pinctl first moves itself into a leaf of its subtree (`_supervisor`, a
//! name no instance or supervisor can have: those start with a letter or digit).
//!
//! The instances live in a subtree that belongs to one supervisor: `<base>/<name>/<instance>`
//! beside its leaf `<base>/<name>/_supervisor`,
//! where `<base>` is pinctl's own cgroup (`/pinctl` when it runs in the root cgroup) and
//! `<name>` the supervisor's name (its service file's, or `[host] name`). pinctl holds an
//! exclusive lock for the subtree for its whole life, so a second supervisor that would share
//! it refuses to start, and nothing it writes (`cgroup.kill`, a cpuset) can reach another
//! supervisor's instances. The lock is on a file in [`LOCKS`], a folder only root may enter
//! (never on the cgroup folder itself: anyone may open that, and so `flock` it). A clean stop
//! removes the subtree, the supervisor's leaf included, once it has moved back to the cgroup
//! it started in. Inside it **the cgroup is the truth**: whatever runs in
//! `<subtree>/<instance>` got there by descending from a process this subtree's supervisor
//! started, so it can be listed, adopted or killed without the doubt a PID carries; nothing
//! outside the subtree is ever signalled through it.
//!
//! A step of the set-up that fails makes the caller fall back to process groups; only a
//! subtree held by another supervisor is fatal (see [`SetupError`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use pinctl_sysfs::FsRoot;
use pinctl_sysfs::cgroup::{MOUNTS, controllers, events, procs};

use crate::lifecycle::Pid;
use pinctl_topology::Placement;

const LEAF: &str = "_supervisor";
/// Where the subtrees' locks are: one folder for the host, as the cgroup hierarchy is one.
pub(crate) const LOCKS: &str = "/run/pinctl/locks";
/// The base pinctl makes for itself below the root cgroup.
const OWN_BASE: &str = "/pinctl";
/// The most cgroups listed in a subtree (a file has at most 8192 instances).
const MAX_CHILDREN: usize = 65536;

/// The writable subtree of one supervisor: `dir` on disk, `path` as `/proc/PID/cgroup` names
/// it, and the lock on `dir` that makes it this supervisor's.
#[derive(Debug)]
pub(crate) struct Subtree {
    dir: PathBuf,
    path: String,
    /// Whether `cpuset` is enabled for the instances' cgroups.
    cpuset: bool,
    /// The cgroup folder this process goes back to before the subtree is removed.
    origin: PathBuf,
    /// The base folder, when pinctl made it (`/pinctl`): removed with the last subtree.
    own_base: Option<PathBuf>,
    /// Held for the life of the supervisor.
    _lock: pinctl_trust::PrivateLock,
}

/// The name of the lock file of the subtree at `path` (`/pinctl/db`): the path with `%` and
/// `/` escaped, so that two subtrees never share one.
fn lock_name(path: &str) -> String {
    let escaped = path.trim_start_matches('/').replace('%', "%25").replace('/', "%2F");
    format!("cgroup-{escaped}.lock")
}

/// Why an instance's cgroup could not be made ready.
#[derive(Debug)]
pub(crate) enum PrepareError {
    /// `enforce = "cgroup"` without the cpuset controller: a retry would fail the same way.
    NoCpuset,
    /// A write or open failed (no descriptor left, say): worth another try.
    Io(String),
}

/// Why the subtree cannot be used.
#[derive(Debug)]
pub(crate) enum SetupError {
    /// No writable v2 hierarchy here: the supervisor uses process groups instead.
    Unavailable(String),
    /// Another supervisor holds the subtree: starting would share its instances' cgroups.
    Claimed(String),
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// The live machine's files, read through pinctl-sysfs's readers.
fn live() -> FsRoot<'static> {
    FsRoot::new(Path::new("/"))
}

/// A cgroup folder (absolute, under a mount of [`MOUNTS`]) as the readers take it: relative
/// to `/`.
fn rel(folder: &Path) -> &str {
    folder.to_str().unwrap_or_default().trim_start_matches('/')
}

/// The processes in the cgroup at `folder`, none when it is gone (or cannot be read).
fn procs_in(folder: &Path) -> Vec<Pid> {
    let listed = procs::read(&mut live(), rel(folder)).ok().flatten().unwrap_or_default();
    listed.into_iter().filter_map(|p| Pid::try_from(p).ok()).collect()
}

impl Subtree {
    /// Sets up the subtree `<base>/<name>` below `own` (this process's v2 cgroup path, `/` for
    /// the root), locks it and moves this process into `<base>/<name>/_supervisor`.
    pub(crate) fn setup(own: &str, name: &str) -> Result<Subtree, SetupError> {
        let Some(root) = MOUNTS
            .iter()
            .map(|m| Path::new("/").join(m))
            .find(|r| r.join("cgroup.controllers").exists())
        else {
            return Err(SetupError::Unavailable(format!(
                "no cgroup v2 hierarchy at /{}",
                MOUNTS.join(" or /")
            )));
        };
        // The root cgroup may hold processes; below it pinctl makes its own folder. A
        // supervisor restarted from inside its old leaf (its cgroup is `.../_supervisor`)
        // sets up the same base again.
        let own = own.trim_end_matches('/');
        let own = own.strip_suffix(&format!("/{name}/{LEAF}")).unwrap_or(own);
        let own = own.strip_suffix(&format!("/{LEAF}")).unwrap_or(own);
        let base = if own.is_empty() { OWN_BASE.to_string() } else { own.to_string() };
        let base_dir = root.join(base.trim_start_matches('/'));
        let dir = base_dir.join(name);
        let path = format!("{base}/{name}");
        let unavailable = |e: io::Error| {
            SetupError::Unavailable(format!(
                "cannot use the cgroup subtree `{}`: {e}",
                dir.display()
            ))
        };
        let leaf = dir.join(LEAF);
        let lock = match lock_subtree(&path) {
            Ok(lock) => lock,
            Err(pinctl_trust::LockError::Held { holder, .. }) => {
                let holder = holder.map_or("unknown".into(), |p| p.to_string());
                return Err(SetupError::Claimed(format!(
                    "the cgroup subtree `{}` belongs to another `pinctl run` (PID {holder} \
                     holds its lock): two supervisors would kill each other's instances there. \
                     Give this service file a supervisor of its own (`[host] name`)",
                    dir.display()
                )));
            }
            Err(e) => return Err(unavailable(io::Error::other(e))),
        };
        // Another supervisor's clean stop may remove `/pinctl` between the two folders made
        // here: made again.
        let mut made = fs::create_dir_all(&leaf);
        for _ in 0..3 {
            match made {
                Err(ref e) if e.kind() == io::ErrorKind::NotFound => {
                    made = fs::create_dir_all(&leaf);
                }
                _ => break,
            }
        }
        made.map_err(unavailable)?;
        write(&leaf.join("cgroup.procs"), &std::process::id().to_string()).map_err(unavailable)?;
        let mut cpuset = false;
        // Controllers go down level by level: the base's children, then the subtree's.
        for level in [&base_dir, &dir] {
            let mut here = false;
            for c in ["cpuset", "memory"] {
                if controllers::read_has(&mut live(), rel(level), c).unwrap_or(false)
                    && write(&level.join("cgroup.subtree_control"), &format!("+{c}")).is_ok()
                {
                    here |= c == "cpuset";
                }
            }
            cpuset = here;
        }
        // Back where it started when that is where it can be (not inside the subtree); from
        // pinctl's own base, the root cgroup it came from.
        let origin =
            if base == OWN_BASE { root.clone() } else { root.join(own.trim_start_matches('/')) };
        let own_base = (base == OWN_BASE).then(|| base_dir.clone());
        Ok(Subtree { dir, path, cpuset, origin, own_base, _lock: lock })
    }

    /// Kills what is left in the supervisor's leaf besides this process, and waits (at most
    /// `patience`) until it is gone: children an earlier supervisor of this name forked just
    /// before it was killed, still on their way to their instance's cgroup and their `exec`.
    /// Left alone, such a child would join its instance's cgroup after this supervisor looked
    /// there, beside the copy it starts. Only one supervisor of this name lives at a time (the
    /// lock), so nothing else can be there. The number killed.
    pub(crate) fn clear_leaf(&self, patience: std::time::Duration) -> usize {
        let me = std::process::id() as Pid;
        let leaf = self.dir.join(LEAF);
        let others = || -> Vec<Pid> { procs_in(&leaf).into_iter().filter(|&p| p != me).collect() };
        let mut killed = 0;
        let deadline = std::time::Instant::now() + patience;
        loop {
            let left = others();
            if left.is_empty() || std::time::Instant::now() >= deadline {
                return killed;
            }
            for pid in left {
                // Wherever it went meanwhile, as long as it stayed in this subtree.
                let prefix = format!("{}/", self.path);
                if kill_if(pid, |cg| cg.starts_with(&prefix)) {
                    killed += 1;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The subtree as `/proc/PID/cgroup` names it (`/pinctl/db`).
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The instance's cgroup as `/proc/PID/cgroup` shows it.
    pub(crate) fn path_of(&self, name: &str) -> String {
        format!("{}/{name}", self.path)
    }

    /// The name of the subtree's cgroup at `path` (as `/proc/PID/cgroup` shows it), when it
    /// is one of this subtree's instance cgroups. An instance renamed by a reload keeps the
    /// cgroup it was started in until it restarts (cgroup v2 refuses to rename a cgroup), so
    /// the cgroup's name is not always its instance's.
    pub(crate) fn name_in<'a>(&self, path: &'a str) -> Option<&'a str> {
        let name = path.strip_prefix(self.path.as_str())?.strip_prefix('/')?;
        pinctl_config::is_instance_name(name).then_some(name)
    }

    /// The instance's cgroup folder (for [`populated_in`] off the supervisor's thread).
    pub(crate) fn dir_of(&self, name: &str) -> PathBuf {
        debug_assert!(pinctl_config::is_instance_name(name), "{name}");
        self.dir.join(name)
    }

    /// Creates the instance's cgroup (with `enforce`, its cpuset the plan's) and opens its
    /// `cgroup.procs` for writing: its child joins the cgroup between fork and exec
    /// (pinctl_sys::CommandCgroup), before its placement is applied.
    pub(crate) fn prepare(
        &self,
        name: &str,
        enforce: Option<&Placement>,
    ) -> Result<fs::File, PrepareError> {
        let dir = self.dir_of(name);
        fs::create_dir_all(&dir)
            .map_err(|e| PrepareError::Io(format!("{}: {e}", dir.display())))?;
        if let Some(p) = enforce {
            if !self.cpuset {
                return Err(PrepareError::NoCpuset);
            }
            let io = |e: io::Error| PrepareError::Io(e.to_string());
            write(&dir.join("cpuset.cpus"), &p.cpus.to_string()).map_err(io)?;
            let mems = if p.memory_nodes.is_empty() { &p.nodes } else { &p.memory_nodes };
            write(&dir.join("cpuset.mems"), &mems.to_string()).map_err(io)?;
        }
        let path = dir.join("cgroup.procs");
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| PrepareError::Io(format!("cannot open `{}`: {e}", path.display())))
    }

    /// The processes in the instance's cgroup now (none when it does not exist).
    pub(crate) fn procs(&self, name: &str) -> Vec<Pid> {
        procs_in(&self.dir_of(name))
    }

    /// The instance cgroups that exist in the subtree, by name (anything that is not an
    /// instance name, such as a folder someone else made, is left out).
    pub(crate) fn children(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.dir) else { return Vec::new() };
        let mut out: Vec<String> = entries
            .take(MAX_CHILDREN)
            .filter_map(|e| {
                let e = e.ok()?;
                e.file_type().ok()?.is_dir().then_some(())?;
                let name = e.file_name().into_string().ok()?;
                pinctl_config::is_instance_name(&name).then_some(name)
            })
            .collect();
        out.sort();
        out
    }

    /// Kills everything in the instance's cgroup: `cgroup.kill` (Linux 5.14+), else each
    /// process it lists through a pidfd, after checking once the pidfd is open that the
    /// process is still in the cgroup (so a PID that exited and was reused outside is never
    /// signalled). The number of processes signalled, or `None` when nothing could be.
    pub(crate) fn kill(&self, name: &str) -> Option<usize> {
        let dir = self.dir_of(name);
        let pids = self.procs(name);
        if write(&dir.join("cgroup.kill"), "1").is_ok() {
            return Some(pids.len());
        }
        let path = self.path_of(name);
        let mut killed = 0;
        for pid in pids {
            if kill_if_in(pid, &path) {
                killed += 1;
            }
        }
        Some(killed)
    }

    /// Whether anything still runs in the instance's cgroup (see [`populated_in`]).
    pub(crate) fn populated(&self, name: &str) -> io::Result<bool> {
        populated_in(&self.dir_of(name))
    }

    /// Removes the instance's cgroup when it is empty (best effort).
    pub(crate) fn remove(&self, name: &str) {
        let _ = fs::remove_dir(self.dir_of(name));
    }

    /// Removes the subtree once every instance's cgroup is gone (best effort): the
    /// instances' cgroups, then this process goes back to the cgroup it started in (a cgroup
    /// cannot be removed while a process is in it), then its leaf and the subtree, and
    /// pinctl's own base when no other supervisor's subtree is left in it. Where this process
    /// cannot go back (a delegated unit's cgroup with controllers enabled), its leaf stays for
    /// systemd to remove with the unit.
    pub(crate) fn remove_all(&self) {
        for name in self.children() {
            self.remove(&name);
        }
        let me = std::process::id().to_string();
        if write(&self.origin.join("cgroup.procs"), &me).is_err() {
            return;
        }
        let _ = fs::remove_dir(self.dir.join(LEAF));
        let _ = fs::remove_dir(&self.dir);
        if let Some(base) = &self.own_base {
            let _ = fs::remove_dir(base);
        }
    }
}

/// Takes the lock of the subtree at `path` in [`LOCKS`].
fn lock_subtree(path: &str) -> Result<pinctl_trust::PrivateLock, pinctl_trust::LockError> {
    let patience = pinctl_trust::LOCK_PATIENCE;
    pinctl_trust::lock_private(Path::new(LOCKS), &lock_name(path), patience)
}

/// Whether the cgroup at `folder` holds a process (`populated 1` in its `cgroup.events`); a
/// cgroup that is gone holds none. `Err` when it cannot be told (no descriptor left, say):
/// the caller must not take that for an empty cgroup.
pub(crate) fn populated_in(folder: &Path) -> io::Result<bool> {
    events::read_populated(&mut live(), rel(folder)).map_err(io::Error::other)
}

/// The v2 cgroup of process `pid` (`/pinctl/db/redis-0`), when it can be read.
pub(crate) fn cgroup_of(pid: Pid) -> Option<String> {
    let pid = u32::try_from(pid).ok()?;
    pinctl_sysfs::proc::pid::cgroup::read_v2(&mut live(), pid).ok().flatten()
}

/// SIGKILL to `pid` through a pidfd, when the process it pins is in cgroup `path`.
fn kill_if_in(pid: Pid, path: &str) -> bool {
    kill_if(pid, |cg| cg == path)
}

/// SIGKILL to `pid` through a pidfd, when the cgroup of the process it pins passes `ours`
/// (checked once the pidfd is open, so a PID reused meanwhile is never signalled).
fn kill_if(pid: Pid, ours: impl Fn(&str) -> bool) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid) else { return false };
    let Ok(pidfd) = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) else {
        return false;
    };
    if !cgroup_of(pid).is_some_and(|cg| ours(&cg)) {
        return false;
    }
    rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_folders_are_read_through_the_root() {
        assert_eq!(rel(Path::new("/sys/fs/cgroup/pinctl/db")), "sys/fs/cgroup/pinctl/db");
        // A cgroup that does not exist holds nothing, and lists nothing.
        let gone = Path::new("/sys/fs/cgroup/pinctl-no-such-cgroup");
        assert!(!populated_in(gone).unwrap());
        assert!(procs_in(gone).is_empty());
        let me = std::process::id() as Pid;
        assert!(cgroup_of(me).is_some_and(|c| c.starts_with('/')), "{:?}", cgroup_of(me));
        assert_eq!(cgroup_of(-1), None);
    }

    #[test]
    fn each_subtree_has_a_lock_file_of_its_own() {
        assert_eq!(lock_name("/pinctl/db"), "cgroup-pinctl%2Fdb.lock");
        // `/` and `%` escaped: no two paths share a name.
        assert_ne!(lock_name("/a/b%2Fc"), lock_name("/a/b/c"));
        assert_eq!(lock_name("/a/b%2Fc"), "cgroup-a%2Fb%252Fc.lock");
    }
}
