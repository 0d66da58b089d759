//! The calls a placement needs, behind a trait: the real kernel, or a fake that records the
//! sequence and simulates a cpuset, for unit tests that must not change the test process.

use std::cell::RefCell;
use std::ffi::{c_int, c_ulong};
use std::io;

use pinctl_topology::{CpuSet, NodeSet};

use crate::mask::Mask;
use crate::mode::*;
use crate::raw;

/// What pinctl asks of the kernel for the calling thread. Implementations must not allocate
/// in these methods when used after `fork` (the real one does not).
pub trait Kernel {
    /// `sched_setaffinity(0, cpus)`.
    fn set_affinity(&self, cpus: &Mask) -> io::Result<()>;
    /// `sched_getaffinity(0, cpus)`; EINVAL when the mask is too small.
    fn get_affinity(&self, cpus: &mut Mask) -> io::Result<()>;
    /// `set_mempolicy(mode, nodes)`.
    fn set_mempolicy(&self, mode: c_int, nodes: Option<&Mask>) -> io::Result<()>;
    /// `get_mempolicy(&mode, nodes, maxnode, 0, flags)`; returns the mode.
    fn get_mempolicy(&self, nodes: &mut Mask, flags: c_int) -> io::Result<c_int>;

    /// Bits in a CPU mask the kernel accepts for `get_affinity`: starts at 1024 and doubles
    /// on EINVAL, as numactl does, so machines beyond 1024 CPUs work.
    fn cpu_mask_bits(&self) -> io::Result<usize> {
        grow(|bits| self.get_affinity(&mut Mask::with_bits(bits)))
    }

    /// Bits in a node mask the kernel accepts for `get_mempolicy` (at least 1024, so node ids
    /// up to 1023 always fit).
    fn node_mask_bits(&self) -> io::Result<usize> {
        grow(|bits| self.get_mempolicy(&mut Mask::with_bits(bits), MPOL_F_MEMS_ALLOWED).map(drop))
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
    fn set_mempolicy(&self, mode: c_int, nodes: Option<&Mask>) -> io::Result<()> {
        raw::set_mempolicy(mode, nodes)
    }
    fn get_mempolicy(&self, nodes: &mut Mask, flags: c_int) -> io::Result<c_int> {
        raw::get_mempolicy(Some(nodes), 0, flags)
    }
}

/// One call as the [`RecordingKernel`] saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    SetAffinity { cpus: CpuSet },
    GetAffinity { bits: usize },
    SetMempolicy { mode: c_int, nodes: Option<NodeSet>, maxnode: c_ulong },
    GetMempolicy { flags: c_int, maxnode: c_ulong },
}

/// A fake kernel for unit tests: records every call and simulates what Linux does with them
/// on a machine with `cpus` CPUs and `nodes` nodes, a cpuset allowing `allowed_cpus` and
/// `allowed_nodes`, and mode numbers up to `max_mode` (older kernels reject newer modes with
/// EINVAL). `fail` makes the next call of a kind fail with an errno.
#[derive(Debug)]
pub struct RecordingKernel {
    pub nr_cpu_ids: usize,
    pub nr_node_ids: usize,
    pub allowed_cpus: CpuSet,
    pub allowed_nodes: NodeSet,
    pub max_mode: c_int,
    pub balancing_supported: bool,
    state: RefCell<FakeState>,
}

#[derive(Debug, Default)]
struct FakeState {
    calls: Vec<Call>,
    affinity: CpuSet,
    mode: c_int,
    nodes: NodeSet,
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
            max_mode: MPOL_WEIGHTED_INTERLEAVE,
            balancing_supported: true,
            state: RefCell::new(FakeState {
                affinity: CpuSet::first_n(cpus),
                ..Default::default()
            }),
        }
    }

    /// Makes the next call named `call` ("set_affinity", "get_affinity", "set_mempolicy",
    /// "get_mempolicy") fail with `errno`.
    pub fn fail_next(&self, call: &'static str, errno: i32) {
        self.state.borrow_mut().failures.push((call, errno));
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.borrow().calls.clone()
    }

    /// The current (mode, nodes) policy.
    pub fn policy(&self) -> (c_int, NodeSet) {
        let s = self.state.borrow();
        (s.mode, s.nodes.clone())
    }

    /// The current affinity.
    pub fn affinity(&self) -> CpuSet {
        self.state.borrow().affinity.clone()
    }

    fn injected(&self, call: &'static str) -> io::Result<()> {
        let mut s = self.state.borrow_mut();
        if let Some(i) = s.failures.iter().position(|(c, _)| *c == call) {
            let (_, errno) = s.failures.remove(i);
            return Err(io::Error::from_raw_os_error(errno));
        }
        Ok(())
    }
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

impl Kernel for RecordingKernel {
    fn set_affinity(&self, cpus: &Mask) -> io::Result<()> {
        self.state.borrow_mut().calls.push(Call::SetAffinity { cpus: cpus.to_set() });
        self.injected("set_affinity")?;
        // Linux intersects with the cpuset and refuses an empty result.
        let got = cpus.to_set().intersection(&self.allowed_cpus);
        if got.is_empty() {
            return Err(einval());
        }
        self.state.borrow_mut().affinity = got;
        Ok(())
    }

    fn get_affinity(&self, cpus: &mut Mask) -> io::Result<()> {
        self.state.borrow_mut().calls.push(Call::GetAffinity { bits: cpus.bits() });
        self.injected("get_affinity")?;
        if cpus.bits() < self.nr_cpu_ids {
            return Err(einval());
        }
        cpus.clear();
        for c in self.state.borrow().affinity.iter() {
            cpus.set(c as usize);
        }
        Ok(())
    }

    fn set_mempolicy(&self, mode: c_int, nodes: Option<&Mask>) -> io::Result<()> {
        let maxnode = nodes.map_or(0, Mask::maxnode);
        self.state.borrow_mut().calls.push(Call::SetMempolicy {
            mode,
            nodes: nodes.map(Mask::to_set),
            maxnode,
        });
        self.injected("set_mempolicy")?;
        let bare = mode & !MPOL_MODE_FLAGS;
        let flags = mode & MPOL_MODE_FLAGS;
        if bare > self.max_mode
            || (flags & MPOL_F_NUMA_BALANCING != 0
                && (bare != MPOL_BIND || !self.balancing_supported))
        {
            return Err(einval());
        }
        // The kernel reads maxnode - 1 bits.
        let requested: NodeSet = nodes
            .map(|m| m.iter().filter(|&n| (n as c_ulong) < maxnode - 1).map(|n| n as u32).collect())
            .unwrap_or_default();
        let effective = requested.intersection(&self.allowed_nodes);
        let needs_nodes = !matches!(bare, MPOL_DEFAULT | MPOL_LOCAL | MPOL_PREFERRED);
        if (needs_nodes && effective.is_empty())
            || (bare == MPOL_PREFERRED && !requested.is_empty() && effective.is_empty())
            || (matches!(bare, MPOL_DEFAULT | MPOL_LOCAL) && !requested.is_empty())
        {
            return Err(einval());
        }
        let mut s = self.state.borrow_mut();
        s.mode = mode;
        s.nodes = if flags & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES) != 0 {
            requested
        } else {
            effective
        };
        Ok(())
    }

    fn get_mempolicy(&self, nodes: &mut Mask, flags: c_int) -> io::Result<c_int> {
        self.state.borrow_mut().calls.push(Call::GetMempolicy { flags, maxnode: nodes.maxnode() });
        self.injected("get_mempolicy")?;
        if nodes.bits() < self.nr_node_ids {
            return Err(einval());
        }
        nodes.clear();
        let s = self.state.borrow();
        if flags & MPOL_F_MEMS_ALLOWED != 0 {
            for n in self.allowed_nodes.iter() {
                nodes.set(n as usize);
            }
            return Ok(0);
        }
        for n in s.nodes.iter() {
            nodes.set(n as usize);
        }
        Ok(s.mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                Call::GetMempolicy { flags: MPOL_F_MEMS_ALLOWED, maxnode: 1025 },
            ]
        );
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
        k.get_mempolicy(&mut allowed, MPOL_F_MEMS_ALLOWED).unwrap();
        assert!(!allowed.is_empty());
        // The node mask must be at least the 1024 bits of the highest node id pinctl promises.
        assert!(nbits >= 1024);
    }
}
