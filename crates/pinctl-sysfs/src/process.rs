//! Readers of per-process and per-cgroup NUMA state under a root: where a running service's
//! memory is (`/proc/PID/numa_maps`, cgroup v2 `memory.numa_stat`), what it may use
//! (`/proc/PID/status`), what it has used (CPU time, resident memory), and node counters
//! (`nodeN/numastat`).

use std::path::Path;

use pinctl_topology::NodeId;

use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::parse::{self, AllowedSets, NumaMapsEntry, NumaStat, NumaStatLine, Usage};

/// Which process a reader looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pid {
    /// The reading process (`/proc/self`).
    Current,
    Id(u32),
}

impl Pid {
    pub(crate) fn dir(self) -> String {
        match self {
            Pid::Current => "proc/self".to_string(),
            Pid::Id(p) => format!("proc/{p}"),
        }
    }
}

fn required<T>(fs: &FsRoot<'_>, rel: &str, v: Option<T>) -> Result<T, DiscoveryError> {
    v.ok_or_else(|| DiscoveryError::Io {
        path: fs.full(rel),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })
}

/// `/proc/PID/numa_maps` under `root`: per mapping, its policy and resident pages per node.
/// The kernel walks the process's page tables under its mmap lock to produce this: slow and
/// intrusive on large processes; prefer [`read_cgroup_numa_stat`] for periodic checks.
pub fn read_numa_maps(root: &Path, pid: Pid) -> Result<Vec<NumaMapsEntry>, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    let rel = format!("{}/numa_maps", pid.dir());
    let v = fs.parsed(&rel, parse::numa_maps)?;
    required(&fs, &rel, v)
}

/// `Cpus_allowed_list` and `Mems_allowed_list` of `/proc/PID/status` under `root`.
pub fn read_allowed(root: &Path, pid: Pid) -> Result<AllowedSets, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    let rel = format!("{}/status", pid.dir());
    let v = fs.parsed(&rel, parse::status_allowed)?;
    required(&fs, &rel, v)
}

/// CPU time and resident memory of a process (`/proc/PID/stat` and `/proc/PID/status`
/// under `root`).
pub fn read_usage(root: &Path, pid: Pid) -> Result<Usage, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    let stat = format!("{}/stat", pid.dir());
    let ticks = fs.parsed(&stat, parse::stat_cpu_ticks)?;
    let cpu_ticks = required(&fs, &stat, ticks)?;
    let status = format!("{}/status", pid.dir());
    let rss = fs.parsed(&status, parse::status_rss)?;
    Ok(Usage { cpu_ticks, rss_bytes: required(&fs, &status, rss)? })
}

/// `memory.numa_stat` of a cgroup v2 folder (relative to `root`, e.g.
/// `sys/fs/cgroup/system.slice/db.service`): bytes per node per counter, from counters the
/// kernel keeps anyway (cheap to read often).
pub fn read_cgroup_numa_stat(
    root: &Path,
    cgroup_dir: &str,
) -> Result<Vec<NumaStatLine>, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    let rel = format!("{}/memory.numa_stat", cgroup_dir.trim_matches('/'));
    let v = fs.parsed(&rel, parse::memory_numa_stat)?;
    required(&fs, &rel, v)
}

/// `sys/devices/system/node/nodeN/numastat` under `root`.
pub fn read_node_numastat(root: &Path, node: NodeId) -> Result<NumaStat, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    let rel = format!("sys/devices/system/node/node{node}/numastat");
    let v = fs.parsed(&rel, parse::numastat)?;
    required(&fs, &rel, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_live_process_and_node_counters() {
        let maps = read_numa_maps("/".as_ref(), Pid::Current).unwrap();
        assert!(!maps.is_empty());
        let allowed = read_allowed("/".as_ref(), Pid::Current).unwrap();
        assert!(allowed.cpus.is_some() && allowed.nodes.is_some());
        let first = allowed.nodes.unwrap().first().unwrap();
        let stat = read_node_numastat("/".as_ref(), first).unwrap();
        assert!(stat.numa_hit > 0);
        let e = read_numa_maps("/".as_ref(), Pid::Id(u32::MAX)).unwrap_err();
        assert!(e.to_string().contains("4294967295/numa_maps"), "{e}");
    }

    #[test]
    fn reads_cgroup_numa_stat_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        let cg = dir.path().join("sys/fs/cgroup/db.service");
        std::fs::create_dir_all(&cg).unwrap();
        std::fs::write(cg.join("memory.numa_stat"), "anon N0=4096 N1=8192\nfile N0=0 N1=1\n")
            .unwrap();
        let s = read_cgroup_numa_stat(dir.path(), "/sys/fs/cgroup/db.service/").unwrap();
        assert_eq!(s[0].bytes, vec![(0, 4096), (1, 8192)]);
        assert!(read_cgroup_numa_stat(dir.path(), "sys/fs/cgroup/none").is_err());
    }
}
