//! What is known about the cost of reaching a node's memory beyond the firmware's SLIT
//! distances: ACPI HMAT figures as the kernel (or hwloc) publishes them, the kernel's memory
//! tiers, and what `pinctl probe` measured on the machine (docs/probe.md).
//!
//! SLIT is a relative number the firmware chose; these are nanoseconds and megabytes per
//! second. HMAT is a vendor's rating of the best initiators of each memory node only; a
//! measurement covers every pair of a CPU node and a memory node the probe could use.

use serde::{Deserialize, Serialize};

use crate::{NodeId, NodeSet};

/// The memory latencies pinctl believes, nanoseconds, from any source (a probe result, HMAT,
/// a snapshot): memory answers in tens to a few thousand nanoseconds (DRAM about 80, remote
/// sockets and CXL a few hundred). Below a nanosecond nothing but a register answers; above
/// 100 microseconds it is no memory access. A figure outside is refused where it is read,
/// with the value named, and a planner never compares nodes by one: a single absurd number
/// (`1e308`, `1e-300`, `0`) must not turn a plan upside down.
pub const LATENCY_NS_RANGE: std::ops::RangeInclusive<f64> = 1.0..=100_000.0;

/// Whether `ns` is a latency inside [`LATENCY_NS_RANGE`] (NaN is not).
pub fn plausible_latency_ns(ns: f64) -> bool {
    LATENCY_NS_RANGE.contains(&ns)
}

/// Why `ns` is not a latency to believe: `` `1e308` ns is not a memory latency (pinctl
/// believes 1 to 100000 ns) ``; `None` when it is one. Very large and very small values are
/// written with an exponent, as they were most likely written.
pub fn implausible_latency(ns: f64) -> Option<String> {
    if plausible_latency_ns(ns) {
        return None;
    }
    let (low, high) = (LATENCY_NS_RANGE.start(), LATENCY_NS_RANGE.end());
    let shown = if ns != 0.0 && ns.is_finite() && !(1e-3..1e16).contains(&ns.abs()) {
        format!("{ns:e}")
    } else {
        format!("{ns}")
    };
    Some(format!("`{shown}` ns is not a memory latency (pinctl believes {low} to {high} ns)"))
}

/// Memory performance beyond SLIT. Every part is empty where the source has none (no HMAT
/// table, a kernel before memory tiers, nothing measured), and the whole is absent from the
/// JSON then, so documents of older pinctl read unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MemoryPerformance {
    /// HMAT access classes, by memory node then class: the best initiators of each memory
    /// node and what they get (`nodeN/access0` and `access1`, or hwloc's memory attributes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hmat: Vec<HmatAccess>,
    /// The kernel's memory tiers (`/sys/devices/virtual/memory_tiering/memory_tierN`, Linux
    /// 6.1+), fastest (lowest number) first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_tiers: Vec<MemoryTier>,
    /// What `pinctl probe` measured, when a probe was saved with this topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measurement>,
}

/// Which initiators an HMAT entry speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AccessClass {
    /// `access0`: the best initiators of any kind (CPUs, or a generic initiator such as an
    /// accelerator).
    Access0,
    /// `access1`: the best initiators that have CPUs (Linux 5.10+).
    Access1,
    /// hwloc's memory attributes (an hwloc XML export): hwloc reads `access1`, else `access0`.
    Hwloc,
}

/// One access class of one memory node: which initiator nodes reach it best, and their
/// latency and bandwidth as the firmware rated them. A figure the firmware did not give is
/// `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct HmatAccess {
    /// The memory (target) node.
    pub node: NodeId,
    pub class: AccessClass,
    /// The initiator nodes these figures are for, as an array of node ids.
    #[serde(with = "crate::node_ids")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<NodeId>"))]
    pub initiators: NodeSet,
    /// `read_latency`, nanoseconds.
    pub read_latency_ns: Option<u32>,
    /// `write_latency`, nanoseconds.
    pub write_latency_ns: Option<u32>,
    /// `read_bandwidth`, MB/s (the kernel's ABI unit).
    pub read_bandwidth_mb_s: Option<u32>,
    /// `write_bandwidth`, MB/s.
    pub write_bandwidth_mb_s: Option<u32>,
}

impl HmatAccess {
    /// The latency to plan with: read latency, else write latency.
    pub fn latency_ns(&self) -> Option<u32> {
        self.read_latency_ns.or(self.write_latency_ns)
    }
}

/// One memory tier: the nodes whose memory the kernel ranks alike (tier 4 holds ordinary
/// DRAM; slower memory such as CXL or PMEM sits in higher tiers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MemoryTier {
    /// The `N` of `memory_tierN`: the abstract distance of its memory divided into chunks;
    /// lower is faster.
    pub tier: u32,
    /// Its nodes (`nodelist`), as an array of node ids.
    #[serde(with = "crate::node_ids")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<NodeId>"))]
    pub nodes: NodeSet,
}

/// What one run of `pinctl probe` measured: for every pair of a CPU node and a memory node
/// it could use, the idle load-to-use latency and the read bandwidth (docs/probe.md says how
/// and what the numbers mean).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// The program that measured (`pinctl 0.1.0`).
    pub tool: String,
    /// When, as RFC 3339 UTC.
    pub measured_at: String,
    /// The kernel release it ran on.
    pub kernel: Option<String>,
    /// Whether it was a `--quick` run: small buffers and short passes, to check that the
    /// probe works rather than to plan on.
    pub quick: bool,
    /// The time budget it was given and the time it took, milliseconds.
    pub budget_ms: u64,
    pub elapsed_ms: u64,
    /// The buffer chased and read on each memory node, bytes.
    pub buffer_bytes: u64,
    /// The largest last-level cache of a CPU node's CPUs, bytes (what the buffer must be well
    /// past), when the source knew it.
    pub last_level_cache_bytes: Option<u64>,
    /// One per measured pair, sorted by CPU node then memory node (a lookup of one pair is a
    /// binary search).
    pub pairs: Vec<MeasuredPair>,
    /// Nodes the probe could not use on either side, and why (offline, outside the cpuset,
    /// too little free memory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_measured: Vec<NotMeasured>,
}

/// One (CPU node, memory node) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MeasuredPair {
    /// Where the measuring threads ran.
    pub cpu_node: NodeId,
    /// Where the buffer's pages were.
    pub memory_node: NodeId,
    /// Idle load-to-use latency, nanoseconds: the best pass of a dependent pointer chase.
    pub latency_ns: f64,
    /// Read bandwidth, GB/s (10^9 bytes a second): the best pass of `threads` threads reading.
    pub read_bandwidth_gb_s: f64,
    /// Threads that read for the bandwidth figure: one per core of the CPU node.
    pub threads: u32,
    /// Passes run, of which the best is kept.
    pub latency_passes: u32,
    pub bandwidth_passes: u32,
    /// How much of the buffer the kernel gave huge pages (`AnonHugePages`), bytes.
    pub huge_page_bytes: u64,
}

/// A node the probe left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NotMeasured {
    pub node: NodeId,
    pub why: String,
}

impl MemoryPerformance {
    /// Whether nothing is known beyond SLIT.
    pub fn is_empty(&self) -> bool {
        self.hmat.is_empty() && self.memory_tiers.is_empty() && self.measured.is_none()
    }

    /// The HMAT latency from initiator node `from` to memory node `to`, and the class that
    /// gave it: `access1` (CPU initiators) before hwloc's before `access0`. `None` where no
    /// entry names `from` among the best initiators of `to`: HMAT in sysfs says nothing about
    /// the others.
    pub fn hmat_latency(&self, from: NodeId, to: NodeId) -> Option<(u32, AccessClass)> {
        self.hmat_entries(from, to).find_map(|a| a.latency_ns().map(|ns| (ns, a.class)))
    }

    /// Every HMAT latency as `(initiator, memory node, ns)`, in the order of
    /// [`MemoryPerformance::hmat_latency`]: the first figure of a pair is the one it gives.
    /// Walks the entries once, where asking [`MemoryPerformance::hmat_latency`] of every pair
    /// searches them for each.
    pub fn hmat_latencies(&self) -> impl Iterator<Item = (NodeId, NodeId, u32)> + '_ {
        [AccessClass::Access1, AccessClass::Hwloc, AccessClass::Access0].into_iter().flat_map(
            move |class| {
                self.hmat.iter().filter(move |a| a.class == class).flat_map(|a| {
                    let ns = a.latency_ns();
                    a.initiators.iter().filter_map(move |from| Some((from, a.node, ns?)))
                })
            },
        )
    }

    /// The HMAT read bandwidth from initiator node `from` to memory node `to`, MB/s, in the
    /// order of [`MemoryPerformance::hmat_latency`].
    pub fn hmat_read_bandwidth(&self, from: NodeId, to: NodeId) -> Option<u32> {
        self.hmat_entries(from, to).find_map(|a| a.read_bandwidth_mb_s)
    }

    /// The entries that name `from` among the best initiators of `to`: `access1` first, then
    /// hwloc's, then `access0`.
    fn hmat_entries(&self, from: NodeId, to: NodeId) -> impl Iterator<Item = &HmatAccess> {
        [AccessClass::Access1, AccessClass::Hwloc, AccessClass::Access0].into_iter().flat_map(
            move |class| {
                self.hmat.iter().filter(move |a| {
                    a.node == to && a.class == class && a.initiators.contains(from)
                })
            },
        )
    }

    /// Sorts every part into the order the model promises.
    pub fn put_in_order(&mut self) {
        self.hmat.sort_by_key(|a| (a.node, a.class));
        self.memory_tiers.sort_by_key(|t| t.tier);
        if let Some(m) = &mut self.measured {
            m.pairs.sort_by_key(|p| (p.cpu_node, p.memory_node));
            m.not_measured.sort_by_key(|n| n.node);
        }
    }
}

impl Measurement {
    /// The measured pair from CPU node `cpu` to memory node `memory`: found by halves in
    /// `pairs`, which are in that order (every reader and the probe leave them so), not by a
    /// scan per pair (a table of 4,096 nodes asks 16 million times).
    pub fn pair(&self, cpu: NodeId, memory: NodeId) -> Option<&MeasuredPair> {
        let k = self.pairs.binary_search_by_key(&(cpu, memory), |p| (p.cpu_node, p.memory_node));
        k.ok().map(|k| &self.pairs[k])
    }

    /// The pairs measured from CPU node `cpu`, by memory node.
    fn pairs_of(&self, cpu: NodeId) -> &[MeasuredPair] {
        let start = self.pairs.partition_point(|p| p.cpu_node < cpu);
        let end = self.pairs.partition_point(|p| p.cpu_node <= cpu);
        &self.pairs[start..end]
    }

    /// The first latency outside [`LATENCY_NS_RANGE`], with its pair, said: a measurement
    /// that holds one is not planned on.
    pub fn implausible(&self) -> Option<String> {
        self.pairs.iter().find_map(|p| {
            implausible_latency(p.latency_ns).map(|why| {
                format!("CPU node {} to memory node {}: {why}", p.cpu_node, p.memory_node)
            })
        })
    }

    /// The measured latency from CPU node `cpu` to memory node `memory`, nanoseconds.
    pub fn latency_ns(&self, cpu: NodeId, memory: NodeId) -> Option<f64> {
        self.pair(cpu, memory).map(|p| p.latency_ns)
    }

    /// The CPU nodes measured, ascending.
    pub fn cpu_nodes(&self) -> NodeSet {
        self.pairs.iter().map(|p| p.cpu_node).collect()
    }

    /// The memory nodes measured, ascending.
    pub fn memory_nodes(&self) -> NodeSet {
        self.pairs.iter().map(|p| p.memory_node).collect()
    }

    /// What a CPU node's remote latencies are compared with: its own memory's latency, or,
    /// for a node without memory, the lowest it measured to any node.
    pub fn local_latency_ns(&self, cpu: NodeId) -> Option<f64> {
        self.latency_ns(cpu, cpu)
            .or_else(|| self.pairs_of(cpu).iter().map(|p| p.latency_ns).reduce(f64::min))
    }

    /// Latency from `cpu` to `memory` over the CPU node's local latency (1.0 for local).
    pub fn remote_ratio(&self, cpu: NodeId, memory: NodeId) -> Option<f64> {
        let local = self.local_latency_ns(cpu)?;
        let latency = self.latency_ns(cpu, memory)?;
        (local > 0.0).then(|| latency / local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(cpu: NodeId, memory: NodeId, latency_ns: f64) -> MeasuredPair {
        MeasuredPair {
            cpu_node: cpu,
            memory_node: memory,
            latency_ns,
            read_bandwidth_gb_s: 10.0,
            threads: 2,
            latency_passes: 3,
            bandwidth_passes: 3,
            huge_page_bytes: 0,
        }
    }

    fn measurement(pairs: Vec<MeasuredPair>) -> Measurement {
        Measurement {
            tool: "pinctl test".into(),
            measured_at: "2025-01-01T00:00:00Z".into(),
            kernel: None,
            quick: false,
            budget_ms: 10_000,
            elapsed_ms: 9_000,
            buffer_bytes: 256 << 20,
            last_level_cache_bytes: Some(32 << 20),
            pairs,
            not_measured: vec![],
        }
    }

    #[test]
    fn ratios_are_against_the_cpu_node_s_own_memory_or_its_nearest() {
        let m = measurement(vec![
            pair(0, 0, 80.0),
            pair(0, 1, 140.0),
            pair(1, 0, 150.0),
            pair(1, 1, 100.0),
            // A CPU-only node 2: its nearest memory stands for local.
            pair(2, 0, 120.0),
            pair(2, 1, 180.0),
        ]);
        assert_eq!(m.remote_ratio(0, 1), Some(1.75));
        assert_eq!(m.remote_ratio(1, 1), Some(1.0));
        assert_eq!(m.remote_ratio(2, 1), Some(1.5));
        assert_eq!(m.remote_ratio(3, 1), None);
        assert_eq!(m.cpu_nodes().to_string(), "0-2");
        assert_eq!(m.memory_nodes().to_string(), "0-1");
    }

    #[test]
    fn absurd_latencies_are_named_and_not_believed() {
        assert_eq!(implausible_latency(81.25), None);
        assert_eq!(
            implausible_latency(1e308).unwrap(),
            "`1e308` ns is not a memory latency (pinctl believes 1 to 100000 ns)"
        );
        assert!(implausible_latency(1e-300).unwrap().starts_with("`1e-300` ns"));
        assert!(implausible_latency(0.0).unwrap().starts_with("`0` ns"));
        assert!(implausible_latency(f64::NAN).is_some());
        let m = measurement(vec![pair(0, 0, 80.0), pair(0, 1, 1e308)]);
        assert_eq!(
            m.implausible().unwrap(),
            "CPU node 0 to memory node 1: `1e308` ns is not a memory latency (pinctl believes 1 \
             to 100000 ns)"
        );
    }

    /// Issue 26: pairs are found by halves and HMAT figures listed in one walk; both must
    /// answer what a search of every entry answers.
    #[test]
    fn indexed_lookups_answer_as_a_search_would() {
        let pairs: Vec<MeasuredPair> = (0..40)
            .flat_map(|c| (0..40).filter(move |m| (c + m) % 3 != 0).map(move |m| (c, m)))
            .map(|(c, m)| pair(c, m, f64::from(80 + c * 40 + m)))
            .collect();
        let m = measurement(pairs.clone());
        for c in 0..41 {
            for mem in 0..41 {
                let searched = pairs.iter().find(|p| p.cpu_node == c && p.memory_node == mem);
                assert_eq!(m.pair(c, mem), searched, "{c} {mem}");
            }
            let lowest =
                pairs.iter().filter(|p| p.cpu_node == c).map(|p| p.latency_ns).reduce(f64::min);
            assert_eq!(m.local_latency_ns(c), m.latency_ns(c, c).or(lowest));
        }
        let access = |node, class, initiators: &str, ns| HmatAccess {
            node,
            class,
            initiators: initiators.parse().unwrap(),
            read_latency_ns: ns,
            write_latency_ns: None,
            read_bandwidth_mb_s: None,
            write_bandwidth_mb_s: None,
        };
        let p = MemoryPerformance {
            hmat: vec![
                access(5, AccessClass::Access0, "0,4", Some(8)),
                access(5, AccessClass::Access1, "0", Some(26)),
                access(6, AccessClass::Hwloc, "0-2", Some(30)),
                access(6, AccessClass::Access0, "2-3", None),
            ],
            ..Default::default()
        };
        for from in 0..8 {
            for to in 0..8 {
                let first = p.hmat_latencies().find(|&(f, t, _)| f == from && t == to);
                assert_eq!(first.map(|(_, _, ns)| ns), p.hmat_latency(from, to).map(|(ns, _)| ns));
            }
        }
    }

    #[test]
    fn hmat_latency_prefers_cpu_initiators() {
        let access = |class, initiators: &str, ns| HmatAccess {
            node: 5,
            class,
            initiators: initiators.parse().unwrap(),
            read_latency_ns: ns,
            write_latency_ns: Some(9),
            read_bandwidth_mb_s: None,
            write_bandwidth_mb_s: None,
        };
        let p = MemoryPerformance {
            hmat: vec![
                access(AccessClass::Access0, "0,4", Some(8)),
                access(AccessClass::Access1, "0", Some(26)),
            ],
            ..Default::default()
        };
        assert_eq!(p.hmat_latency(0, 5), Some((26, AccessClass::Access1)));
        assert_eq!(p.hmat_latency(4, 5), Some((8, AccessClass::Access0)));
        assert_eq!(p.hmat_latency(1, 5), None, "not among the best initiators");
        let p = MemoryPerformance {
            hmat: vec![access(AccessClass::Access1, "0", None)],
            ..Default::default()
        };
        assert_eq!(p.hmat_latency(0, 5), Some((9, AccessClass::Access1)), "write latency");
    }

    #[test]
    fn json_leaves_out_what_is_unknown() {
        let p = MemoryPerformance::default();
        assert!(p.is_empty());
        assert_eq!(serde_json::to_string(&p).unwrap(), "{}");
        let p = MemoryPerformance {
            memory_tiers: vec![MemoryTier { tier: 4, nodes: "0-1".parse().unwrap() }],
            measured: Some(measurement(vec![pair(0, 0, 81.25)])),
            ..Default::default()
        };
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["memory_tiers"][0]["nodes"], serde_json::json!([0, 1]));
        assert_eq!(json["measured"]["pairs"][0]["latency_ns"], 81.25);
        assert!(json.get("hmat").is_none());
        let back: MemoryPerformance = serde_json::from_value(json).unwrap();
        assert_eq!(back, p);
    }
}
