//! The measuring itself, behind [`Measurer`] so the probe's loop (budget, passes, progress)
//! runs the same against the machine and against a fake in tests. [`LinuxMeasurer`] maps a
//! buffer per memory node, binds it there (`mbind`), asks for huge pages, faults it in, checks
//! where the kernel put it, links the chase, and runs each pass on threads pinned to the CPU
//! side's CPUs. Nothing outlives a pass but the buffer, and nothing outlives the probe: the
//! buffer is unmapped, the threads exit, the process's own policy and affinity are never
//! touched.

use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use pinctl_sys::{
    Kernel, LinuxKernel, MappedBuffer, Mask, MemoryPolicyRequest, PageStatus, PolicyMode,
};
use pinctl_topology::{CpuId, CpuSet, NodeId, NodeSet};

use crate::chain::{chase, link_random_cycle, read_all, touch_pages};
use crate::error::{ProbeError, permission_hint};

/// A buffer placed on a memory node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    /// Bytes of it that transparent huge pages back (`AnonHugePages`).
    pub huge_page_bytes: u64,
}

/// What one bandwidth pass moved, and how long it took from the first thread's start to the
/// last thread's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    pub bytes: u64,
    pub elapsed: Duration,
}

/// One probe's access to memory. Passes run on the buffer of the last [`Measurer::prepare`].
pub trait Measurer {
    /// Places a buffer of `bytes` on `memory` node (releasing the previous one first) and
    /// links the chase through it.
    fn prepare(&mut self, memory: NodeId, bytes: u64) -> Result<Prepared, ProbeError>;
    /// `loads` dependent loads from a thread on CPU `cpu` (of node `node`); how long they took.
    fn latency_pass(
        &mut self,
        node: NodeId,
        cpu: CpuId,
        loads: u64,
    ) -> Result<Duration, ProbeError>;
    /// One thread per CPU of `cpus` (of node `node`), each reading its share of the buffer
    /// `reps` times.
    fn bandwidth_pass(
        &mut self,
        node: NodeId,
        cpus: &CpuSet,
        reps: u32,
    ) -> Result<Transfer, ProbeError>;
    /// Gives the buffer back.
    fn release(&mut self);
}

/// The buffer on one node and where its chase starts.
#[derive(Debug)]
struct Placed {
    buffer: MappedBuffer,
    start: usize,
}

/// [`Measurer`] on the running kernel.
#[derive(Debug)]
pub struct LinuxMeasurer {
    kernel: LinuxKernel,
    node_bits: usize,
    cpu_bits: usize,
    placed: Option<Placed>,
    /// Seed of the chase's order (one per run, so a run can be repeated exactly).
    seed: u64,
}

/// How many pages of a buffer are asked where they are, spread evenly over it.
const PAGES_CHECKED: usize = 64;

impl LinuxMeasurer {
    /// A measurer for this process, the chase ordered by `seed`.
    pub fn new(seed: u64) -> Result<LinuxMeasurer, ProbeError> {
        let kernel = LinuxKernel;
        let thread = |source| ProbeError::Thread {
            what: format!("cannot size the kernel's masks: {source}"),
        };
        Ok(LinuxMeasurer {
            kernel,
            node_bits: kernel.node_mask_bits().map_err(thread)?,
            cpu_bits: kernel.cpu_mask_bits().map_err(thread)?,
            placed: None,
            seed,
        })
    }

    fn placed(&self) -> Result<&Placed, ProbeError> {
        self.placed.as_ref().ok_or_else(|| ProbeError::Thread {
            what: "a pass ran before a buffer was placed".into(),
        })
    }

    /// Pins the calling thread to `cpu`.
    fn pin(&self, node: NodeId, cpu: CpuId) -> Result<(), ProbeError> {
        let set: CpuSet = std::iter::once(cpu).collect();
        self.kernel.set_affinity(&Mask::from_set(&set, self.cpu_bits)).map_err(|source| {
            ProbeError::Affinity { cpu, node, hint: permission_hint(&source), source }
        })
    }

    /// Checks that sampled pages of the buffer are on `node`.
    fn check_placement(&self, node: NodeId, buffer: &MappedBuffer) -> Result<(), ProbeError> {
        let step = (buffer.len_bytes() / PAGES_CHECKED).max(4096) & !4095;
        let pages: Vec<usize> =
            (0..buffer.len_bytes()).step_by(step).map(|offset| buffer.addr() + offset).collect();
        let status = self
            .kernel
            .move_pages(std::process::id(), &pages, None)
            .map_err(|source| ProbeError::Locate { node, source })?;
        let elsewhere: NodeSet = status
            .iter()
            .filter_map(|s| match s {
                PageStatus::Node(n) if *n != node => Some(*n),
                _ => None,
            })
            .collect();
        let unplaced = status.iter().filter(|s| !matches!(s, PageStatus::Node(_))).count();
        if !elsewhere.is_empty() || unplaced > 0 {
            let mut found = Vec::new();
            if !elsewhere.is_empty() {
                found.push(format!("node {elsewhere}"));
            }
            if unplaced > 0 {
                found.push(format!("{unplaced} of {} sampled pages nowhere", pages.len()));
            }
            return Err(ProbeError::Misplaced { node, found: found.join(" and ") });
        }
        Ok(())
    }
}

impl Measurer for LinuxMeasurer {
    fn prepare(&mut self, memory: NodeId, bytes: u64) -> Result<Prepared, ProbeError> {
        // The previous buffer goes first: two at once could exceed what the plan checked.
        self.placed = None;
        let len = usize::try_from(bytes)
            .map_err(|_| ProbeError::Map { bytes, source: rustix::io::Errno::INVAL.into() })?;
        let mut buffer =
            MappedBuffer::new(len).map_err(|source| ProbeError::Map { bytes, source })?;
        let bind =
            MemoryPolicyRequest::new(PolicyMode::Bind, Some(std::iter::once(memory).collect()));
        pinctl_sys::mbind(buffer.addr(), buffer.len_bytes(), &bind, self.node_bits).map_err(
            |source| ProbeError::Bind { node: memory, hint: permission_hint(&source), source },
        )?;
        // Kernels without transparent huge pages refuse the advice: 4 KiB pages then, which
        // `huge_page_bytes` shows.
        let _ = buffer.advise_huge_pages();
        touch_pages(buffer.words_mut());
        self.check_placement(memory, &buffer)?;
        let start = link_random_cycle(buffer.words_mut(), self.seed)
            .ok_or_else(|| ProbeError::Thread { what: "the buffer holds no cache line".into() })?;
        let huge_page_bytes = pinctl_sysfs::proc::pid::smaps::read_anon_huge_pages(
            &mut pinctl_sysfs::FsRoot::new(Path::new("/")),
            pinctl_sysfs::Pid::Current,
            buffer.addr() as u64,
        )
        .ok()
        .flatten()
        .unwrap_or(0);
        self.placed = Some(Placed { buffer, start });
        Ok(Prepared { huge_page_bytes })
    }

    fn latency_pass(
        &mut self,
        node: NodeId,
        cpu: CpuId,
        loads: u64,
    ) -> Result<Duration, ProbeError> {
        let this = &*self;
        let placed = this.placed()?;
        let (words, start) = (placed.buffer.words(), placed.start);
        std::thread::scope(|s| {
            s.spawn(|| {
                this.pin(node, cpu)?;
                let began = Instant::now();
                let end = chase(words, start, loads);
                let took = began.elapsed();
                std::hint::black_box(end);
                Ok(took)
            })
            .join()
            .map_err(|_| ProbeError::Thread {
                what: format!("the latency thread on CPU {cpu} panicked"),
            })?
        })
    }

    fn bandwidth_pass(
        &mut self,
        node: NodeId,
        cpus: &CpuSet,
        reps: u32,
    ) -> Result<Transfer, ProbeError> {
        if cpus.is_empty() {
            return Err(ProbeError::Thread {
                what: format!("node {node} has no CPU to read with"),
            });
        }
        let this = &*self;
        let words = this.placed()?.buffer.words();
        let threads = cpus.len();
        // Whole cache lines per thread; the few words left over are not read.
        let share = words.len() / threads / crate::chain::LINE_WORDS * crate::chain::LINE_WORDS;
        let barrier = Barrier::new(threads);
        let spans: Vec<Result<(Instant, Instant), ProbeError>> = std::thread::scope(|s| {
            let handles: Vec<_> = cpus
                .iter()
                .enumerate()
                .map(|(k, cpu)| {
                    let slice = &words[k * share..(k + 1) * share];
                    let barrier = &barrier;
                    s.spawn(move || {
                        let pinned = this.pin(node, cpu);
                        // Every thread reaches the barrier, pinned or not, so none waits forever.
                        barrier.wait();
                        pinned?;
                        let began = Instant::now();
                        std::hint::black_box(read_all(slice, reps));
                        Ok((began, Instant::now()))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(ProbeError::Thread { what: "a bandwidth thread panicked".into() })
                    })
                })
                .collect()
        });
        let spans: Vec<(Instant, Instant)> = spans.into_iter().collect::<Result<_, _>>()?;
        let first = spans.iter().map(|s| s.0).min();
        let last = spans.iter().map(|s| s.1).max();
        let elapsed = match (first, last) {
            (Some(a), Some(b)) => b.duration_since(a),
            _ => Duration::ZERO,
        };
        let bytes = (share * size_of::<u64>() * threads) as u64 * u64::from(reps);
        Ok(Transfer { bytes, elapsed })
    }

    fn release(&mut self) {
        self.placed = None;
    }
}
