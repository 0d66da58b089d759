//! What a probe will measure, decided from the topology alone: which nodes can be a CPU side
//! (online CPUs inside this process's cpuset) and which a memory side (memory, allowed by the
//! cpuset, free enough to hold the buffer twice over), the buffer size, the budget and how it
//! is shared. A pure function: the tests give it synthetic machines.

use std::time::Duration;

use pinctl_topology::{CpuId, CpuSet, Node, NodeId, NotMeasured, Topology};

use crate::error::ProbeError;

/// What `pinctl probe` was asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeOptions {
    /// Small buffers and short passes: checks that the probe works (CI, a VM), not figures to
    /// plan on.
    pub quick: bool,
    /// The time the whole probe may take; `None`: [`default_budget`].
    pub budget: Option<Duration>,
}

/// The smallest buffer a full probe chases: well past the last-level cache of most machines
/// (Intel MLC's default is 200 MB).
pub const FULL_BUFFER_FLOOR: u64 = 256 << 20;
/// A full probe's buffer is at least this many times the largest last-level cache, so most of
/// its loads miss every cache.
pub const FULL_BUFFER_LLC_FACTOR: u64 = 4;
/// The buffer of a `--quick` probe. It may fit a large last-level cache: quick figures show
/// that the probe works, they are not for planning.
pub const QUICK_BUFFER: u64 = 16 << 20;

/// How the budget is shared: a slice to set up each memory node's buffer (map, bind, fault
/// in, link the chase), a slice per pair (latency then bandwidth passes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    pub setup: Duration,
    pub pair: Duration,
}

impl Shares {
    /// The shares of the default budget: about 10 s for 2 nodes, 90 s for 8 (full); a few
    /// seconds for a 4-node guest (quick).
    pub fn default_for(quick: bool) -> Shares {
        if quick {
            Shares { setup: Duration::from_millis(500), pair: Duration::from_millis(250) }
        } else {
            Shares { setup: Duration::from_secs(2), pair: Duration::from_millis(1250) }
        }
    }

    /// The least a probe can do with: one short pass of each kind per pair.
    fn minimum() -> Shares {
        Shares { setup: Duration::from_millis(100), pair: Duration::from_millis(50) }
    }

    /// The budget a probe of `memory_nodes` memory nodes and `pairs` pairs gets, and its
    /// shares: the defaults, or the given budget's, scaled from them; refused when it cannot
    /// hold one short pass of each kind per pair.
    fn within(
        options: &ProbeOptions,
        memory_nodes: usize,
        pairs: usize,
    ) -> Result<(Duration, Shares), ProbeError> {
        let defaults = Shares::default_for(options.quick);
        let Some(budget) = options.budget else {
            return Ok((defaults.total(memory_nodes, pairs), defaults));
        };
        let minimum = Shares::minimum().total(memory_nodes, pairs);
        if budget < minimum {
            return Err(ProbeError::BudgetTooSmall { budget, pairs, minimum });
        }
        let scale = budget.as_secs_f64() / defaults.total(memory_nodes, pairs).as_secs_f64();
        let shares =
            Shares { setup: defaults.setup.mul_f64(scale), pair: defaults.pair.mul_f64(scale) };
        Ok((budget, shares))
    }

    fn total(self, memory_nodes: usize, pairs: usize) -> Duration {
        self.setup * memory_nodes as u32 + self.pair * pairs as u32
    }
}

/// The default budget for `memory_nodes` memory nodes and `pairs` pairs.
pub fn default_budget(quick: bool, memory_nodes: usize, pairs: usize) -> Duration {
    Shares::default_for(quick).total(memory_nodes, pairs)
}

/// One CPU node as a CPU side: where the latency thread runs, and the CPUs of the bandwidth
/// threads (one per core).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuSide {
    pub node: NodeId,
    /// The first usable CPU of the node.
    pub latency_cpu: CpuId,
    /// The first usable CPU of each core of the node (SMT siblings share a core's load
    /// ports, so a second thread per core adds nothing but noise).
    pub bandwidth_cpus: CpuSet,
}

/// What one probe measures and how long it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    pub cpu_sides: Vec<CpuSide>,
    pub memory_nodes: Vec<NodeId>,
    /// Bytes of the buffer on each memory node.
    pub buffer_bytes: u64,
    /// The largest last-level cache of the CPU sides, when known.
    pub last_level_cache_bytes: Option<u64>,
    pub quick: bool,
    pub budget: Duration,
    /// The budget as shares (scaled from the defaults when a budget was given).
    pub shares: Shares,
    /// Nodes left out of a side, and why.
    pub not_measured: Vec<NotMeasured>,
}

impl ProbePlan {
    /// How many pairs the plan measures.
    pub fn pairs(&self) -> usize {
        self.cpu_sides.len() * self.memory_nodes.len()
    }

    /// Decides what to measure on `topology` (the live machine's), whose CPU nodes have a
    /// last-level cache of at most `llc_bytes`. Refuses when no pair is left, or when the
    /// budget cannot hold one pass of each.
    pub fn new(
        topology: &Topology,
        llc_bytes: Option<u64>,
        options: &ProbeOptions,
    ) -> Result<ProbePlan, ProbeError> {
        let buffer_bytes = buffer_bytes(options.quick, llc_bytes);
        let mut not_measured: Vec<NotMeasured> = topology
            .host
            .offline_nodes
            .iter()
            .map(|node| NotMeasured { node, why: "offline".into() })
            .collect();
        let online = topology.online_cpus();
        let mut cpu_sides = Vec::new();
        let mut memory_nodes = Vec::new();
        for n in &topology.nodes {
            match cpu_side(topology, n, &online) {
                Ok(side) => cpu_sides.push(side),
                Err(why) => not_measured.push(NotMeasured { node: n.id, why: why.into() }),
            }
            match why_no_memory_side(topology, n, buffer_bytes) {
                None => memory_nodes.push(n.id),
                Some(why) => not_measured.push(NotMeasured { node: n.id, why }),
            }
        }
        not_measured.sort_by_key(|n| n.node);
        if cpu_sides.is_empty() || memory_nodes.is_empty() {
            let side = if cpu_sides.is_empty() {
                "no node can be a CPU side"
            } else {
                "no node can be a memory side"
            };
            let reasons: Vec<String> =
                not_measured.iter().map(|n| format!("node {}: {}", n.node, n.why)).collect();
            return Err(ProbeError::NothingToMeasure {
                why: format!("{side} ({})", reasons.join("; ")),
            });
        }
        let pairs = cpu_sides.len() * memory_nodes.len();
        let (budget, shares) = Shares::within(options, memory_nodes.len(), pairs)?;
        Ok(ProbePlan {
            cpu_sides,
            memory_nodes,
            buffer_bytes,
            last_level_cache_bytes: llc_bytes,
            quick: options.quick,
            budget,
            shares,
            not_measured,
        })
    }
}

/// Node `n` as a CPU side, or why it cannot be one: it needs an online CPU this process's
/// cpuset allows.
fn cpu_side(topology: &Topology, n: &Node, online: &CpuSet) -> Result<CpuSide, &'static str> {
    let mut usable = n.cpus.intersection(online);
    if let Some(allowed) = &topology.host.allowed_cpus {
        usable = usable.intersection(allowed);
    }
    if n.cpus.is_empty() {
        return Err("no CPU side: it has no CPUs (memory-only)");
    }
    let Some(latency_cpu) = usable.first() else {
        return Err("no CPU side: none of its CPUs is in this process's cpuset");
    };
    Ok(CpuSide { node: n.id, latency_cpu, bandwidth_cpus: one_per_core(topology, &usable) })
}

/// Why node `n` cannot be a memory side, if it cannot: it needs memory this process's cpuset
/// allows, with room for the buffer twice over where its free memory is known.
fn why_no_memory_side(topology: &Topology, n: &Node, buffer_bytes: u64) -> Option<String> {
    let memory_allowed = topology.host.allowed_nodes.as_ref().is_none_or(|a| a.contains(n.id));
    if !n.has_memory || n.memory_bytes == Some(0) {
        Some("no memory side: it has no memory".into())
    } else if !memory_allowed {
        Some("no memory side: this process's cpuset does not allow its memory".into())
    } else {
        n.memory_free_bytes.filter(|&f| f < 2 * buffer_bytes).map(|free| {
            format!(
                "no memory side: {} MiB free (MemFree), and the probe takes {} MiB there only \
                 when as much again stays free",
                free >> 20,
                buffer_bytes >> 20
            )
        })
    }
}

/// The buffer: [`QUICK_BUFFER`], or at least [`FULL_BUFFER_FLOOR`] and
/// [`FULL_BUFFER_LLC_FACTOR`] times the last-level cache, in whole huge pages.
pub fn buffer_bytes(quick: bool, llc_bytes: Option<u64>) -> u64 {
    let want = if quick {
        QUICK_BUFFER
    } else {
        FULL_BUFFER_FLOOR.max(llc_bytes.unwrap_or(0).saturating_mul(FULL_BUFFER_LLC_FACTOR))
    };
    let huge = pinctl_sys::HUGE_PAGE_BYTES as u64;
    want.div_ceil(huge) * huge
}

/// The largest last-level cache of the topology (discovery reads them for the planner,
/// `caches`); `None` when it has none (some VMs, old kernels).
pub fn last_level_cache(topology: &Topology) -> Option<u64> {
    topology.caches.iter().filter_map(|c| c.size_bytes).max()
}

/// The first CPU of each core among `cpus` (a CPU of unknown core is a core of its own).
fn one_per_core(topology: &Topology, cpus: &CpuSet) -> CpuSet {
    let mut seen = std::collections::BTreeSet::new();
    cpus.iter()
        .filter(|&c| {
            let key = topology.cpu(c).and_then(|cpu| Some((cpu.package?, cpu.core?)));
            key.is_none_or(|k| seen.insert(k))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinctl_testkit::{GIB, SyntheticTopology};

    fn nodes(n: u32) -> Topology {
        let mut b = SyntheticTopology::new().cores(|c| c / 2);
        for i in 0..n {
            b = b.node(format!("{}-{}", 4 * i, 4 * i + 3).parse().unwrap(), i / 2, Some(16 * GIB));
        }
        b.build()
    }

    #[test]
    fn every_cpu_node_with_every_memory_node_one_thread_per_core() {
        let p = ProbePlan::new(&nodes(2), Some(32 << 20), &ProbeOptions::default()).unwrap();
        assert_eq!(p.pairs(), 4);
        assert_eq!(p.cpu_sides[1].latency_cpu, 4);
        assert_eq!(p.cpu_sides[1].bandwidth_cpus.to_string(), "4,6", "SMT pairs share a core");
        assert_eq!(p.memory_nodes, [0, 1]);
        assert_eq!(p.buffer_bytes, 256 << 20);
        assert!(p.not_measured.is_empty());
        // About 10 s for 2 nodes, about 90 s for 8.
        assert_eq!(p.budget, Duration::from_secs(9));
        let p8 = ProbePlan::new(&nodes(8), None, &ProbeOptions::default()).unwrap();
        assert_eq!((p8.pairs(), p8.budget), (64, Duration::from_secs(96)));
        let one = ProbePlan::new(&nodes(1), None, &ProbeOptions::default()).unwrap();
        assert_eq!(one.pairs(), 1, "one node: its one pair");
    }

    #[test]
    fn the_last_level_cache_is_the_largest_the_topology_knows() {
        let mut t = nodes(2);
        assert_eq!(last_level_cache(&t), None);
        t.caches = [Some(32 << 20), None, Some(96 << 20)]
            .into_iter()
            .map(|size_bytes| pinctl_topology::Cache { level: 3, cpus: CpuSet::new(), size_bytes })
            .collect();
        assert_eq!(last_level_cache(&t), Some(96 << 20));
    }

    #[test]
    fn the_buffer_grows_with_the_last_level_cache() {
        assert_eq!(buffer_bytes(false, Some(96 << 20)), 384 << 20);
        assert_eq!(buffer_bytes(false, Some((1 << 20) + 1)), 256 << 20);
        assert_eq!(buffer_bytes(true, Some(1 << 30)), QUICK_BUFFER);
        assert_eq!(buffer_bytes(false, Some((100 << 20) + 1)) % (2 << 20), 0);
    }

    #[test]
    fn memory_only_cpu_only_offline_and_disallowed_nodes_lose_a_side_each_with_a_reason() {
        let mut t = nodes(4);
        t.nodes[1].has_memory = false; // CPU-only
        t.nodes[2].cpus = CpuSet::new(); // memory-only
        t.nodes[2].has_cpu = false;
        t.nodes[3].memory_free_bytes = Some(100 << 20); // too little free memory
        t.host.offline_nodes = "5".parse().unwrap();
        t.host.allowed_cpus = Some("0-7,12-15".parse().unwrap());
        let p = ProbePlan::new(&t, None, &ProbeOptions::default()).unwrap();
        let cpu: Vec<NodeId> = p.cpu_sides.iter().map(|c| c.node).collect();
        assert_eq!(cpu, [0, 1, 3]);
        assert_eq!(p.memory_nodes, [0, 2]);
        let why: Vec<String> =
            p.not_measured.iter().map(|n| format!("{}: {}", n.node, n.why)).collect();
        assert_eq!(
            why,
            [
                "1: no memory side: it has no memory",
                "2: no CPU side: it has no CPUs (memory-only)",
                "3: no memory side: 100 MiB free (MemFree), and the probe takes 256 MiB there only when as much again stays free",
                "5: offline",
            ]
        );
        t.host.allowed_cpus = Some("12-15".parse().unwrap());
        t.host.allowed_nodes = Some("3".parse().unwrap());
        let e = ProbePlan::new(&t, None, &ProbeOptions::default()).unwrap_err().to_string();
        assert!(e.starts_with("nothing to measure: no node can be a memory side"), "{e}");
        assert!(
            e.contains("node 0: no memory side: this process's cpuset does not allow its memory"),
            "{e}"
        );
    }

    #[test]
    fn a_given_budget_is_shared_alike_and_refused_below_one_pass_per_pair() {
        let options = ProbeOptions { quick: false, budget: Some(Duration::from_secs(18)) };
        let p = ProbePlan::new(&nodes(2), None, &options).unwrap();
        assert_eq!(
            p.shares,
            Shares { setup: Duration::from_secs(4), pair: Duration::from_millis(2500) }
        );
        let options = ProbeOptions { quick: true, budget: Some(Duration::from_millis(100)) };
        let e = ProbePlan::new(&nodes(2), None, &options).unwrap_err().to_string();
        assert_eq!(e, "a budget of 100.0ms cannot measure 4 pairs: give at least 400.0ms");
        let quick =
            ProbePlan::new(&nodes(4), None, &ProbeOptions { quick: true, budget: None }).unwrap();
        assert_eq!(quick.budget, Duration::from_secs(6));
    }
}
