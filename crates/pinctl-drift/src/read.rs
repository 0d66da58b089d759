//! Reading live instances and the host under a root (`/`, or a fake tree in tests): which
//! processes an instance is, their threads, their memory per node (from the instance's own
//! cgroup v2 `memory.numa_stat` when it has one, otherwise `/proc/PID/numa_maps` under a time
//! budget), and the nodes' free memory and counters. Every file is read through pinctl-sysfs's
//! reader of that file; on the live machine the files read every cycle go through
//! [`KeptOpen`] descriptors.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pinctl_sys::{Kernel as _, LinuxKernel, Mask};
use pinctl_sysfs::held::KeptOpen;
use pinctl_sysfs::proc::pid::numa_maps::{self, NumaMapsEntry};
use pinctl_sysfs::proc::pid::{self, Pid, stat, status, task};
use pinctl_sysfs::{DiscoveryError, FsRoot, KernelFiles, cgroup, node, proc};
use pinctl_topology::CpuSet;
use pinctl_trust::{self as trust, CheckedReadError, Untrusted};
use rustix::io::Errno;

use crate::sample::{
    HostSample, InstanceSample, MemorySource, NodeMemory, NodeSample, PolicyUse, Refused,
    ThreadSample, policies_of,
};

/// Largest PID file read: a PID and a newline, with room for what some daemons add.
pub const MAX_PID_FILE_BYTES: usize = 4096;

/// How to find an instance's processes, and what proves a process is the instance.
///
/// A supervised instance is the process its supervisor started (and its cgroup). Otherwise
/// a process is the instance only when (1) the PID comes from a PID file that root alone could
/// have written (see [`pinctl_trust`]), or the process is already in the instance's
/// cgroup (its `unit`'s), systemd's rule for PID files; or it is listed by the unit's cgroup;
/// and (2), when the service names a `user`, the process runs as that user. A process that
/// fails is refused: never sampled as the instance, re-pinned or moved; the sample says why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Locator {
    /// A file holding the main PID (`pid-file`), absolute (read under the root).
    pub pid_file: Option<PathBuf>,
    /// A systemd unit: its processes are `/sys/fs/cgroup/system.slice/<unit>/cgroup.procs`.
    pub unit: Option<String>,
    /// Started by a supervisor (`pinctl run`), which knows its process (or that it has none).
    pub supervised: Option<Supervised>,
    /// The service's `user`: the instance's processes run as it.
    pub user: Option<InstanceUser>,
}

/// The user a service runs as (`user`), as this host knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceUser {
    /// As the file writes it: a name or a numeric id.
    pub name: String,
    /// Its uid; `None` when this host does not know the name (no process can then be proven
    /// the instance's).
    pub uid: Option<u32>,
}

impl InstanceUser {
    /// `name` looked up with `uid_of` (a numeric name is its own uid).
    pub fn resolve(name: &str, uid_of: &dyn Fn(&str) -> Option<u32>) -> InstanceUser {
        let uid = name.parse().ok().or_else(|| uid_of(name));
        InstanceUser { name: name.to_string(), uid }
    }
}

/// What a supervisor knows of one of its instances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Supervised {
    /// The main process; `None` while the instance is not running.
    pub pid: Option<u32>,
    /// Its cgroup v2 path as `/proc/PID/cgroup` names it (`/pinctl/db-0`), when it has one of
    /// its own: every process in it is the instance's.
    pub cgroup: Option<String>,
}

/// The cgroup folder (relative to the root) of a systemd unit of the system manager.
fn unit_folder(unit: &str) -> String {
    format!("{}/system.slice/{unit}", cgroup::MOUNTS[0])
}

/// Why an instance could not be sampled.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// Neither a PID file nor a unit says where the instance is.
    #[error("no `pid-file` or `unit` says which process it is")]
    NoLocator,
    /// The PID file or the unit's cgroup names no running process.
    #[error("not running: {0}")]
    NotRunning(String),
    /// The process exited while it was read (ESRCH is normal).
    #[error("process `{pid}` exited while it was sampled")]
    Vanished { pid: u32 },
    /// The watcher lacks a permission; `capability` says which.
    #[error("cannot read `{}`: needs {capability}", path.display())]
    Permission { path: PathBuf, capability: &'static str },
    /// What was found cannot be proven to be the instance (see [`Locator`]).
    #[error("refused: {0}")]
    Refused(String),
    /// The PID file cannot be read safely (a link, a FIFO, too large, ...).
    #[error(transparent)]
    PidFile(#[from] CheckedReadError),
    /// A file could not be read or parsed.
    #[error(transparent)]
    Read(#[from] DiscoveryError),
}

impl SampleError {
    /// A process file error: vanished on ENOENT/ESRCH, permission on EACCES/EPERM.
    fn of(pid: u32, e: DiscoveryError, capability: &'static str) -> SampleError {
        if let DiscoveryError::Io { path, source } = &e {
            match Errno::from_io_error(source) {
                Some(Errno::SRCH) => return SampleError::Vanished { pid },
                Some(Errno::PERM | Errno::ACCESS) => {
                    return SampleError::Permission { path: path.clone(), capability };
                }
                _ => {}
            }
            if source.kind() == io::ErrorKind::NotFound {
                return SampleError::Vanished { pid };
            }
        }
        SampleError::Read(e)
    }
}

/// Where an instance was found.
struct Located {
    pids: Vec<u32>,
    cgroup: Option<String>,
    refused: Vec<Refused>,
}

/// When to walk a process's numa_maps again: at most once per interval, less often for
/// processes whose walks are slow (the walk takes at most 1/[`WALK_COST_SHARE`] of the time
/// between two walks), and not when this cycle's budget is spent and a previous walk exists.
/// A walk that costs more than what is left of the budget is still made while some is left:
/// the cost share already bounds it, and a walk dearer than a whole cycle's budget (a large
/// process, a slow machine) would otherwise never be made again, its first figures standing
/// for the instance for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkScheduler {
    /// The watch interval.
    pub interval: Duration,
}

/// A process's numa_maps walk may take at most 1/100 of the time between two walks.
pub const WALK_COST_SHARE: u32 = 100;

/// The last walk of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct LastWalk {
    pub at: Duration,
    pub cost: Duration,
    pub memory: NodeMemory,
    pub policies: Vec<PolicyUse>,
}

impl WalkScheduler {
    /// Whether to walk now, given the last walk and what is left of this cycle's budget.
    pub fn should_walk(
        &self,
        now: Duration,
        last: Option<&LastWalk>,
        budget_left: Duration,
    ) -> bool {
        let Some(last) = last else { return true };
        // A little slack so samples that come a hair early do not skip a whole interval.
        let spacing = (self.interval - self.interval / 10).max(last.cost * WALK_COST_SHARE);
        now.saturating_sub(last.at) >= spacing && !budget_left.is_zero()
    }

    /// Whether to walk an instance sampled through its cgroup, for its mappings' policies
    /// only: its memory figures come from counters, so the walk, the one cost the cgroup
    /// path exists to avoid, is made at most once per [`POLICY_WALK_INTERVALS`] intervals
    /// (policies change only when the process itself calls `mbind`/`set_mempolicy`, unlike
    /// pages, which the kernel moves all the time), still spaced by its cost and under the
    /// cycle's budget. A first walk waits for a cycle whose budget is not spent.
    pub fn should_walk_for_policies(
        &self,
        now: Duration,
        last: Option<&LastWalk>,
        budget_left: Duration,
    ) -> bool {
        let Some(last) = last else { return !budget_left.is_zero() };
        let every = self.interval * POLICY_WALK_INTERVALS;
        let spacing = (every - self.interval / 10).max(last.cost * WALK_COST_SHARE);
        now.saturating_sub(last.at) >= spacing && !budget_left.is_zero()
    }
}

/// An instance sampled through its cgroup has its numa_maps walked for policies once per this
/// many watch intervals (5 min at the default 10 s).
pub const POLICY_WALK_INTERVALS: u32 = 30;

/// What changes when a file is written or replaced: its inode, size and times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    /// Whether the file was last changed over a second ago (by the wall clock the kernel
    /// stamps files with).
    fn settled(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        now - self.mtime.0.max(self.ctime.0) > 1
    }

    fn of(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt as _;
        FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// What a PID file said when last read.
#[derive(Debug, Clone)]
struct KnownPidFile {
    stamp: FileStamp,
    pid: u32,
    untrusted: Option<Untrusted>,
    seen: u64,
}

/// Things said once per watcher lifetime (a missing capability, no cgroup v2).
#[derive(Debug, Default)]
pub struct Notices {
    said: BTreeSet<String>,
    pending: Vec<String>,
}

impl Notices {
    /// Queues `message` unless it was said before.
    pub fn once(&mut self, message: String) {
        if self.said.insert(message.clone()) {
            self.pending.push(message);
        }
    }

    /// The messages queued since the last call.
    pub fn take(&mut self) -> Vec<String> {
        std::mem::take(&mut self.pending)
    }
}

/// Reads instances and the host under a root, remembering numa_maps walks between cycles.
#[derive(Debug)]
pub struct Reader {
    fs: FsRoot<'static>,
    /// Whether `/sys/fs/cgroup` is a cgroup v2 hierarchy with the memory controller.
    cgroup_v2: Option<bool>,
    walks: BTreeMap<String, LastWalk>,
    pub scheduler: WalkScheduler,
    pub notices: Notices,
    /// Bits of the kernel's CPU mask, when threads' allowed CPUs are asked of the live kernel
    /// (`sched_getaffinity`) instead of read from `status`; `None` under any other root.
    affinity_bits: Option<usize>,
    /// On the live machine, the kernel files and thread lists read every cycle, kept open
    /// ([`KeptOpen`]); `None` under any other root, whose files tests rewrite and remove.
    held: Option<KeptOpen>,
    /// The cgroup folder each main process was last found in, with the cycle it was.
    cgroup_of: BTreeMap<u32, (String, u64)>,
    /// On the live machine, each PID file's stamp, PID and why it is not trusted when last
    /// read, with the cycle it was last asked for.
    pid_files: BTreeMap<PathBuf, KnownPidFile>,
    /// Cycles ended so far.
    cycle: u64,
}

impl Reader {
    /// A reader of the machine whose `/proc` and `/sys` are under `root`.
    pub fn new(root: &Path, interval: Duration) -> Reader {
        Reader {
            fs: FsRoot::new(root),
            cgroup_v2: None,
            walks: BTreeMap::new(),
            scheduler: WalkScheduler { interval },
            notices: Notices::default(),
            // On the live machine a thread's allowed CPUs come from one `sched_getaffinity`
            // instead of its `status` file, which the kernel formats whole (signal masks,
            // memory counters, ~55 lines) for one line: the largest cost of a cycle on the
            // cgroup path. (The syscall answers the mask less offline CPUs, where no thread
            // can run anyway.)
            affinity_bits: (root == Path::new("/"))
                .then(|| LinuxKernel.cpu_mask_bits().ok())
                .flatten(),
            held: (root == Path::new("/")).then(KeptOpen::new),
            cgroup_of: BTreeMap::new(),
            pid_files: BTreeMap::new(),
            cycle: 0,
        }
    }

    /// Whether kernel files are kept open between cycles (the live machine's default; the
    /// benchmark compares both).
    pub fn hold_files(&mut self, on: bool) {
        self.held = (on && self.fs.root() == Path::new("/")).then(KeptOpen::new);
    }

    /// Ends a cycle: held files it did not read are closed.
    pub fn end_cycle(&mut self) {
        if let Some(h) = &mut self.held {
            h.end_cycle();
        }
        let cycle = self.cycle;
        self.cgroup_of.retain(|_, (_, seen)| *seen == cycle);
        self.pid_files.retain(|_, known| known.seen == cycle);
        self.cycle += 1;
    }

    /// Where the files read every cycle are read: through held descriptors on the live
    /// machine, under the root otherwise.
    fn kernel(&mut self) -> &mut dyn KernelFiles {
        match &mut self.held {
            Some(h) => h,
            None => &mut self.fs,
        }
    }

    /// Whether a process is running (on the live machine, its thread list is taken now and
    /// sampled from in the same cycle).
    fn alive(&mut self, pid: u32) -> bool {
        task::exists(self.kernel(), pid)
    }

    /// A thread's allowed CPUs from the kernel: `None` when the thread is gone, `Err` for
    /// anything else (the caller falls back to `status`).
    fn affinity_of(&self, bits: usize, tid: u32) -> io::Result<Option<CpuSet>> {
        let mut mask = Mask::with_bits(bits);
        match LinuxKernel.get_affinity_of(tid, &mut mask) {
            Ok(()) => Ok(Some(mask.to_set())),
            Err(e) if Errno::from_io_error(&e) == Some(Errno::SRCH) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The root files are read under.
    pub fn root(&self) -> &Path {
        self.fs.root()
    }

    /// The instance's processes, the main one first (those refused are left out).
    pub fn pids(&mut self, locator: &Locator) -> Result<Vec<u32>, SampleError> {
        Ok(self.locate(locator)?.0)
    }

    /// The instance's processes, the main one first, and those found but refused (see
    /// [`Locator`]).
    fn locate(&mut self, locator: &Locator) -> Result<(Vec<u32>, Vec<Refused>), SampleError> {
        if let Some(sup) = &locator.supervised {
            return Ok((self.supervised(sup)?.0, Vec::new()));
        }
        if let Some(file) = &locator.pid_file {
            let (mut pid, mut untrusted) = self.pid_in(file)?;
            let mut running = self.alive(pid);
            if !running && self.pid_files.remove(file).is_some() {
                // Read again rather than trust a stamp (the process is gone).
                (pid, untrusted) = self.pid_in(file)?;
                running = self.alive(pid);
            }
            if !running {
                return Err(SampleError::NotRunning(format!(
                    "PID `{pid}` of `{}` is not running",
                    file.display()
                )));
            }
            let of_file = || format!("PID `{pid}` of `{}`", file.display());
            if let Some(why) = untrusted {
                self.in_instance_cgroup(pid, locator).map_err(|not| {
                    SampleError::Refused(format!(
                        "{} is not believed: the file is {why}, and {not} (a PID file root did \
                         not write is believed only for a process already in the instance's \
                         cgroup)",
                        of_file()
                    ))
                })?;
            }
            self.runs_as_user(pid, locator)
                .map_err(|not| SampleError::Refused(format!("{} {not}", of_file())))?;
            return Ok((vec![pid], Vec::new()));
        }
        let Some(unit) = &locator.unit else { return Err(SampleError::NoLocator) };
        let folder = unit_folder(unit);
        let listed = cgroup::procs::read(self.kernel(), &folder)?.unwrap_or_default();
        if listed.is_empty() {
            return Err(SampleError::NotRunning(format!("unit `{unit}` has no processes")));
        }
        let (mut pids, mut refused) = (Vec::new(), Vec::new());
        for pid in listed {
            match self.runs_as_user(pid, locator) {
                Ok(()) => pids.push(pid),
                Err(reason) => refused.push(Refused { pid, reason }),
            }
        }
        if pids.is_empty() {
            let first = &refused[0];
            return Err(SampleError::Refused(format!(
                "no process of unit `{unit}` is the instance's: PID `{}` {}{}",
                first.pid,
                first.reason,
                match refused.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                }
            )));
        }
        Ok((pids, refused))
    }

    /// The cgroup v2 path (as `/proc/PID/cgroup` names it) the instance's processes are in,
    /// when one is known without asking them: its unit's, or its supervisor's.
    fn instance_cgroup(locator: &Locator) -> Option<(String, String)> {
        if let Some(unit) = &locator.unit {
            return Some((format!("/system.slice/{unit}"), format!("unit `{unit}`")));
        }
        let cgroup = locator.supervised.as_ref()?.cgroup.clone()?;
        Some((cgroup, "its supervisor".to_string()))
    }

    /// `Ok` when `pid` is in the instance's cgroup or below it; otherwise why not, as the end
    /// of a sentence.
    fn in_instance_cgroup(&mut self, pid: u32, locator: &Locator) -> Result<(), String> {
        let Some((cgroup, whose)) = Self::instance_cgroup(locator) else {
            return Err("no `unit` gives a cgroup to check the process against".into());
        };
        let cgroup = cgroup.trim_end_matches('/').to_string();
        let found = pid::cgroup::read_v2(self.kernel(), pid).ok().flatten();
        match found {
            Some(path) if path == cgroup || path.starts_with(&format!("{cgroup}/")) => Ok(()),
            Some(path) => {
                Err(format!("the process is in cgroup `{path}`, not in `{cgroup}` of {whose}"))
            }
            None => Err(format!(
                "the process's cgroup v2 path cannot be read to check it against `{cgroup}` of {whose}"
            )),
        }
    }

    /// `Ok` when the service names no `user` or `pid` runs as it (real and effective uid);
    /// otherwise why not, as the end of a sentence.
    fn runs_as_user(&mut self, pid: u32, locator: &Locator) -> Result<(), String> {
        let Some(user) = &locator.user else { return Ok(()) };
        let Some(uid) = user.uid else {
            return Err(format!(
                "cannot be checked against user `{}`, which this host does not know",
                user.name
            ));
        };
        match status::read(&mut self.fs, pid).map(|s| s.map(|s| s.uids)) {
            Ok(Some(Some(ids))) if ids.real == uid && ids.effective == uid => Ok(()),
            Ok(Some(Some(ids))) => Err(format!(
                "runs as uid {} (effective {}), not as user `{}` (uid {uid})",
                ids.real, ids.effective, user.name
            )),
            Ok(Some(None)) => Err(format!(
                "cannot be checked against user `{}`: its status has no `Uid:` line",
                user.name
            )),
            Ok(None) => Err("exited before its user could be checked".into()),
            Err(e) => Err(format!("cannot be checked against user `{}`: {e}", user.name)),
        }
    }

    /// The PID a PID file holds, and why the file is not trusted if it is not (see
    /// [`pinctl_trust`]). On the live machine the file is read again only when it
    /// changed: one `statx` a cycle where a checked read takes a few system calls per folder
    /// (the daemon rewrites or replaces the file when it restarts, which changes its inode,
    /// size or times; a folder or link on the way that root alone can change keeps a trusted
    /// file trusted, and an untrusted one is proven again at every sample).
    fn pid_in(&mut self, file: &Path) -> Result<(u32, Option<Untrusted>), SampleError> {
        let stamp = match self.held.is_some() {
            true => std::fs::metadata(file).ok().map(|m| FileStamp::of(&m)),
            false => None,
        };
        if let (Some(stamp), Some(known)) = (stamp, self.pid_files.get_mut(file)) {
            if known.stamp == stamp {
                known.seen = self.cycle;
                return Ok((known.pid, known.untrusted.clone()));
            }
        }
        let read = match trust::read_checked(self.fs.root(), file, MAX_PID_FILE_BYTES) {
            Ok(read) => read,
            Err(CheckedReadError::NotFound { .. }) => {
                return Err(SampleError::NotRunning(format!(
                    "`{}` does not exist",
                    file.display()
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let pid: u32 = std::str::from_utf8(&read.bytes)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .filter(|&pid| pid > 0)
            .ok_or_else(|| SampleError::NotRunning(format!("`{}` holds no PID", file.display())))?;
        // File times tick coarsely (a jiffy): a file written within the last second could be
        // written again with the same stamp, so it is read again until it is older.
        match stamp.filter(|s| s.settled()) {
            Some(stamp) => {
                let known = KnownPidFile {
                    stamp,
                    pid,
                    untrusted: read.untrusted.clone(),
                    seen: self.cycle,
                };
                self.pid_files.insert(file.to_path_buf(), known);
            }
            None => {
                self.pid_files.remove(file);
            }
        }
        Ok((pid, read.untrusted))
    }

    /// A supervised instance's processes (the main one first, then the others of its cgroup)
    /// and its own cgroup (see [`Reader::own_cgroup`]), from one read of `cgroup.procs`.
    fn supervised(&mut self, sup: &Supervised) -> Result<(Vec<u32>, Option<String>), SampleError> {
        let Some(main) = sup.pid else {
            return Err(SampleError::NotRunning("not running under the supervisor".into()));
        };
        if !self.alive(main) {
            return Err(SampleError::NotRunning(format!("PID `{main}` is not running")));
        }
        let mut pids = vec![main];
        let Some(dir) = sup.cgroup.as_deref().and_then(cgroup::folder) else {
            return Ok((pids, None));
        };
        let v2 = self.has_cgroup_v2();
        // The processes it forked share its cgroup; the main one stays first. The cgroup is
        // the instance's own, whatever it has forked, while the main process is in it.
        let Ok(Some(procs)) = cgroup::procs::read(self.kernel(), &dir) else {
            return Ok((pids, None));
        };
        let mut listed = false;
        for pid in procs {
            if pid == main {
                listed = true;
            } else {
                pids.push(pid);
            }
        }
        Ok((pids, (v2 && listed).then_some(dir)))
    }

    /// The instance's processes, its own cgroup, and the processes refused.
    fn pids_and_cgroup(&mut self, locator: &Locator) -> Result<Located, SampleError> {
        // Without a cgroup of its own from the supervisor, it is looked up as any process is.
        if let Some(sup) = locator.supervised.as_ref().filter(|s| s.cgroup.is_some()) {
            let (pids, cgroup) = self.supervised(sup)?;
            return Ok(Located { pids, cgroup, refused: Vec::new() });
        }
        let (pids, refused) = self.locate(locator)?;
        // A cgroup that holds a refused process is not the instance's alone: its counters
        // would count that process.
        let cgroup = match refused.is_empty() {
            true => self.own_cgroup(locator, &pids),
            false => None,
        };
        Ok(Located { pids, cgroup, refused })
    }

    /// Whether `/sys/fs/cgroup` is cgroup v2 with the memory controller (said once when not).
    pub fn has_cgroup_v2(&mut self) -> bool {
        if let Some(v) = self.cgroup_v2 {
            return v;
        }
        let mount = cgroup::MOUNTS[0];
        let v = matches!(cgroup::controllers::read_has(&mut self.fs, mount, "memory"), Ok(true));
        if !v {
            self.notices.once(format!(
                "`{}` is not a cgroup v2 hierarchy with the memory controller: memory is sampled \
                 from /proc/PID/numa_maps (a page-table walk, at most once per interval)",
                self.fs.full(mount).display()
            ));
        }
        self.cgroup_v2 = Some(v);
        v
    }

    /// The cgroup v2 folder (relative to the root) that holds exactly this instance's process
    /// tree, if there is one: every process of the cgroup is one of `pids` or descends from
    /// the first. Big cgroups (over 64 processes) are taken as shared.
    pub fn own_cgroup(&mut self, locator: &Locator, pids: &[u32]) -> Option<String> {
        if !self.has_cgroup_v2() {
            return None;
        }
        if let Some(unit) = &locator.unit {
            return Some(unit_folder(unit));
        }
        // A supervisor's cgroup of the instance is its own, whatever it has forked: trusted
        // while the main process is in it.
        if let Some(sup) = locator.supervised.as_ref().filter(|s| s.cgroup.is_some()) {
            return self.supervised(sup).ok()?.1;
        }
        let main = *pids.first()?;
        // The cgroup found for this process before, while its `cgroup.procs` still lists it
        // (a process that moved is listed by its new cgroup only); else `/proc/PID/cgroup`.
        let known = self.cgroup_of.get(&main).map(|(dir, _)| dir.clone());
        let dir = match known {
            Some(dir) => dir,
            None => cgroup::folder(&pid::cgroup::read_v2(self.kernel(), main).ok()??)?,
        };
        let procs = cgroup::procs::read(self.kernel(), &dir).ok().flatten();
        let Some(procs) = procs.filter(|p| p.contains(&main)) else {
            // Moved, or its cgroup is gone: ask /proc again (once).
            return match self.cgroup_of.remove(&main) {
                Some(_) => self.own_cgroup(locator, pids),
                None => None,
            };
        };
        self.cgroup_of.insert(main, (dir.clone(), self.cycle));
        if procs.len() > 64 {
            return None;
        }
        procs.iter().all(|&p| pids.contains(&p) || self.descends_from(p, main)).then_some(dir)
    }

    fn descends_from(&mut self, mut pid: u32, ancestor: u32) -> bool {
        for _ in 0..64 {
            let Ok(Some(stat)) = stat::read(&mut self.fs, pid) else { return false };
            if stat.ppid == ancestor {
                return true;
            }
            if stat.ppid <= 1 {
                return false;
            }
            pid = stat.ppid;
        }
        false
    }

    /// Memory per node from a cgroup's `memory.numa_stat` and `hugetlb.*.numa_stat`.
    pub fn cgroup_memory(&mut self, dir: &str) -> Result<NodeMemory, SampleError> {
        let numa_stat = cgroup::numa_stat::read(self.kernel(), dir, NodeMemory::NUMA_STAT_KEYS)?;
        let memory = numa_stat.ok_or_else(|| DiscoveryError::Io {
            path: self.fs.full(&format!("{dir}/memory.numa_stat")),
            source: io::Error::from(io::ErrorKind::NotFound),
        })?;
        let hugetlb =
            cgroup::numa_stat::read_hugetlb(self.kernel(), dir, NodeMemory::HUGETLB_KEYS)?;
        Ok(NodeMemory::from_numa_stat(&memory, &hugetlb))
    }

    /// `/proc/PID/numa_maps`.
    pub fn numa_maps(&mut self, pid: u32) -> Result<Vec<NumaMapsEntry>, SampleError> {
        match numa_maps::read(&mut self.fs, pid) {
            Ok(Some(maps)) => Ok(maps),
            Ok(None) => Err(SampleError::Vanished { pid }),
            Err(e) => {
                Err(SampleError::of(pid, e, "ptrace read access (same user, or CAP_SYS_PTRACE)"))
            }
        }
    }

    /// Every thread of a process: allowed CPUs and, unless they are all within `planned`
    /// (a thread confined to the plan cannot run outside it), last CPU. Threads that exit
    /// while they are read are left out.
    pub fn threads(
        &mut self,
        pid: u32,
        planned: Option<&CpuSet>,
    ) -> Result<Vec<ThreadSample>, SampleError> {
        let Some(tids) = task::read(self.kernel(), pid)
            .map_err(|e| SampleError::of(pid, e, "read access to /proc"))?
        else {
            return Err(SampleError::Vanished { pid });
        };
        let mut out = Vec::with_capacity(tids.len());
        for tid in tids {
            let from_kernel = match self.affinity_bits {
                Some(bits) => self.affinity_of(bits, tid).ok(),
                None => None,
            };
            let status = match from_kernel {
                Some(Some(cpus)) => Ok(Some(Some(cpus))),
                Some(None) => Ok(None),
                None => {
                    status::read(&mut self.fs, Pid::Thread { pid, tid }).map(|s| s.map(|s| s.cpus))
                }
            };
            // The thread's `stat` (last CPU, state) matters only when it may run outside the
            // plan: `do_task_stat` is the largest part of a thread's sample.
            let confined = |allowed: &Option<CpuSet>| {
                planned.zip(allowed.as_ref()).is_some_and(|(p, a)| a.is_subset(p))
            };
            let stat = match &status {
                Ok(Some(allowed)) if confined(allowed) => Ok(Some(None)),
                Ok(Some(_)) => {
                    stat::read(&mut self.fs, Pid::Thread { pid, tid }).map(|s| s.map(Some))
                }
                _ => Ok(None),
            };
            match (stat, status) {
                (Ok(Some(stat)), Ok(Some(Some(allowed)))) => out.push(ThreadSample {
                    tid,
                    allowed,
                    last_cpu: stat.as_ref().map(|s| s.processor),
                    running: stat.is_some_and(|s| s.state == 'R'),
                }),
                (Ok(None), _) | (_, Ok(None)) | (_, Ok(Some(None))) => {}
                (Err(e), _) | (_, Err(e)) => {
                    match SampleError::of(tid, e, "read access to /proc") {
                        SampleError::Vanished { .. } => {}
                        other => return Err(other),
                    }
                }
            }
        }
        Ok(out)
    }

    /// One sample of an instance. `budget` is what is left of this cycle's numa_maps time;
    /// a walk made here is taken off it. Threads confined to `planned_cpus` are not asked
    /// where they last ran. A cycle's samples end with [`Reader::end_cycle`]: until then a
    /// process's thread list is the one taken at its first sample of the cycle.
    pub fn sample(
        &mut self,
        instance: &str,
        locator: &Locator,
        planned_cpus: Option<&CpuSet>,
        now: Duration,
        budget: &mut Duration,
    ) -> Result<InstanceSample, SampleError> {
        let started = Instant::now();
        let Located { pids, cgroup, refused } = self.pids_and_cgroup(locator)?;
        let start_times = self.start_times(&pids)?;
        let threads = self.threads_of(&pids, planned_cpus)?;
        let (memory, source, policies) = match (&cgroup, self.counted(instance, cgroup.as_deref())?)
        {
            (Some(_), Some(memory)) => {
                let policies = self.cgroup_policies(instance, &pids, now, budget)?;
                (memory, MemorySource::Cgroup, policies)
            }
            _ => self.walked(instance, &pids, now, budget)?,
        };
        Ok(InstanceSample {
            at: now,
            pids,
            start_times,
            refused,
            cgroup: cgroup.map(|c| format!("/{c}")),
            memory,
            source,
            threads,
            policies,
            cost: started.elapsed(),
        })
    }

    /// Each process's start time, so whoever acts on the sample can tell the process from
    /// one that took its PID since (a PID is reused; PID and start time are not). The first
    /// process gone is the instance gone; any other gone is left out.
    fn start_times(&mut self, pids: &[u32]) -> Result<BTreeMap<u32, u64>, SampleError> {
        let mut start_times = BTreeMap::new();
        for &pid in pids {
            match stat::read(&mut self.fs, pid) {
                Ok(Some(stat)) => {
                    start_times.insert(pid, stat.start_time);
                }
                Ok(None) if pid == pids[0] => return Err(SampleError::Vanished { pid }),
                Ok(None) => {}
                Err(e) => return Err(SampleError::of(pid, e, "read access to /proc")),
            }
        }
        Ok(start_times)
    }

    /// The threads of every process of the instance (of any but the first, gone ones left
    /// out).
    fn threads_of(
        &mut self,
        pids: &[u32],
        planned_cpus: Option<&CpuSet>,
    ) -> Result<Vec<ThreadSample>, SampleError> {
        let mut threads = Vec::new();
        for &pid in pids {
            match self.threads(pid, planned_cpus) {
                Ok(t) => threads.extend(t),
                Err(SampleError::Vanished { .. }) if pid != pids[0] => {}
                Err(e) => return Err(e),
            }
        }
        Ok(threads)
    }

    /// The instance's memory by node as its cgroup counts it, if it has a cgroup with them.
    /// A cgroup without the memory controller (its parent's `cgroup.subtree_control` lacks
    /// `memory`: a container, a unit without `Delegate=yes`) has no counters: the instance
    /// is sampled through numa_maps instead, and that is said once.
    fn counted(
        &mut self,
        instance: &str,
        cgroup: Option<&str>,
    ) -> Result<Option<NodeMemory>, SampleError> {
        let Some(dir) = cgroup else { return Ok(None) };
        match self.cgroup_memory(dir) {
            Err(SampleError::Read(DiscoveryError::Io { source, .. }))
                if source.kind() == io::ErrorKind::NotFound =>
            {
                self.notices.once(format!(
                    "`/{dir}` has no memory controller (its parent's `cgroup.subtree_control` \
                     lacks `memory`): {instance}'s memory is sampled from /proc/PID/numa_maps \
                     (a page-table walk, at most once per interval)"
                ));
                Ok(None)
            }
            counted => counted.map(Some),
        }
    }

    /// The memory policies of an instance its cgroup counts: they only come from numa_maps,
    /// a walk at a much lower rate, else the last walk's.
    fn cgroup_policies(
        &mut self,
        instance: &str,
        pids: &[u32],
        now: Duration,
        budget: &mut Duration,
    ) -> Result<Vec<PolicyUse>, SampleError> {
        let last = self.walks.get(instance);
        if !self.scheduler.should_walk_for_policies(now, last, *budget) {
            return Ok(last.map(|w| w.policies.clone()).unwrap_or_default());
        }
        match self.walk(instance, pids, now, budget) {
            Ok((_, p)) => Ok(p),
            // The counters need no ptrace access, the walk does: keep the figures.
            Err(SampleError::Permission { capability, .. }) => {
                self.notices.once(format!(
                    "reading other processes' memory maps needs {capability}: \
                     instances sampled through their cgroup are not judged on \
                     their memory policies"
                ));
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        }
    }

    fn walked(
        &mut self,
        instance: &str,
        pids: &[u32],
        now: Duration,
        budget: &mut Duration,
    ) -> Result<(NodeMemory, MemorySource, Vec<PolicyUse>), SampleError> {
        let last = self.walks.get(instance);
        if !self.scheduler.should_walk(now, last, *budget) {
            let last = last.expect("should_walk walks when there is no previous walk");
            return Ok((last.memory.clone(), MemorySource::NumaMapsCached, last.policies.clone()));
        }
        let (memory, policies) = self.walk(instance, pids, now, budget)?;
        Ok((memory, MemorySource::NumaMaps, policies))
    }

    /// Walks the numa_maps of every process of an instance now, remembering the walk and
    /// taking its cost off `budget`.
    fn walk(
        &mut self,
        instance: &str,
        pids: &[u32],
        now: Duration,
        budget: &mut Duration,
    ) -> Result<(NodeMemory, Vec<PolicyUse>), SampleError> {
        let started = Instant::now();
        let mut memory = NodeMemory::default();
        let mut maps = Vec::new();
        for &pid in pids {
            match self.numa_maps(pid) {
                Ok(m) => {
                    memory.add(&NodeMemory::from_numa_maps(&m));
                    maps.extend(m);
                }
                Err(SampleError::Vanished { .. }) if pid != pids[0] => {}
                Err(e) => return Err(e),
            }
        }
        let cost = started.elapsed();
        *budget = budget.saturating_sub(cost);
        let policies = policies_of(&maps);
        self.walks.insert(
            instance.to_string(),
            LastWalk { at: now, cost, memory: memory.clone(), policies: policies.clone() },
        );
        Ok((memory, policies))
    }

    /// Walks the numa_maps of an instance's processes now, outside any cycle's budget (a
    /// rebalance measuring what it moved), and remembers the walk as its last, so that the
    /// next sample starts from these figures rather than from the ones before the move.
    pub fn walk_now(
        &mut self,
        instance: &str,
        pids: &[u32],
        now: Duration,
    ) -> Result<NodeMemory, SampleError> {
        let mut unbounded = Duration::MAX;
        self.walk(instance, pids, now, &mut unbounded).map(|(memory, _)| memory)
    }

    /// Forgets an instance's last walk (it exited or restarted).
    pub fn forget(&mut self, instance: &str) {
        self.walks.remove(instance);
    }

    /// One sample of the host: free memory and counters of every node, pages migrated by
    /// automatic NUMA balancing.
    pub fn host(&mut self) -> Result<HostSample, DiscoveryError> {
        let mut out = HostSample::default();
        for n in node::ids(&mut self.fs)? {
            let mem = node::meminfo::read(self.kernel(), n)?;
            let stat = node::numastat::read(self.kernel(), n)?;
            let mem = mem.unwrap_or_default();
            let stat = stat.unwrap_or_default();
            out.nodes.insert(
                n,
                NodeSample {
                    total_bytes: mem.total_bytes.unwrap_or(0),
                    free_bytes: mem.free_bytes.unwrap_or(0),
                    numa_miss: stat.numa_miss,
                    numa_foreign: stat.numa_foreign,
                },
            );
        }
        let migrated = proc::vmstat::read_counter(self.kernel(), "numa_pages_migrated")?;
        out.numa_pages_migrated = migrated.unwrap_or(0);
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fs;

    use super::*;

    /// Writes a file of a fake tree, with its folders.
    pub(crate) fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// A `/proc/PID/stat` line of a sleeping task.
    pub(crate) fn stat(pid: u32, ppid: u32, cpu: u32) -> String {
        // Fields 3 to 44; field 22 (start time) is 500, field 39 the CPU.
        let mut f: Vec<String> = (3..=44).map(|_| "0".to_string()).collect();
        f[0] = "S".into();
        f[1] = ppid.to_string();
        f[22 - 3] = "500".into();
        f[39 - 3] = cpu.to_string();
        format!("{pid} (db) {}\n", f.join(" "))
    }

    /// A host with two nodes and a process 100 (threads 100, 101) started from a PID file.
    fn tree(cgroup_v2: bool) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "run/db.pid", "100\n");
        for (tid, cpu, allowed) in [(100, 1, "0-3"), (101, 6, "0-7")] {
            write(r, &format!("proc/100/task/{tid}/stat"), &stat(tid, 1, cpu));
            write(
                r,
                &format!("proc/100/task/{tid}/status"),
                &format!("Cpus_allowed_list:\t{allowed}\n"),
            );
        }
        write(r, "proc/100/stat", &stat(100, 1, 1));
        write(
            r,
            "proc/100/numa_maps",
            "1000 bind:0 anon=3 N0=2 N1=1 kernelpagesize_kB=4\n2000 default file=/lib/x N1=4\n",
        );
        write(r, "proc/100/cgroup", "0::/system.slice/db.service\n");
        if cgroup_v2 {
            write(r, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
        }
        let cg = "sys/fs/cgroup/system.slice/db.service";
        write(r, &format!("{cg}/cgroup.procs"), "100\n");
        write(
            r,
            &format!("{cg}/memory.numa_stat"),
            "anon N0=8192 N1=4096\nfile N0=0 N1=0\nshmem N0=0 N1=0\n",
        );
        write(r, &format!("{cg}/hugetlb.2MB.numa_stat"), "total=2097152 N0=2097152 N1=0\n");
        for n in [0, 1] {
            write(
                r,
                &format!("sys/devices/system/node/node{n}/meminfo"),
                &format!("Node {n} MemTotal: 1024 kB\nNode {n} MemFree: {} kB\n", 100 * (n + 1)),
            );
            write(
                r,
                &format!("sys/devices/system/node/node{n}/numastat"),
                &format!("numa_hit 5\nnuma_miss {n}\nnuma_foreign 7\n"),
            );
        }
        write(r, "proc/vmstat", "nr_free_pages 1\nnuma_pages_migrated 42\n");
        d
    }

    fn by_pid_file() -> Locator {
        Locator { pid_file: Some("/run/db.pid".into()), ..Locator::default() }
    }

    /// On the live machine a PID file is read again only when it changed: a rewrite, a
    /// replacement, or a PID that is no longer running, are each seen at the next sample.
    #[test]
    fn a_pid_file_is_read_again_when_it_changes() {
        struct Kill(std::process::Child);
        impl Drop for Kill {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let sleep = || Kill(std::process::Command::new("sleep").arg("100").spawn().unwrap());
        let (a, mut b) = (sleep(), sleep());
        let (pid_a, pid_b) = (a.0.id(), b.0.id());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("db.pid");
        let locator = Locator { pid_file: Some(file.clone()), ..Locator::default() };
        let mut r = Reader::new(Path::new("/"), Duration::from_secs(10));
        let pids = |r: &mut Reader| {
            let p = r.pids(&locator);
            r.end_cycle();
            p
        };
        // A file changed within the last second is read at every sample; an older one is
        // remembered by its stamp.
        let written = std::time::Instant::now();
        fs::write(&file, format!("{pid_a}\n")).unwrap();
        assert_eq!(pids(&mut r).unwrap(), [pid_a]);
        // (Unless this machine stalled for most of a second meanwhile.)
        if written.elapsed() < Duration::from_millis(900) {
            assert!(!r.pid_files.contains_key(&file), "too fresh to be trusted");
        }
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(pids(&mut r).unwrap(), [pid_a]);
        assert!(r.pid_files.contains_key(&file));
        fs::write(&file, format!("{pid_b}\n")).unwrap();
        assert_eq!(pids(&mut r).unwrap(), [pid_b], "rewritten in place");
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(pids(&mut r).unwrap(), [pid_b]);
        assert!(r.pid_files.contains_key(&file));
        b.0.kill().unwrap();
        b.0.wait().unwrap();
        assert!(matches!(pids(&mut r), Err(SampleError::NotRunning(_))));
        let other = dir.path().join("new.pid");
        fs::write(&other, format!("{pid_a}\n")).unwrap();
        fs::rename(&other, &file).unwrap();
        assert_eq!(pids(&mut r).unwrap(), [pid_a], "replaced");
        drop(a);
    }

    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn refusal(r: Result<Vec<u32>, SampleError>) -> String {
        match r {
            Err(SampleError::Refused(why)) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    /// systemd's rule: a PID from a file root did not write (or could not have written
    /// alone) is believed only for a process already in the instance's cgroup.
    #[test]
    fn a_pid_file_others_could_write_is_believed_only_for_a_process_in_the_units_cgroup() {
        let d = tree(true);
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        let file_only = by_pid_file();
        let with_unit = Locator { unit: Some("db.service".into()), ..by_pid_file() };
        assert_eq!(r.pids(&file_only).unwrap(), [100], "root's own file in root's folder");
        // Anyone may write the folder: the PID could be anyone's.
        chmod(&d.path().join("run"), 0o777);
        let why = refusal(r.pids(&file_only));
        assert!(
            why.starts_with(
                "PID `100` of `/run/db.pid` is not believed: the file is in `/run`, \
                             a folder group or others may write (mode 0777), and no `unit` gives \
                             a cgroup to check the process against"
            ),
            "{why}"
        );
        // The unit's cgroup holds the process (proc/100/cgroup): believed.
        assert_eq!(r.pids(&with_unit).unwrap(), [100]);
        // A process elsewhere is refused, whatever the file says.
        write(d.path(), "proc/100/cgroup", "0::/user.slice/session-1.scope\n");
        let why = refusal(r.pids(&with_unit));
        assert!(
            why.contains(
                "the process is in cgroup `/user.slice/session-1.scope`, not in \
                          `/system.slice/db.service` of unit `db.service`"
            ),
            "{why}"
        );
        // Owned by another user, in a folder only root may write: the same.
        chmod(&d.path().join("run"), 0o755);
        std::os::unix::fs::lchown(d.path().join("run/db.pid"), Some(65534), None).unwrap();
        let why = refusal(r.pids(&with_unit));
        assert!(why.contains("the file is owned by uid 65534, not root"), "{why}");
        // And a sample says so instead of sampling.
        let mut budget = Duration::from_secs(1);
        let e = r.sample("db", &with_unit, None, Duration::ZERO, &mut budget).unwrap_err();
        assert!(e.to_string().starts_with("refused: PID `100` of `/run/db.pid`"), "{e}");
    }

    #[test]
    fn pid_files_that_are_links_fifos_or_too_large_are_not_read() {
        let d = tree(true);
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        fs::remove_file(d.path().join("run/db.pid")).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", d.path().join("run/db.pid")).unwrap();
        let e = r.pids(&by_pid_file()).unwrap_err();
        assert_eq!(e.to_string(), "`/run/db.pid` is a symbolic link: it is not followed");
        fs::remove_file(d.path().join("run/db.pid")).unwrap();
        let made =
            std::process::Command::new("mkfifo").arg(d.path().join("run/db.pid")).status().unwrap();
        assert!(made.success());
        let e = r.pids(&by_pid_file()).unwrap_err();
        assert_eq!(e.to_string(), "`/run/db.pid` is not a regular file (a FIFO)");
        fs::remove_file(d.path().join("run/db.pid")).unwrap();
        write(d.path(), "run/db.pid", &"1".repeat(MAX_PID_FILE_BYTES + 1));
        assert!(r.pids(&by_pid_file()).unwrap_err().to_string().contains("holds more than"));
    }

    #[test]
    fn a_process_of_another_user_is_not_the_instance() {
        let d = tree(true);
        let status = |uid: u32| format!("Name:\tdb\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n");
        write(d.path(), "proc/100/status", &status(0));
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        let user = |uid| Some(InstanceUser { name: "redis".into(), uid });
        let as_redis = Locator { user: user(Some(999)), ..by_pid_file() };
        let why = refusal(r.pids(&as_redis));
        assert_eq!(
            why,
            "PID `100` of `/run/db.pid` runs as uid 0 (effective 0), not as user `redis` (uid 999)"
        );
        let unknown = Locator { user: user(None), ..by_pid_file() };
        assert!(refusal(r.pids(&unknown)).ends_with("which this host does not know"));
        write(d.path(), "proc/100/status", &status(999));
        assert_eq!(r.pids(&as_redis).unwrap(), [100]);
        // Found through its unit: the unit's other process, of another user, is refused and
        // named in the sample; the instance is sampled from its own process alone (the
        // unit's counters would count the other one).
        let cg = "sys/fs/cgroup/system.slice/db.service";
        write(d.path(), &format!("{cg}/cgroup.procs"), "100\n555\n");
        write(d.path(), "proc/555/status", &status(0));
        write(d.path(), "proc/555/stat", &stat(555, 1, 0));
        let by_unit = Locator {
            unit: Some("db.service".into()),
            user: user(Some(999)),
            ..Locator::default()
        };
        let mut budget = Duration::from_secs(1);
        let s = r.sample("db", &by_unit, None, Duration::ZERO, &mut budget).unwrap();
        assert_eq!(s.pids, [100]);
        assert_eq!(s.source, MemorySource::NumaMaps);
        assert_eq!(s.refused.len(), 1);
        assert_eq!(s.refused[0].pid, 555);
        assert!(s.refused[0].reason.starts_with("runs as uid 0"), "{:?}", s.refused);
        // None of the unit's processes is the user's: refused, naming the first.
        write(d.path(), "proc/100/status", &status(0));
        let e = r.sample("db", &by_unit, None, Duration::ZERO, &mut budget).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "refused: no process of unit `db.service` is the instance's: PID `100` runs as uid 0"
            ),
            "{e}"
        );
    }

    /// A process's cgroup is looked up in `/proc/PID/cgroup` once, then trusted while that
    /// cgroup's `cgroup.procs` lists it; a process that moved is followed to its new cgroup.
    #[test]
    fn follows_a_process_that_moves_to_another_cgroup() {
        let d = tree(true);
        let r0 = d.path();
        let mut r = Reader::new(r0, Duration::from_secs(10));
        let mut budget = Duration::from_millis(100);
        let mut cgroup_at = |r: &mut Reader, now: u64| {
            let s = r.sample("db", &by_pid_file(), None, Duration::from_secs(now), &mut budget);
            r.end_cycle();
            s.unwrap().cgroup.unwrap()
        };
        let old = "/sys/fs/cgroup/system.slice/db.service";
        assert_eq!(cgroup_at(&mut r, 0), old);
        // /proc now names another cgroup but the first still lists the process: not read
        // again (the kernel never says both; this shows the lookup is not repeated).
        write(r0, "proc/100/cgroup", "0::/db.slice/db-2.scope\n");
        let new = "sys/fs/cgroup/db.slice/db-2.scope";
        write(r0, &format!("{new}/cgroup.procs"), "100\n");
        write(r0, &format!("{new}/memory.numa_stat"), "anon N0=0 N1=4096\n");
        assert_eq!(cgroup_at(&mut r, 10), old);
        // Moved: the old cgroup no longer lists it.
        write(r0, "sys/fs/cgroup/system.slice/db.service/cgroup.procs", "");
        assert_eq!(cgroup_at(&mut r, 20), format!("/{new}"));
        assert_eq!(cgroup_at(&mut r, 30), format!("/{new}"));
    }

    #[test]
    fn samples_through_the_instances_own_cgroup() {
        let d = tree(true);
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        let mut budget = Duration::from_millis(100);
        let s = r.sample("db", &by_pid_file(), None, Duration::ZERO, &mut budget).unwrap();
        assert_eq!(s.source, MemorySource::Cgroup);
        assert_eq!(s.cgroup.as_deref(), Some("/sys/fs/cgroup/system.slice/db.service"));
        assert_eq!(s.memory.0[&0].anon, 8192);
        assert_eq!(s.memory.0[&0].huge, 2 << 20);
        assert_eq!(s.threads.len(), 2);
        assert_eq!((s.threads[1].tid, s.threads[1].last_cpu), (101, Some(6)));
        assert_eq!(s.threads[1].allowed.to_string(), "0-7");
        // Placement on 0-7, both threads are confined to the plan: where they ran is not read.
        let all: CpuSet = "0-7".parse().unwrap();
        let mut r2 = Reader::new(d.path(), Duration::from_secs(10));
        let s2 = r2.sample("db", &by_pid_file(), Some(&all), Duration::ZERO, &mut budget).unwrap();
        assert!(s2.threads.iter().all(|t| t.last_cpu.is_none()), "{:?}", s2.threads);
        // Placement on 0-3: the thread allowed 0-7 is asked where it ran.
        let half: CpuSet = "0-3".parse().unwrap();
        let s3 = r2.sample("db", &by_pid_file(), Some(&half), Duration::ZERO, &mut budget).unwrap();
        assert_eq!(s3.threads[1].last_cpu, Some(6));
        // The first sample walks numa_maps once for the mappings' policies, not for figures.
        assert_eq!(s.policies.len(), 2, "{:?}", s.policies);
        assert!(r.notices.take().is_empty());
        // By unit: the same cgroup, found from the unit name; no second walk this soon.
        let unit = Locator { unit: Some("db.service".into()), ..Locator::default() };
        let before = budget;
        let s = r.sample("db", &unit, None, Duration::from_secs(10), &mut budget).unwrap();
        assert_eq!((s.pids.as_slice(), s.source), (&[100][..], MemorySource::Cgroup));
        assert_eq!(budget, before, "no walk was made");
        assert_eq!(s.policies.len(), 2, "the last walk's policies are kept");
    }

    /// A cgroup v2 host whose cgroup has no memory controller (no `memory.numa_stat`): the
    /// instance is sampled through numa_maps, never "missing", and that is said once.
    #[test]
    fn a_cgroup_without_the_memory_controller_falls_back_to_numa_maps_said_once() {
        let d = tree(true);
        fs::remove_file(d.path().join("sys/fs/cgroup/system.slice/db.service/memory.numa_stat"))
            .unwrap();
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        let mut budget = Duration::from_secs(1);
        let unit = Locator { unit: Some("db.service".into()), ..Locator::default() };
        for at in [0, 20] {
            let s = r.sample("db", &unit, None, Duration::from_secs(at), &mut budget).unwrap();
            assert_eq!((s.pids.as_slice(), s.source), (&[100][..], MemorySource::NumaMaps));
            assert_eq!(s.memory.0[&0].anon, 2 * 4096, "from numa_maps");
        }
        let notes = r.notices.take();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("has no memory controller"), "{notes:?}");
    }

    #[test]
    fn a_supervised_instance_is_its_pid_and_the_supervisors_cgroup() {
        let d = tree(true);
        let r = d.path();
        // The supervisor's cgroup of the instance: the main process and one it forked.
        let cg = "sys/fs/cgroup/pinctl/db-0";
        write(r, &format!("{cg}/cgroup.procs"), "101\n100\n");
        write(r, &format!("{cg}/memory.numa_stat"), "anon N0=4096 N1=0\n");
        write(r, "proc/101/stat", &stat(101, 100, 0));
        let mut reader = Reader::new(r, Duration::from_secs(10));
        let sup = |pid| Locator {
            supervised: Some(Supervised { pid, cgroup: Some("/pinctl/db-0".into()) }),
            ..Locator::default()
        };
        let mut budget = Duration::from_secs(1);
        let s = reader.sample("db-0", &sup(Some(100)), None, Duration::ZERO, &mut budget).unwrap();
        assert_eq!(s.pids, vec![100, 101], "the main process first");
        assert_eq!(s.source, MemorySource::Cgroup);
        assert_eq!(s.cgroup.as_deref(), Some("/sys/fs/cgroup/pinctl/db-0"));
        assert_eq!(s.memory.0[&0].anon, 4096);
        // Not running under the supervisor: said so, not "no pid-file".
        let e = reader.sample("db-0", &sup(None), None, Duration::ZERO, &mut budget).unwrap_err();
        assert!(e.to_string().contains("not running under the supervisor"), "{e}");
        // A cgroup that does not hold the main process (moved out by hand) is not its own.
        write(r, &format!("{cg}/cgroup.procs"), "101\n");
        let s = reader.sample("db-0", &sup(Some(100)), None, Duration::from_secs(60), &mut budget);
        assert_eq!(s.unwrap().source, MemorySource::NumaMaps);
    }

    #[test]
    fn a_cgroup_sampled_instance_is_walked_for_policies_at_a_low_rate() {
        let d = tree(true);
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        // A spent budget defers even the first walk: the policies are not known yet.
        let mut spent = Duration::ZERO;
        let s = r.sample("db", &by_pid_file(), None, Duration::ZERO, &mut spent).unwrap();
        assert_eq!((s.source, s.policies.len()), (MemorySource::Cgroup, 0));
        let mut budget = Duration::from_secs(1);
        r.sample("db", &by_pid_file(), None, Duration::from_secs(10), &mut budget).unwrap();
        // A new policy on the mapping: seen only after POLICY_WALK_INTERVALS intervals.
        write(d.path(), "proc/100/numa_maps", "1000 interleave:0-1 anon=3 N0=2 N1=1\n");
        let at = |k: u32| Duration::from_secs(10) * (1 + k);
        let s = r
            .sample("db", &by_pid_file(), None, at(POLICY_WALK_INTERVALS - 1), &mut budget)
            .unwrap();
        assert_eq!(s.policies.len(), 2, "{:?}", s.policies);
        let s =
            r.sample("db", &by_pid_file(), None, at(POLICY_WALK_INTERVALS), &mut budget).unwrap();
        assert_eq!(s.policies.len(), 1, "{:?}", s.policies);
        assert_eq!(s.memory.0[&0].anon, 8192, "figures still from the cgroup");
    }

    #[test]
    fn a_shared_cgroup_or_no_cgroup_v2_falls_back_to_numa_maps_once_per_interval() {
        let d = tree(true);
        write(d.path(), "sys/fs/cgroup/system.slice/db.service/cgroup.procs", "100\n555\n");
        write(d.path(), "proc/555/stat", &stat(555, 1, 0));
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        let mut budget = Duration::from_secs(1);
        let s = r.sample("db", &by_pid_file(), None, Duration::ZERO, &mut budget).unwrap();
        assert_eq!(s.source, MemorySource::NumaMaps);
        assert_eq!(s.memory.0[&0].anon, 2 * 4096);
        assert_eq!(s.memory.0[&1].file, 4 * 4096);
        assert_eq!(s.policies.len(), 2);
        let s = r.sample("db", &by_pid_file(), None, Duration::from_secs(5), &mut budget).unwrap();
        assert_eq!(s.source, MemorySource::NumaMapsCached);
        let s = r.sample("db", &by_pid_file(), None, Duration::from_secs(10), &mut budget).unwrap();
        assert_eq!(s.source, MemorySource::NumaMaps);

        let d = tree(false);
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        r.sample("db", &by_pid_file(), None, Duration::ZERO, &mut budget).unwrap();
        r.sample("db", &by_pid_file(), None, Duration::from_secs(20), &mut budget).unwrap();
        let notes = r.notices.take();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("not a cgroup v2 hierarchy"), "{notes:?}");
    }

    #[test]
    fn a_walk_made_after_a_move_is_what_the_next_samples_start_from() {
        let d = tree(false);
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        let mut budget = Duration::from_secs(1);
        let s = r.sample("db", &by_pid_file(), None, Duration::ZERO, &mut budget).unwrap();
        assert_eq!(s.memory.0[&1].anon, 4096);
        // A rebalance moved the remote page back and walked again.
        write(d.path(), "proc/100/numa_maps", "1000 bind:0 anon=3 N0=3 kernelpagesize_kB=4\n");
        let walked = r.walk_now("db", &s.pids, Duration::from_secs(1)).unwrap();
        assert_eq!(walked.0[&0].anon, 3 * 4096);
        // The next sample, within the interval, is the walk after the move, not the one before.
        let s = r.sample("db", &by_pid_file(), None, Duration::from_secs(2), &mut budget).unwrap();
        assert_eq!(s.source, MemorySource::NumaMapsCached);
        assert_eq!(s.memory, walked);
    }

    #[test]
    fn walks_back_off_for_slow_processes_and_spent_budgets() {
        let s = WalkScheduler { interval: Duration::from_secs(10) };
        let last = |cost_ms| LastWalk {
            at: Duration::ZERO,
            cost: Duration::from_millis(cost_ms),
            memory: NodeMemory::default(),
            policies: Vec::new(),
        };
        let big = Duration::from_secs(1);
        assert!(s.should_walk(Duration::ZERO, None, Duration::ZERO));
        assert!(!s.should_walk(Duration::from_secs(5), Some(&last(1)), big));
        assert!(s.should_walk(Duration::from_millis(9500), Some(&last(1)), big));
        // A 500 ms walk is made at most every 50 s.
        assert!(!s.should_walk(Duration::from_secs(40), Some(&last(500)), big));
        assert!(s.should_walk(Duration::from_secs(50), Some(&last(500)), big));
        // Budget spent: deferred.
        assert!(!s.should_walk(Duration::from_secs(60), Some(&last(500)), Duration::ZERO));
        // A walk dearer than what is left of the cycle's budget (10 ms, the least) is made
        // while some is left: never walking again would keep its first figures for ever.
        assert!(s.should_walk(
            Duration::from_secs(60),
            Some(&last(500)),
            Duration::from_millis(10)
        ));
        assert!(s.should_walk_for_policies(
            Duration::from_secs(600),
            Some(&last(500)),
            Duration::from_millis(10)
        ));
    }

    #[test]
    fn missing_processes_and_files_are_reported_plainly() {
        let d = tree(true);
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        let mut budget = Duration::from_secs(1);
        let none = Locator::default();
        assert!(matches!(
            r.sample("db", &none, None, Duration::ZERO, &mut budget),
            Err(SampleError::NoLocator)
        ));
        write(d.path(), "run/db.pid", "200\n");
        let e = r.sample("db", &by_pid_file(), None, Duration::ZERO, &mut budget).unwrap_err();
        assert_eq!(e.to_string(), "not running: PID `200` of `/run/db.pid` is not running");
        let gone = Locator { pid_file: Some("/run/none.pid".into()), ..Locator::default() };
        assert!(matches!(r.pids(&gone), Err(SampleError::NotRunning(_))));
        let unit = Locator { unit: Some("other.service".into()), ..Locator::default() };
        let e = r.pids(&unit).unwrap_err();
        assert_eq!(e.to_string(), "not running: unit `other.service` has no processes");
        // A thread that vanished between the listing and its files is left out.
        fs::remove_file(d.path().join("proc/100/task/101/stat")).unwrap();
        assert_eq!(r.threads(100, None).unwrap().len(), 1);
        assert!(matches!(r.threads(300, None), Err(SampleError::Vanished { pid: 300 })));
    }

    #[test]
    fn errors_of_process_files_say_vanished_or_which_capability() {
        let io = |errno| DiscoveryError::Io {
            path: "/proc/7/numa_maps".into(),
            source: io::Error::from_raw_os_error(errno),
        };
        assert!(matches!(SampleError::of(7, io(3), "x"), SampleError::Vanished { pid: 7 }));
        assert!(matches!(SampleError::of(7, io(2), "x"), SampleError::Vanished { pid: 7 }));
        let e = SampleError::of(7, io(13), "ptrace read access (same user, or CAP_SYS_PTRACE)");
        assert_eq!(
            e.to_string(),
            "cannot read `/proc/7/numa_maps`: needs ptrace read access (same user, or CAP_SYS_PTRACE)"
        );
        assert!(matches!(SampleError::of(7, io(5), "x"), SampleError::Read(_)));
    }

    #[test]
    fn host_counters() {
        let d = tree(true);
        let mut r = Reader::new(d.path(), Duration::from_secs(10));
        let h = r.host().unwrap();
        assert_eq!(h.nodes.len(), 2);
        assert_eq!(h.nodes[&1].free_bytes, 200 * 1024);
        assert_eq!((h.nodes[&1].numa_miss, h.nodes[&1].numa_foreign), (1, 7));
        assert_eq!(h.numa_pages_migrated, 42);
        let live = Reader::new(Path::new("/"), Duration::from_secs(10)).host().unwrap();
        assert!(live.nodes.values().any(|n| n.free_bytes > 0));
    }

    #[test]
    fn the_live_process_is_sampled_through_numa_maps_or_its_cgroup() {
        let d = tempfile::tempdir().unwrap();
        let pid_file = d.path().join("self.pid");
        fs::write(&pid_file, std::process::id().to_string()).unwrap();
        let mut r = Reader::new(Path::new("/"), Duration::from_secs(10));
        let mut budget = Duration::from_secs(1);
        let loc = Locator { pid_file: Some(pid_file), ..Locator::default() };
        let s = r.sample("self", &loc, None, Duration::ZERO, &mut budget).unwrap();
        assert!(s.memory.total() > 0);
        assert!(s.threads.iter().any(|t| t.tid == std::process::id()));
    }
}
