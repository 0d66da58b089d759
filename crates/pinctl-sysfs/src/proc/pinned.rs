//! Processes pinned by someone else: those whose allowed CPUs or memory nodes
//! (`Cpus_allowed_list`, `Mems_allowed_list` of `/proc/PID/status`) are narrower than the
//! host's, as `taskset`, systemd's `CPUAffinity=`/`NUMAMask=` or a cpuset leave them. Kernel
//! threads (children of kthreadd) and processes in pinctl's own cgroup subtree are not
//! counted: the first are the kernel's per-CPU work, the second pinctl's own instances.
//!
//! Composed from the readers of `status`, `stat`, `comm`, `cgroup` and `environ`; at most
//! [`MAX_PROCESSES`] processes are looked at, so a host with a huge process table costs a
//! bounded time (what was not looked at is said in [`Pinned::not_looked_at`]).

use pinctl_topology::{CpuSet, NodeSet};

use super::pid::{cgroup, comm, environ, stat, status};
use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;

/// The most processes looked at.
pub const MAX_PROCESSES: usize = 65_536;

/// kthreadd, the parent of every kernel thread.
const KTHREADD: u32 = 2;

/// One process allowed less than the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedProcess {
    pub pid: u32,
    /// Its `comm`.
    pub name: String,
    pub cpus: CpuSet,
    pub nodes: NodeSet,
    /// The value of the scan's `mark` variable in its environment (`pinctl exec -c FILE
    /// --service NAME` marks what it runs with the instance's name).
    pub mark: Option<String>,
}

/// What a scan of `/proc` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinned {
    /// Ascending by PID.
    pub processes: Vec<PinnedProcess>,
    /// Processes beyond [`MAX_PROCESSES`], not looked at.
    pub not_looked_at: usize,
}

/// Whether a process allowed `cpus` and `nodes` is pinned on a host whose processes are
/// allowed `all_cpus` and `all_nodes` by default: allowed fewer of either.
pub fn is_pinned(cpus: &CpuSet, nodes: &NodeSet, all_cpus: &CpuSet, all_nodes: &NodeSet) -> bool {
    !all_cpus.is_subset(cpus) || !all_nodes.is_subset(nodes)
}

/// The processes under the root of `files` allowed fewer CPUs than `all_cpus` or fewer nodes
/// than `all_nodes`, but this process, kernel threads and those in pinctl's cgroup subtree;
/// each with the value of the environment variable `mark`, when set.
pub fn scan(
    files: &mut FsRoot,
    all_cpus: &CpuSet,
    all_nodes: &NodeSet,
    mark: &str,
) -> Result<Pinned, DiscoveryError> {
    let pids = super::pids(files)?;
    let mut out =
        Pinned { not_looked_at: pids.len().saturating_sub(MAX_PROCESSES), ..Default::default() };
    // This process is not someone else's: a unit's `CPUAffinity=` or a `taskset` may have
    // started it on fewer CPUs, which its plans ignore.
    let me = std::process::id();
    for pid in pids.into_iter().take(MAX_PROCESSES).filter(|&p| p != me) {
        // A process that ends meanwhile, or whose files cannot be read, is simply not seen.
        let Ok(Some(st)) = status::read(files, pid) else { continue };
        let (Some(cpus), Some(nodes)) = (st.cpus, st.nodes) else { continue };
        if !is_pinned(&cpus, &nodes, all_cpus, all_nodes) {
            continue;
        }
        let Ok(Some(s)) = stat::read(files, pid) else { continue };
        if pid == KTHREADD || s.ppid == KTHREADD {
            continue;
        }
        let cg = cgroup::read_v2(files, pid).ok().flatten().unwrap_or_default();
        if is_pinctls(&cg) {
            continue;
        }
        let name = comm::read(files, pid).ok().flatten().unwrap_or_default();
        let env = environ::read(files, pid).ok().flatten().unwrap_or_default();
        let mark = environ::value(&env, mark).map(|v| String::from_utf8_lossy(v).into_owned());
        out.processes.push(PinnedProcess { pid, name, cpus, nodes, mark });
    }
    Ok(out)
}

/// Whether the cgroup `path` is in pinctl's subtree: `/pinctl/...` from the root cgroup, or
/// under the unit of a packaged supervisor (`pinctl.service`, `pinctl@NAME.service`).
fn is_pinctls(path: &str) -> bool {
    path.split('/').any(|c| {
        c == "pinctl"
            || c == "pinctl.service"
            || (c.starts_with("pinctl@") && c.ends_with(".service"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn nodes(s: &str) -> NodeSet {
        NodeSet::parse_list(s).unwrap()
    }

    #[test]
    fn pinned_is_allowed_less_than_the_host() {
        let (all, two) = (cpus("0-7"), nodes("0-1"));
        assert!(!is_pinned(&cpus("0-7"), &two, &all, &two));
        // Allowed more than this process sees (a cpuset of its own): not narrower.
        assert!(!is_pinned(&cpus("0-15"), &two, &all, &two));
        assert!(is_pinned(&cpus("2-3"), &two, &all, &two), "taskset");
        assert!(is_pinned(&all, &nodes("1"), &all, &two), "NUMAMask");
    }

    #[test]
    fn pinctls_own_cgroups() {
        assert!(is_pinctls("/pinctl/db/db-0"));
        assert!(is_pinctls("/system.slice/pinctl@db.service/db/db-0"));
        assert!(is_pinctls("/system.slice/pinctl.service/pinctl/db-0"));
        assert!(!is_pinctls("/system.slice/mysqld.service"));
        assert!(!is_pinctls("/user.slice/pinctl-notes"));
    }

    #[test]
    fn this_machine_is_scanned_without_error() {
        let mut root = crate::FsRoot::new("/".as_ref());
        let me = status::read(&mut root, super::super::pid::Pid::Current).unwrap().unwrap();
        let found = scan(&mut root, &me.cpus.unwrap(), &me.nodes.unwrap(), "X").unwrap();
        assert!(found.processes.iter().all(|p| p.pid != std::process::id()), "{found:?}");
    }
}
