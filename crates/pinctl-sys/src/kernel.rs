//! The calls pinctl makes, behind a trait: the real kernel, or a fake that records the sequence
//! and simulates a cpuset and other processes, for unit tests that must not change the test
//! process (or need processes and pages that do not exist).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_ulong};
use std::io;

use libc::pid_t;
use pinctl_topology::{CpuSet, IdKind, IdSet, NodeId, NodeSet};

use crate::mask::Mask;
use crate::mode::{
    MPOL_F_MEMS_ALLOWED, MPOL_F_NODE, MPOL_MF_MOVE, PolicyFlags, PolicyMode, ReportedPolicy,
    decode, encode,
};
use crate::raw;

/// Where one page is, as `move_pages` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageStatus {
    /// The page is (now) on this node.
    Node(NodeId),
    /// The kernel could not look up or move this page: a positive errno (ENOENT for a page
    /// not present, EFAULT for an address without a mapping, EBUSY, EACCES...).
    Errno(i32),
    /// The kernel did not get to this page: when a page of a batch cannot be migrated,
    /// `move_pages` returns how many were not and writes no status for the rest of the batch.
    Unanswered,
}

impl PageStatus {
    /// The node the page is on, when the kernel named one.
    pub fn node(self) -> Option<NodeId> {
        match self {
            PageStatus::Node(n) => Some(n),
            PageStatus::Errno(_) | PageStatus::Unanswered => None,
        }
    }

    /// Whether no page is behind the address: none present there (ENOENT) or no mapping
    /// (EFAULT). Neither moved nor failed to move.
    pub fn is_absent(self) -> bool {
        matches!(self, PageStatus::Errno(libc::ENOENT | libc::EFAULT))
    }

    /// Whether the kernel answered EBUSY: the page was busy, or, in a move, its folio was
    /// already taken by another address of the same call (and moves with it).
    pub fn is_busy(self) -> bool {
        self == PageStatus::Errno(libc::EBUSY)
    }
}

/// What pinctl asks of the kernel. The methods on the calling thread (`set_affinity`,
/// `set_mempolicy` and the reads) must not allocate when used after `fork` (the real ones do
/// not); the ones acting on another process or thread (`*_of`, `migrate_pages`, `move_pages`)
/// are for a supervisor and may allocate.
pub trait Kernel {
    /// `sched_setaffinity(0, cpus)`: the calling thread.
    fn set_affinity(&self, cpus: &Mask) -> io::Result<()>;
    /// `sched_getaffinity(0, cpus)`; EINVAL when the mask is too small.
    fn get_affinity(&self, cpus: &mut Mask) -> io::Result<()>;
    /// `sched_setaffinity(tid, cpus)`: one thread of any process (a process is pinned by
    /// setting every thread in `/proc/PID/task`). ESRCH when there is no such thread, EPERM
    /// without the right to change it.
    fn set_affinity_of(&self, tid: u32, cpus: &Mask) -> io::Result<()>;
    /// `sched_getaffinity(tid, cpus)`.
    fn get_affinity_of(&self, tid: u32, cpus: &mut Mask) -> io::Result<()>;
    /// `set_mempolicy(mode | flags, nodes)` for the calling thread; `None` passes a NULL mask.
    fn set_mempolicy(
        &self,
        mode: PolicyMode,
        flags: PolicyFlags,
        nodes: Option<&Mask>,
    ) -> io::Result<()>;
    /// `get_mempolicy(&mode, nodes, maxnode, 0, 0)`: the calling thread's policy.
    fn get_mempolicy(&self, nodes: &mut Mask) -> io::Result<ReportedPolicy>;
    /// `get_mempolicy(.., MPOL_F_MEMS_ALLOWED)`: the nodes the cpuset allows.
    fn get_mems_allowed(&self, nodes: &mut Mask) -> io::Result<()>;
    /// `get_mempolicy(.., MPOL_F_NODE)` without an address: the node the next interleaved
    /// page goes to; EINVAL when the thread's policy is not interleave.
    fn interleave_next_node(&self) -> io::Result<NodeId>;
    /// `migrate_pages(pid, maxnode, old, new)`: moves the pages of process `pid` on `old`
    /// nodes to `new` ones (the i-th node of `old` to the i-th of `new`, wrapping). Returns
    /// how many pages could not be moved. Can stall a large process for a long time.
    fn migrate_pages(&self, pid: u32, old: &NodeSet, new: &NodeSet) -> io::Result<usize>;
    /// `move_pages(pid, pages, nodes, status, MPOL_MF_MOVE)`: with `nodes` (one per page),
    /// moves each page there; with `None`, only reports where each page is. One status per
    /// page either way.
    fn move_pages(
        &self,
        pid: u32,
        pages: &[usize],
        nodes: Option<&[NodeId]>,
    ) -> io::Result<Vec<PageStatus>>;

    /// Bits in a CPU mask the kernel accepts for `get_affinity`: starts at 1024 and doubles
    /// on EINVAL, as numactl does, so machines beyond 1024 CPUs work.
    fn cpu_mask_bits(&self) -> io::Result<usize> {
        grow(|bits| self.get_affinity(&mut Mask::with_bits(bits)))
    }

    /// Bits in a node mask the kernel accepts for `get_mempolicy` (at least 1024, so node ids
    /// up to 1023 always fit).
    fn node_mask_bits(&self) -> io::Result<usize> {
        grow(|bits| self.get_mems_allowed(&mut Mask::with_bits(bits)))
    }
}

fn grow(mut attempt: impl FnMut(usize) -> io::Result<()>) -> io::Result<usize> {
    let mut bits = 1024;
    loop {
        match attempt(bits) {
            Ok(()) => return Ok(bits),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && bits < (1 << 20) => bits *= 2,
            Err(e) => return Err(e),
        }
    }
}

/// A pid or tid as the kernel takes it; ids beyond `pid_t` name no process (ESRCH).
fn pid(id: u32) -> io::Result<pid_t> {
    pid_t::try_from(id).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))
}

/// The running kernel.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinuxKernel;

impl Kernel for LinuxKernel {
    fn set_affinity(&self, cpus: &Mask) -> io::Result<()> {
        raw::sched_setaffinity(0, cpus)
    }
    fn get_affinity(&self, cpus: &mut Mask) -> io::Result<()> {
        raw::sched_getaffinity(0, cpus)
    }
    fn set_affinity_of(&self, tid: u32, cpus: &Mask) -> io::Result<()> {
        raw::sched_setaffinity(pid(tid)?, cpus)
    }
    fn get_affinity_of(&self, tid: u32, cpus: &mut Mask) -> io::Result<()> {
        raw::sched_getaffinity(pid(tid)?, cpus)
    }
    fn set_mempolicy(
        &self,
        mode: PolicyMode,
        flags: PolicyFlags,
        nodes: Option<&Mask>,
    ) -> io::Result<()> {
        raw::set_mempolicy(encode(mode, flags), nodes)
    }
    fn get_mempolicy(&self, nodes: &mut Mask) -> io::Result<ReportedPolicy> {
        raw::get_mempolicy(Some(nodes), 0, 0).map(decode)
    }
    fn get_mems_allowed(&self, nodes: &mut Mask) -> io::Result<()> {
        raw::get_mempolicy(Some(nodes), 0, MPOL_F_MEMS_ALLOWED).map(drop)
    }
    fn interleave_next_node(&self) -> io::Result<NodeId> {
        // With MPOL_F_NODE the "mode" the kernel writes is a node id.
        raw::get_mempolicy(None, 0, MPOL_F_NODE).map(|n| n as NodeId)
    }
    fn migrate_pages(&self, pid_: u32, old: &NodeSet, new: &NodeSet) -> io::Result<usize> {
        // One maxnode describes both masks, so they get the same capacity.
        let bits = [old, new].iter().filter_map(|s| s.last()).max().map_or(1, |l| l as usize + 1);
        raw::migrate_pages(pid(pid_)?, &Mask::from_set(old, bits), &Mask::from_set(new, bits))
    }
    fn move_pages(
        &self,
        pid_: u32,
        pages: &[usize],
        nodes: Option<&[NodeId]>,
    ) -> io::Result<Vec<PageStatus>> {
        let nodes: Option<Vec<c_int>> = match nodes {
            Some(n) => Some(
                n.iter()
                    .map(|&id| c_int::try_from(id).map_err(|_| einval()))
                    .collect::<io::Result<_>>()?,
            ),
            None => None,
        };
        // A status the kernel never writes (it writes a node id or a negative errno), so that a
        // page it did not reach is not read as node 0.
        const UNANSWERED: c_int = c_int::MIN;
        let mut status = vec![UNANSWERED; pages.len()];
        raw::move_pages(pid(pid_)?, pages, nodes.as_deref(), &mut status, MPOL_MF_MOVE)?;
        Ok(status
            .into_iter()
            .map(|s| match s {
                UNANSWERED => PageStatus::Unanswered,
                s if s < 0 => PageStatus::Errno(-s),
                s => PageStatus::Node(s as NodeId),
            })
            .collect())
    }
}

/// One call as the [`RecordingKernel`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    SetAffinity { cpus: CpuSet },
    GetAffinity { bits: usize },
    SetAffinityOf { tid: u32, cpus: CpuSet },
    GetAffinityOf { tid: u32, bits: usize },
    SetMempolicy { mode: PolicyMode, flags: PolicyFlags, nodes: Option<NodeSet>, maxnode: c_ulong },
    GetMempolicy { maxnode: c_ulong },
    GetMemsAllowed { maxnode: c_ulong },
    InterleaveNextNode,
    MigratePages { pid: u32, old: NodeSet, new: NodeSet },
    MovePages { pid: u32, pages: Vec<usize>, nodes: Option<Vec<NodeId>> },
}

/// A fake kernel for unit tests: records every call and simulates what Linux does with them
/// on a machine with `nr_cpu_ids` CPUs and `nr_node_ids` nodes, a cpuset allowing
/// `allowed_cpus` and `allowed_nodes` (the calling thread's and every other process's), modes
/// up to `max_mode` (older kernels reject newer modes with EINVAL), and the other threads and
/// processes added with [`add_thread`](Self::add_thread) and
/// [`add_pages`](Self::add_pages). `fail_next` makes the next call of a kind fail with an
/// errno.
#[derive(Debug)]
pub struct RecordingKernel {
    pub nr_cpu_ids: usize,
    pub nr_node_ids: usize,
    pub allowed_cpus: CpuSet,
    pub allowed_nodes: NodeSet,
    pub max_mode: PolicyMode,
    pub balancing_supported: bool,
    /// Linux before 5.14: MPOL_LOCAL is stored as MPOL_PREFERRED with no nodes and read back
    /// so by `get_mempolicy`.
    pub local_reads_as_preferred: bool,
    state: RefCell<FakeState>,
}

#[derive(Debug)]
struct FakeState {
    calls: Vec<Call>,
    affinity: CpuSet,
    mode: PolicyMode,
    flags: PolicyFlags,
    nodes: NodeSet,
    /// Other threads' affinities, by tid.
    threads: BTreeMap<u32, CpuSet>,
    /// Other processes' resident pages: pid -> page address -> node.
    pages: BTreeMap<u32, BTreeMap<usize, NodeId>>,
    failures: Vec<(&'static str, i32)>,
}

impl RecordingKernel {
    /// A kernel with every mode, `cpus` CPUs and `nodes` nodes, all allowed.
    pub fn new(cpus: u32, nodes: u32) -> Self {
        RecordingKernel {
            nr_cpu_ids: cpus as usize,
            nr_node_ids: nodes as usize,
            allowed_cpus: CpuSet::first_n(cpus),
            allowed_nodes: NodeSet::first_n(nodes),
            max_mode: PolicyMode::WeightedInterleave,
            balancing_supported: true,
            local_reads_as_preferred: false,
            state: RefCell::new(FakeState {
                calls: Vec::new(),
                affinity: CpuSet::first_n(cpus),
                mode: PolicyMode::Default,
                flags: PolicyFlags::NONE,
                nodes: NodeSet::new(),
                threads: BTreeMap::new(),
                pages: BTreeMap::new(),
                failures: Vec::new(),
            }),
        }
    }

    /// Makes the next call named `call` ("set_affinity", "get_affinity", "set_affinity_of",
    /// "get_affinity_of", "set_mempolicy", "get_mempolicy", "get_mems_allowed",
    /// "interleave_next_node", "migrate_pages", "move_pages") fail with `errno`.
    pub fn fail_next(&self, call: &'static str, errno: i32) {
        self.state.borrow_mut().failures.push((call, errno));
    }

    /// Adds a thread `tid` of another process, running on `cpus`.
    pub fn add_thread(&self, tid: u32, cpus: CpuSet) {
        self.state.borrow_mut().threads.insert(tid, cpus);
    }

    /// Adds resident pages (address, node) to process `pid`.
    pub fn add_pages(&self, pid: u32, pages: impl IntoIterator<Item = (usize, NodeId)>) {
        self.state.borrow_mut().pages.entry(pid).or_default().extend(pages);
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.borrow().calls.clone()
    }

    /// The calling thread's current policy: mode, flags, nodes.
    pub fn policy(&self) -> (PolicyMode, PolicyFlags, NodeSet) {
        let s = self.state.borrow();
        (s.mode, s.flags, s.nodes.clone())
    }

    /// The calling thread's current affinity.
    pub fn affinity(&self) -> CpuSet {
        self.state.borrow().affinity.clone()
    }

    /// The affinity of thread `tid`, if it exists.
    pub fn affinity_of(&self, tid: u32) -> Option<CpuSet> {
        self.state.borrow().threads.get(&tid).cloned()
    }

    /// Where each resident page of process `pid` is.
    pub fn pages_of(&self, pid: u32) -> BTreeMap<usize, NodeId> {
        self.state.borrow().pages.get(&pid).cloned().unwrap_or_default()
    }

    fn record(&self, call: Call, name: &'static str) -> io::Result<()> {
        let mut s = self.state.borrow_mut();
        s.calls.push(call);
        if let Some(i) = s.failures.iter().position(|(c, _)| *c == name) {
            let (_, errno) = s.failures.remove(i);
            return Err(io::Error::from_raw_os_error(errno));
        }
        Ok(())
    }

    /// Linux intersects an affinity with the cpuset and refuses an empty result.
    fn narrowed(&self, cpus: &Mask) -> io::Result<CpuSet> {
        let got = cpus.to_set().intersection(&self.allowed_cpus);
        if got.is_empty() { Err(einval()) } else { Ok(got) }
    }

    /// Fills `mask` with `set` (CPUs or nodes), as the kernel does; EINVAL when the mask is
    /// smaller than the id space (`nr_cpu_ids`, `nr_node_ids`).
    fn fill<K: IdKind>(&self, mask: &mut Mask, set: &IdSet<K>, min_bits: usize) -> io::Result<()> {
        if mask.bits() < min_bits {
            return Err(einval());
        }
        mask.clear();
        for id in set.iter() {
            mask.set(id as usize);
        }
        Ok(())
    }

    /// A process's pages, or ESRCH.
    fn process_pages<T>(
        &self,
        pid: u32,
        f: impl FnOnce(&mut BTreeMap<usize, NodeId>) -> T,
    ) -> io::Result<T> {
        let mut s = self.state.borrow_mut();
        let pages = s.pages.get_mut(&pid).ok_or_else(|| errno(libc::ESRCH))?;
        Ok(f(pages))
    }
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

fn einval() -> io::Error {
    errno(libc::EINVAL)
}

impl Kernel for RecordingKernel {
    fn set_affinity(&self, cpus: &Mask) -> io::Result<()> {
        self.record(Call::SetAffinity { cpus: cpus.to_set() }, "set_affinity")?;
        let got = self.narrowed(cpus)?;
        self.state.borrow_mut().affinity = got;
        Ok(())
    }

    fn get_affinity(&self, cpus: &mut Mask) -> io::Result<()> {
        self.record(Call::GetAffinity { bits: cpus.bits() }, "get_affinity")?;
        let affinity = self.state.borrow().affinity.clone();
        self.fill(cpus, &affinity, self.nr_cpu_ids)
    }

    fn set_affinity_of(&self, tid: u32, cpus: &Mask) -> io::Result<()> {
        self.record(Call::SetAffinityOf { tid, cpus: cpus.to_set() }, "set_affinity_of")?;
        if !self.state.borrow().threads.contains_key(&tid) {
            return Err(errno(libc::ESRCH));
        }
        let got = self.narrowed(cpus)?;
        self.state.borrow_mut().threads.insert(tid, got);
        Ok(())
    }

    fn get_affinity_of(&self, tid: u32, cpus: &mut Mask) -> io::Result<()> {
        self.record(Call::GetAffinityOf { tid, bits: cpus.bits() }, "get_affinity_of")?;
        let affinity = self.affinity_of(tid).ok_or_else(|| errno(libc::ESRCH))?;
        self.fill(cpus, &affinity, self.nr_cpu_ids)
    }

    fn set_mempolicy(
        &self,
        mode: PolicyMode,
        flags: PolicyFlags,
        nodes: Option<&Mask>,
    ) -> io::Result<()> {
        let maxnode = nodes.map_or(0, Mask::maxnode);
        let call = Call::SetMempolicy { mode, flags, nodes: nodes.map(Mask::to_set), maxnode };
        self.record(call, "set_mempolicy")?;
        // sanitize_mpol_flags: unknown modes, static with relative, balancing other than
        // with bind (or on a kernel before 5.12) are EINVAL.
        let static_relative = PolicyFlags::STATIC_NODES | PolicyFlags::RELATIVE_NODES;
        if mode > self.max_mode
            || flags.contains(static_relative)
            || (flags.contains(PolicyFlags::NUMA_BALANCING)
                && (mode != PolicyMode::Bind || !self.balancing_supported))
        {
            return Err(einval());
        }
        // The kernel reads maxnode - 1 bits.
        let requested: NodeSet = nodes
            .map(|m| m.iter().filter(|&n| (n as c_ulong) < maxnode - 1).map(|n| n as u32).collect())
            .unwrap_or_default();
        let effective = requested.intersection(&self.allowed_nodes);
        let no_nodes = matches!(mode, PolicyMode::Default | PolicyMode::Local);
        if (mode.takes_nodes() && mode != PolicyMode::Preferred && effective.is_empty())
            || (mode == PolicyMode::Preferred && !requested.is_empty() && effective.is_empty())
            || (no_nodes && !requested.is_empty())
        {
            return Err(einval());
        }
        let mut s = self.state.borrow_mut();
        s.mode = mode;
        s.flags = flags;
        s.nodes = if flags.contains(PolicyFlags::STATIC_NODES)
            || flags.contains(PolicyFlags::RELATIVE_NODES)
        {
            requested
        } else {
            effective
        };
        Ok(())
    }

    fn get_mempolicy(&self, nodes: &mut Mask) -> io::Result<ReportedPolicy> {
        self.record(Call::GetMempolicy { maxnode: nodes.maxnode() }, "get_mempolicy")?;
        let (mode, flags, set) = self.policy();
        self.fill(nodes, &set, self.nr_node_ids)?;
        if mode == PolicyMode::Local && self.local_reads_as_preferred {
            return Ok(ReportedPolicy::new(PolicyMode::Preferred, flags));
        }
        Ok(ReportedPolicy::new(mode, flags))
    }

    fn get_mems_allowed(&self, nodes: &mut Mask) -> io::Result<()> {
        self.record(Call::GetMemsAllowed { maxnode: nodes.maxnode() }, "get_mems_allowed")?;
        self.fill(nodes, &self.allowed_nodes, self.nr_node_ids)
    }

    fn interleave_next_node(&self) -> io::Result<NodeId> {
        self.record(Call::InterleaveNextNode, "interleave_next_node")?;
        // No page has been interleaved in the fake yet: the next one goes to the first node.
        let (mode, _, nodes) = self.policy();
        match (mode, nodes.first()) {
            (PolicyMode::Interleave, Some(first)) => Ok(first),
            _ => Err(einval()),
        }
    }

    fn migrate_pages(&self, pid: u32, old: &NodeSet, new: &NodeSet) -> io::Result<usize> {
        let call = Call::MigratePages { pid, old: old.clone(), new: new.clone() };
        self.record(call, "migrate_pages")?;
        let in_range = |s: &NodeSet| s.last().is_none_or(|l| (l as usize) < self.nr_node_ids);
        if !in_range(old) || !in_range(new) {
            return Err(einval());
        }
        // Without CAP_SYS_NICE, nodes outside the target's cpuset are refused; an empty
        // target set after the cpuset is EINVAL.
        if !new.is_subset(&self.allowed_nodes) {
            return Err(errno(libc::EPERM));
        }
        if new.is_empty() {
            return Err(einval());
        }
        let old_ids: Vec<NodeId> = old.iter().collect();
        let new_ids: Vec<NodeId> = new.iter().collect();
        self.process_pages(pid, |pages| {
            // bitmap_remap: the i-th node of `old` goes to the (i mod |new|)-th of `new`.
            for node in pages.values_mut() {
                if let Some(i) = old_ids.iter().position(|o| o == node) {
                    *node = new_ids[i % new_ids.len()];
                }
            }
            0
        })
    }

    fn move_pages(
        &self,
        pid: u32,
        pages: &[usize],
        nodes: Option<&[NodeId]>,
    ) -> io::Result<Vec<PageStatus>> {
        let call = Call::MovePages { pid, pages: pages.to_vec(), nodes: nodes.map(<[_]>::to_vec) };
        self.record(call, "move_pages")?;
        if nodes.is_some_and(|n| n.len() != pages.len()) {
            return Err(einval());
        }
        // do_pages_move checks every target node before moving anything.
        for &n in nodes.unwrap_or_default() {
            if n as usize >= self.nr_node_ids {
                return Err(errno(libc::ENODEV));
            }
            if !self.allowed_nodes.contains(n) {
                return Err(errno(libc::EACCES));
            }
        }
        self.process_pages(pid, |resident| {
            pages
                .iter()
                .enumerate()
                .map(|(i, addr)| match resident.get_mut(addr) {
                    None => PageStatus::Errno(libc::ENOENT),
                    Some(node) => {
                        if let Some(targets) = nodes {
                            *node = targets[i];
                        }
                        PageStatus::Node(*node)
                    }
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set<K: IdKind>(s: &str) -> IdSet<K> {
        s.parse().unwrap()
    }

    #[test]
    fn page_answers() {
        assert_eq!(PageStatus::Node(3).node(), Some(3));
        assert_eq!(PageStatus::Errno(libc::EBUSY).node(), None);
        assert!(PageStatus::Errno(libc::ENOENT).is_absent());
        assert!(PageStatus::Errno(libc::EFAULT).is_absent());
        assert!(!PageStatus::Unanswered.is_absent() && !PageStatus::Unanswered.is_busy());
        assert!(PageStatus::Errno(libc::EBUSY).is_busy());
        assert!(!PageStatus::Errno(libc::EACCES).is_busy());
    }

    #[test]
    fn mask_sizes_grow_past_1024() {
        let k = RecordingKernel::new(3000, 2);
        assert_eq!(k.cpu_mask_bits().unwrap(), 4096);
        assert_eq!(k.node_mask_bits().unwrap(), 1024);
        assert_eq!(
            k.calls(),
            vec![
                Call::GetAffinity { bits: 1024 },
                Call::GetAffinity { bits: 2048 },
                Call::GetAffinity { bits: 4096 },
                Call::GetMemsAllowed { maxnode: 1025 },
            ]
        );
    }

    #[test]
    fn another_threads_affinity_is_set_within_the_cpuset_and_read_back() {
        let mut k = RecordingKernel::new(8, 2);
        k.allowed_cpus = "0-5".parse().unwrap();
        k.add_thread(4242, set("0-7"));
        k.set_affinity_of(4242, &Mask::from_set(&set::<pinctl_topology::CpuKind>("4-7"), 64))
            .unwrap();
        let mut got = Mask::with_bits(64);
        k.get_affinity_of(4242, &mut got).unwrap();
        assert_eq!(got.to_set::<pinctl_topology::CpuKind>(), set("4-5"));
        let err = k
            .set_affinity_of(4243, &Mask::from_set(&set::<pinctl_topology::CpuKind>("0"), 64))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
        let err = k
            .set_affinity_of(4242, &Mask::from_set(&set::<pinctl_topology::CpuKind>("6-7"), 64))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        assert_eq!(k.affinity_of(4242), Some(set("4-5")), "a refused call changes nothing");
        // Our own thread was never touched.
        assert_eq!(k.affinity(), set("0-7"));
        assert_eq!(
            k.calls(),
            vec![
                Call::SetAffinityOf { tid: 4242, cpus: set("4-7") },
                Call::GetAffinityOf { tid: 4242, bits: 64 },
                Call::SetAffinityOf { tid: 4243, cpus: set("0") },
                Call::SetAffinityOf { tid: 4242, cpus: set("6-7") },
            ]
        );
    }

    #[test]
    fn migrate_pages_remaps_node_by_node() {
        let k = RecordingKernel::new(8, 4);
        k.add_pages(7, [(0x1000, 0), (0x2000, 1), (0x3000, 2), (0x4000, 3)]);
        assert_eq!(k.migrate_pages(7, &set("0-1"), &set("2")).unwrap(), 0);
        assert_eq!(
            k.pages_of(7),
            BTreeMap::from([(0x1000, 2), (0x2000, 2), (0x3000, 2), (0x4000, 3)])
        );
        assert_eq!(k.migrate_pages(7, &set("2-3"), &set("0-1")).unwrap(), 0);
        assert_eq!(
            k.pages_of(7),
            BTreeMap::from([(0x1000, 0), (0x2000, 0), (0x3000, 0), (0x4000, 1)])
        );
        assert_eq!(
            k.migrate_pages(8, &set("0"), &set("1")).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
        assert_eq!(
            k.migrate_pages(7, &set("0"), &set("9")).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
        assert_eq!(
            k.calls(),
            vec![
                Call::MigratePages { pid: 7, old: set("0-1"), new: set("2") },
                Call::MigratePages { pid: 7, old: set("2-3"), new: set("0-1") },
                Call::MigratePages { pid: 8, old: set("0"), new: set("1") },
                Call::MigratePages { pid: 7, old: set("0"), new: set("9") },
            ]
        );
    }

    #[test]
    fn a_cpuset_refuses_migrating_outside_it() {
        let mut k = RecordingKernel::new(8, 4);
        k.allowed_nodes = set("0-1");
        k.add_pages(7, [(0x1000, 0)]);
        let err = k.migrate_pages(7, &set("0"), &set("2")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM));
        assert_eq!(k.pages_of(7), BTreeMap::from([(0x1000, 0)]));
    }

    #[test]
    fn move_pages_queries_then_moves_page_by_page() {
        let k = RecordingKernel::new(8, 4);
        k.add_pages(7, [(0x1000, 0), (0x2000, 1)]);
        let pages = [0x1000, 0x2000, 0x9000];
        assert_eq!(
            k.move_pages(7, &pages, None).unwrap(),
            vec![PageStatus::Node(0), PageStatus::Node(1), PageStatus::Errno(libc::ENOENT)]
        );
        assert_eq!(
            k.move_pages(7, &pages[..2], Some(&[3, 3])).unwrap(),
            vec![PageStatus::Node(3), PageStatus::Node(3)]
        );
        assert_eq!(k.pages_of(7), BTreeMap::from([(0x1000, 3), (0x2000, 3)]));
        // A node beyond the machine fails the whole call before any page moves.
        let err = k.move_pages(7, &pages[..1], Some(&[4])).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV));
        assert_eq!(
            k.calls(),
            vec![
                Call::MovePages { pid: 7, pages: pages.to_vec(), nodes: None },
                Call::MovePages { pid: 7, pages: vec![0x1000, 0x2000], nodes: Some(vec![3, 3]) },
                Call::MovePages { pid: 7, pages: vec![0x1000], nodes: Some(vec![4]) },
            ]
        );
    }

    #[test]
    fn interleave_next_node_needs_an_interleave_policy() {
        let k = RecordingKernel::new(4, 4);
        assert_eq!(k.interleave_next_node().unwrap_err().raw_os_error(), Some(libc::EINVAL));
        let m = Mask::from_set(&set::<pinctl_topology::NodeKind>("2-3"), 64);
        k.set_mempolicy(PolicyMode::Interleave, PolicyFlags::NONE, Some(&m)).unwrap();
        assert_eq!(k.interleave_next_node().unwrap(), 2);
    }

    #[test]
    fn the_fake_refuses_what_sanitize_mpol_flags_refuses() {
        let k = RecordingKernel::new(4, 2);
        let m = Mask::from_set(&set::<pinctl_topology::NodeKind>("1"), 64);
        let both = PolicyFlags::STATIC_NODES | PolicyFlags::RELATIVE_NODES;
        for (mode, flags) in
            [(PolicyMode::Bind, both), (PolicyMode::Interleave, PolicyFlags::NUMA_BALANCING)]
        {
            let err = k.set_mempolicy(mode, flags, Some(&m)).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{mode} {flags}");
        }
        k.set_mempolicy(PolicyMode::Bind, PolicyFlags::NUMA_BALANCING, Some(&m)).unwrap();
        let mut nodes = Mask::with_bits(64);
        assert_eq!(
            k.get_mempolicy(&mut nodes).unwrap(),
            ReportedPolicy::new(PolicyMode::Bind, PolicyFlags::NUMA_BALANCING)
        );
        assert_eq!(nodes.to_set::<pinctl_topology::NodeKind>(), set("1"));
    }

    #[test]
    fn real_kernel_reads_this_process_without_changing_it() {
        let k = LinuxKernel;
        let bits = k.cpu_mask_bits().unwrap();
        let mut cpus = Mask::with_bits(bits);
        k.get_affinity(&mut cpus).unwrap();
        assert!(!cpus.is_empty());
        let nbits = k.node_mask_bits().unwrap();
        let mut allowed = Mask::with_bits(nbits);
        k.get_mems_allowed(&mut allowed).unwrap();
        assert!(!allowed.is_empty());
        // The node mask must be at least the 1024 bits of the highest node id pinctl promises.
        assert!(nbits >= 1024);
        // The test harness runs with the default policy, which has no next interleave node.
        let mut nodes = Mask::with_bits(nbits);
        if k.get_mempolicy(&mut nodes).unwrap().mode == Ok(PolicyMode::Default) {
            let err = k.interleave_next_node().unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        }
    }

    #[test]
    fn real_kernel_acts_on_another_process() {
        let k = LinuxKernel;
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let tid = child.id();
        let bits = k.cpu_mask_bits().unwrap();
        let mut before = Mask::with_bits(bits);
        k.get_affinity_of(tid, &mut before).unwrap();
        let first: CpuSet = before.iter().take(1).map(|c| c as u32).collect();
        k.set_affinity_of(tid, &Mask::from_set(&first, bits)).unwrap();
        let mut after = Mask::with_bits(bits);
        k.get_affinity_of(tid, &mut after).unwrap();
        // The child's pages are where they are; moving them within its own nodes is a no-op
        // the kernel accepts, and a query of an address it never mapped says so per page.
        let mut allowed = Mask::with_bits(k.node_mask_bits().unwrap());
        k.get_mems_allowed(&mut allowed).unwrap();
        let migrated = k.migrate_pages(tid, &allowed.to_set(), &allowed.to_set());
        let statuses = k.move_pages(tid, &[0x1000], None);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(after.to_set(), first);
        assert_eq!(migrated.unwrap(), 0);
        assert_eq!(statuses.unwrap(), vec![PageStatus::Errno(libc::EFAULT)]);
        let gone = k.get_affinity_of(tid, &mut after).unwrap_err();
        assert_eq!(gone.raw_os_error(), Some(libc::ESRCH));
        assert_eq!(
            k.get_affinity_of(u32::MAX, &mut after).unwrap_err().raw_os_error(),
            Some(libc::ESRCH)
        );
    }

    #[test]
    fn real_move_pages_finds_this_process_s_pages() {
        let k = LinuxKernel;
        let page = vec![1u8; 4096 * 2];
        // A whole page inside the buffer, touched above, so it is resident.
        let addr = (page.as_ptr() as usize).next_multiple_of(4096);
        let mut allowed = Mask::with_bits(k.node_mask_bits().unwrap());
        k.get_mems_allowed(&mut allowed).unwrap();
        let status = k.move_pages(std::process::id(), &[addr], None).unwrap();
        match status[..] {
            [PageStatus::Node(n)] => assert!(allowed.is_set(n as usize), "page on node {n}"),
            _ => panic!("unexpected status {status:?}"),
        }
        // Moving it to the node it is on is accepted and leaves it there.
        let PageStatus::Node(n) = status[0] else { unreachable!() };
        assert_eq!(
            k.move_pages(std::process::id(), &[addr], Some(&[n])).unwrap(),
            vec![PageStatus::Node(n)]
        );
        drop(page);
    }
}
