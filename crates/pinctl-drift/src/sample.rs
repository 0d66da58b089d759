//! What one look at an instance or at the host finds, as plain data built from parsed files.
//! Nothing here reads a file: `read` does, and hands the parsed text to these builders.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use pinctl_sysfs::cgroup::numa_stat::NumaStatLine;
use pinctl_sysfs::proc::pid::numa_maps::NumaMapsEntry;
use pinctl_topology::{CpuSet, MemoryPolicy, NodeId, NodeSet};
use serde::Serialize;

/// A process found where the instance is looked for but refused as the instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    pub pid: u32,
    pub reason: String,
}

/// Bytes of one instance on one node, by kind of memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NodeBytes {
    /// Anonymous memory (heap, stacks, anonymous huge pages).
    pub anon: u64,
    /// Page cache of files (not counting shared memory).
    pub file: u64,
    /// Shared memory (tmpfs, SysV, memfd).
    pub shmem: u64,
    /// hugetlbfs pages.
    pub huge: u64,
}

impl NodeBytes {
    /// All kinds together.
    pub fn total(&self) -> u64 {
        self.anon + self.file + self.shmem + self.huge
    }

    /// Each kind with its label (the `kind` label of the memory metric).
    pub fn kinds(&self) -> [(&'static str, u64); 4] {
        [("anon", self.anon), ("file", self.file), ("shmem", self.shmem), ("huge", self.huge)]
    }
}

/// Where an instance's memory is, per node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NodeMemory(pub BTreeMap<NodeId, NodeBytes>);

impl NodeMemory {
    /// Bytes on every node.
    pub fn total(&self) -> u64 {
        self.0.values().map(NodeBytes::total).sum()
    }

    /// Bytes on the nodes of `nodes`.
    pub fn on(&self, nodes: &NodeSet) -> u64 {
        self.0.iter().filter(|(n, _)| nodes.contains(**n)).map(|(_, b)| b.total()).sum()
    }

    /// Adds another process's memory (an instance with several processes).
    pub fn add(&mut self, other: &NodeMemory) {
        for (n, b) in &other.0 {
            let e = self.0.entry(*n).or_default();
            e.anon += b.anon;
            e.file += b.file;
            e.shmem += b.shmem;
            e.huge += b.huge;
        }
    }

    /// The `memory.numa_stat` counters [`NodeMemory::from_numa_stat`] uses.
    pub const NUMA_STAT_KEYS: &'static [&'static str] = &["anon", "file", "shmem"];
    /// The `hugetlb.<size>.numa_stat` lines it uses (`total=<bytes> N0=<bytes> ...`).
    pub const HUGETLB_KEYS: &'static [&'static str] = &["total="];

    /// From a cgroup v2 `memory.numa_stat` and the `total=` lines of its
    /// `hugetlb.<size>.numa_stat` files. The kernel's `file` includes shared memory, which is
    /// counted once, as `shmem`.
    pub fn from_numa_stat(memory: &[NumaStatLine], hugetlb: &[NumaStatLine]) -> NodeMemory {
        let mut out = NodeMemory::default();
        let mut file = BTreeMap::new();
        for line in memory {
            for &(node, bytes) in &line.bytes {
                let e = out.0.entry(node).or_default();
                match line.counter.as_str() {
                    "anon" => e.anon = bytes,
                    "shmem" => e.shmem = bytes,
                    "file" => {
                        file.insert(node, bytes);
                    }
                    _ => {}
                }
            }
        }
        for (node, bytes) in file {
            let e = out.0.entry(node).or_default();
            e.file = bytes.saturating_sub(e.shmem);
        }
        // hugetlb files say `total=<bytes> N0=<bytes> ...`: the parser takes `total=...` for
        // the counter's name.
        for line in hugetlb.iter().filter(|l| l.counter.starts_with("total=")) {
            for &(node, bytes) in &line.bytes {
                out.0.entry(node).or_default().huge += bytes;
            }
        }
        out
    }

    /// From `/proc/PID/numa_maps`: pages per node times the mapping's page size. Mappings of
    /// pages larger than the smallest size in the file are hugetlbfs; `file=` mappings under
    /// `/dev/shm`, SysV segments and memfds are shared memory, other `file=` mappings page
    /// cache, the rest anonymous.
    pub fn from_numa_maps(maps: &[NumaMapsEntry]) -> NodeMemory {
        let base_kb = maps.iter().filter_map(|m| m.page_size_kb).min().unwrap_or(4);
        let mut out = NodeMemory::default();
        for m in maps {
            let kb = m.page_size_kb.unwrap_or(base_kb);
            for &(node, pages) in &m.pages {
                let bytes = pages.saturating_mul(kb).saturating_mul(1024);
                let e = out.0.entry(node).or_default();
                let slot = match m.file.as_deref() {
                    _ if kb > base_kb => &mut e.huge,
                    Some(f) if is_shared_memory(f) => &mut e.shmem,
                    Some(_) => &mut e.file,
                    None => &mut e.anon,
                };
                *slot = slot.saturating_add(bytes);
            }
        }
        out
    }
}

fn is_shared_memory(file: &str) -> bool {
    file.starts_with("/dev/shm/") || file.starts_with("/SYSV") || file.starts_with("/memfd:")
}

/// A memory policy as numa_maps prints it: `bind:0-1`, `prefer=static:1`,
/// `interleave=relative|balancing:0-3`, `local`, `default`, `prefer (many):0-1`,
/// `weighted interleave:0-1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelPolicy {
    /// The mode, in pinctl's names.
    pub mode: MemoryPolicy,
    /// The node list after `:` (empty when none is printed).
    pub nodes: NodeSet,
    /// `static`, `relative`, `balancing`, as printed after `=`.
    pub flags: Vec<String>,
}

/// A numa_maps policy that is not one the kernel prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown memory policy `{0}` in numa_maps")]
pub struct UnknownPolicy(pub String);

impl KernelPolicy {
    /// Parses the policy field of a numa_maps line.
    pub fn parse(text: &str) -> Result<KernelPolicy, UnknownPolicy> {
        let bad = || UnknownPolicy(text.to_string());
        let (head, nodes) = match text.split_once(':') {
            Some((h, n)) => (h, NodeSet::parse_list(n).map_err(|_| bad())?),
            None => (text, NodeSet::new()),
        };
        let (name, flags) = match head.split_once('=') {
            Some((n, f)) => (n, f.split('|').map(str::to_string).collect()),
            None => (head, Vec::new()),
        };
        let mode = MemoryPolicy::from_numa_maps_name(name).ok_or_else(bad)?;
        Ok(KernelPolicy { mode, nodes, flags })
    }

    /// Whether this is the planned policy: the same mode over the same nodes (flags aside:
    /// `static` and `relative` only say how the nodes were given).
    pub fn matches(&self, mode: MemoryPolicy, nodes: &NodeSet) -> bool {
        self.mode == mode && (!mode.takes_nodes() || self.nodes == *nodes)
    }
}

impl fmt::Display for KernelPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mode.name())?;
        if !self.flags.is_empty() {
            write!(f, "={}", self.flags.join("|"))?;
        }
        if !self.nodes.is_empty() {
            write!(f, ":{}", self.nodes)?;
        }
        Ok(())
    }
}

/// Mappings of an instance that carry one policy: how many, and the bytes resident in them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyUse {
    /// The policy as numa_maps prints it (unparsed when the kernel is newer than pinctl).
    pub policy: String,
    /// Parsed, when known.
    #[serde(skip)]
    pub parsed: Option<KernelPolicy>,
    pub mappings: u64,
    pub resident_bytes: u64,
}

/// The policies of a process's mappings, grouped.
pub fn policies_of(maps: &[NumaMapsEntry]) -> Vec<PolicyUse> {
    let base_kb = maps.iter().filter_map(|m| m.page_size_kb).min().unwrap_or(4);
    let mut by: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for m in maps {
        let e = by.entry(m.policy.as_str()).or_default();
        e.0 += 1;
        e.1 += m.total_pages().saturating_mul(m.page_size_kb.unwrap_or(base_kb) * 1024);
    }
    by.into_iter()
        .map(|(p, (mappings, resident_bytes))| PolicyUse {
            policy: p.to_string(),
            parsed: KernelPolicy::parse(p).ok(),
            mappings,
            resident_bytes,
        })
        .collect()
}

/// One thread of an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadSample {
    pub tid: u32,
    /// `Cpus_allowed_list` of `/proc/PID/task/TID/status`.
    pub allowed: CpuSet,
    /// Field 39 of `/proc/PID/task/TID/stat`; `None` when not read: a thread whose allowed
    /// CPUs are all planned ones cannot run anywhere else (the kernel moves it when its
    /// affinity changes), so its `stat` is not read.
    pub last_cpu: Option<u32>,
    /// Whether it was running or runnable (state `R`). A sleeping thread's last CPU is
    /// history: the kernel updates it only when the thread runs again.
    pub running: bool,
}

/// Where the memory figures came from, and what reading them cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// The instance's own cgroup v2 `memory.numa_stat`: counters, no page-table walk.
    Cgroup,
    /// `/proc/PID/numa_maps`: a page-table walk under the mmap lock.
    NumaMaps,
    /// numa_maps was due but deferred (time budget or walk interval): the figures are the
    /// last walk's.
    NumaMapsCached,
}

impl MemorySource {
    /// Its name in output and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            MemorySource::Cgroup => "cgroup",
            MemorySource::NumaMaps => "numa_maps",
            MemorySource::NumaMapsCached => "numa_maps_cached",
        }
    }
}

/// One look at a running instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceSample {
    /// When, on the watcher's monotonic clock.
    #[serde(skip)]
    pub at: Duration,
    /// The processes of the instance (the main one first), each proven to be it (see
    /// `read::Locator`).
    pub pids: Vec<u32>,
    /// The start time of each of `pids` (field 22 of `/proc/PID/stat`) when it was sampled:
    /// what is done to a process later is done only while it still has this start time.
    #[serde(skip)]
    pub start_times: std::collections::BTreeMap<u32, u64>,
    /// Processes found where the instance is looked for (its unit's cgroup) but refused as
    /// the instance, with why; never sampled, re-pinned or moved.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refused>,
    /// The cgroup whose `memory.numa_stat` was read, when one was.
    pub cgroup: Option<String>,
    pub memory: NodeMemory,
    pub source: MemorySource,
    /// Every thread of every process.
    pub threads: Vec<ThreadSample>,
    /// Mapping policies, from the last numa_maps walk (empty when none was made).
    pub policies: Vec<PolicyUse>,
    /// Time spent reading this sample.
    #[serde(serialize_with = "crate::sample::seconds")]
    pub cost: Duration,
}

/// One look at a node of the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NodeSample {
    /// `MemTotal` of `nodeN/meminfo`.
    pub total_bytes: u64,
    /// `MemFree` of `nodeN/meminfo`.
    pub free_bytes: u64,
    /// `numa_miss` of `nodeN/numastat` (pages allocated here that were meant elsewhere).
    pub numa_miss: u64,
    /// `numa_foreign` (pages meant here that went elsewhere).
    pub numa_foreign: u64,
}

/// One look at the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostSample {
    pub nodes: BTreeMap<NodeId, NodeSample>,
    /// `numa_pages_migrated` of `/proc/vmstat`: pages moved by automatic NUMA balancing.
    pub numa_pages_migrated: u64,
}

pub(crate) fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use pinctl_sysfs::cgroup::numa_stat;
    use pinctl_sysfs::proc::pid::numa_maps;

    use super::*;

    #[test]
    fn cgroup_counters_count_shared_memory_once() {
        let stat = numa_stat::parse(
            "anon N0=4096 N1=8192\nfile N0=10000 N1=0\nshmem N0=1000 N1=0\nkernel N0=5 N1=5\n",
        )
        .unwrap();
        let huge = numa_stat::parse(
            "total=2097152 N0=0 N1=2097152\nhierarchical_total=2097152 N0=0 N1=2097152\n",
        )
        .unwrap();
        let m = NodeMemory::from_numa_stat(&stat, &huge);
        assert_eq!(m.0[&0], NodeBytes { anon: 4096, file: 9000, shmem: 1000, huge: 0 });
        assert_eq!(m.0[&1], NodeBytes { anon: 8192, file: 0, shmem: 0, huge: 2097152 });
        assert_eq!(m.total(), 4096 + 10000 + 8192 + 2097152);
        assert_eq!(m.on(&"1".parse().unwrap()), 8192 + 2097152);
    }

    #[test]
    fn numa_maps_kinds_and_page_sizes() {
        let maps = numa_maps::parse(
            "1000 bind:0 anon=3 N0=2 N1=1 kernelpagesize_kB=4\n\
             2000 bind:0 file=/usr/lib/x.so mapped=4 N1=4 kernelpagesize_kB=4\n\
             3000 bind:0 file=/dev/shm/seg dirty=1 N0=1 kernelpagesize_kB=4\n\
             4000 bind:0 file=/mnt/huge/a huge dirty=2 N1=2 kernelpagesize_kB=2048\n\
             5000 default stack\n",
        )
        .unwrap();
        let m = NodeMemory::from_numa_maps(&maps);
        assert_eq!(m.0[&0], NodeBytes { anon: 8192, file: 0, shmem: 4096, huge: 0 });
        assert_eq!(m.0[&1], NodeBytes { anon: 4096, file: 16384, shmem: 0, huge: 4 << 20 });
        let p = policies_of(&maps);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].policy.as_str(), p[0].mappings), ("bind:0", 4));
        assert_eq!(p[0].resident_bytes, (3 + 4 + 1) * 4096 + (4 << 20));
        assert_eq!((p[1].policy.as_str(), p[1].resident_bytes), ("default", 0));
    }

    #[test]
    fn kernel_policy_names_and_flags() {
        let cases = [
            ("bind:0-1", MemoryPolicy::Bind, "0-1", ""),
            ("prefer:1", MemoryPolicy::Preferred, "1", ""),
            ("interleave:0-3", MemoryPolicy::Interleave, "0-3", ""),
            ("local", MemoryPolicy::Local, "", ""),
            ("default", MemoryPolicy::Default, "", ""),
            ("prefer (many):0-1", MemoryPolicy::PreferredMany, "0-1", ""),
            ("weighted interleave:0-1", MemoryPolicy::WeightedInterleave, "0-1", ""),
            ("bind=static:2", MemoryPolicy::Bind, "2", "static"),
            ("prefer=relative:0", MemoryPolicy::Preferred, "0", "relative"),
            ("bind=static|balancing:0-1", MemoryPolicy::Bind, "0-1", "static|balancing"),
            ("bind=balancing:3", MemoryPolicy::Bind, "3", "balancing"),
        ];
        for (text, mode, nodes, flags) in cases {
            let p = KernelPolicy::parse(text).unwrap();
            assert_eq!(p.mode, mode, "{text}");
            assert_eq!(p.nodes.to_string(), nodes, "{text}");
            assert_eq!(p.flags.join("|"), flags, "{text}");
        }
        assert!(
            KernelPolicy::parse("bind=static:0-1")
                .unwrap()
                .matches(MemoryPolicy::Bind, &"0-1".parse().unwrap())
        );
        assert!(
            !KernelPolicy::parse("bind:0")
                .unwrap()
                .matches(MemoryPolicy::Bind, &"1".parse().unwrap())
        );
        assert!(
            !KernelPolicy::parse("prefer:0")
                .unwrap()
                .matches(MemoryPolicy::Bind, &"0".parse().unwrap())
        );
        assert!(
            KernelPolicy::parse("local").unwrap().matches(MemoryPolicy::Local, &NodeSet::new())
        );
        assert!(KernelPolicy::parse("teleport:0").is_err());
        assert!(KernelPolicy::parse("bind:x").is_err());
        assert_eq!(KernelPolicy::parse("bind=static:0-1").unwrap().to_string(), "bind=static:0-1");
    }
}
