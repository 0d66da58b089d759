//! The seed topologies of issue 3 section 4, built from the facts in ../shared/DOMAIN.md
//! (choices marked "assumed" there are ours), and helpers to plan the bundled configs.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pinctl_config::Config;
use pinctl_plan::{Plan, PlanError, PlanInputs};
use pinctl_testkit::{GIB, SyntheticTopology};
use pinctl_topology::{CpuSet, DeviceKind, HostFacts, NodeSet, Topology};

/// The repository root (two levels above this crate).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The host facts of every seed: a recent kernel with automatic NUMA balancing and zone
/// reclaim off, no cpuset.
fn seed(t: SyntheticTopology) -> Topology {
    let host = HostFacts {
        kernel: Some("6.8.0".into()),
        numa_balancing: Some(0),
        zone_reclaim_mode: Some(0),
        allowed_cpus: None,
        allowed_nodes: None,
        offline_nodes: NodeSet::new(),
        memory_bytes: None,
        memory_policies: None,
    };
    let mut t = t.host(host).build();
    t.refresh_warnings();
    t
}

fn list(s: &str) -> CpuSet {
    s.parse().unwrap()
}

/// A: 2-socket Xeon E5-2682 v4, node0 = 0-15,32-47, node1 = 16-31,48-63, 10/21, 128 GiB;
/// one 40 MiB L3 per socket.
pub fn xeon() -> Topology {
    seed(
        SyntheticTopology::new()
            .node(list("0-15,32-47"), 0, Some(128 * GIB))
            .node(list("16-31,48-63"), 1, Some(128 * GIB))
            .cores(|c| c % 32)
            .l3(Some(40 * MIB), |c| c % 32 / 16)
            .distances_by_package(21, 21)
            .device("eth0", DeviceKind::Nic, [0]),
    )
}

/// B: 2-socket EPYC in NPS4: node n = 8n..8n+7 and 64+8n..64+8n+7, 64 GiB, 10/12/32,
/// eth0 on node 5, nvme0n1 on node 2, nvme1n1 on node 6. A 32-core Rome (7502): two CCXs of
/// four cores per node, each with its own 16 MiB L3 (assumed).
pub fn epyc() -> Topology {
    let host = (0..8).fold(SyntheticTopology::new(), |t, n| {
        let cpus = list(&format!("{}-{},{}-{}", 8 * n, 8 * n + 7, 64 + 8 * n, 64 + 8 * n + 7));
        t.node(cpus, n / 4, Some(64 * GIB))
    });
    seed(
        host.cores(|c| c % 64)
            .l3(Some(16 * MIB), |c| c % 64 / 4)
            .distances_by_package(12, 32)
            .device("eth0", DeviceKind::Nic, [5])
            .device("nvme0n1", DeviceKind::Nvme, [2])
            .device("nvme1n1", DeviceKind::Nvme, [6]),
    )
}

/// B with a measurement that contradicts SLIT, for docs/planning.md (example E) and docs/probe.md:
/// made-up figures in the shape a probe of an NPS4 EPYC gives, not a real run. Inside a
/// socket SLIT says 12 for every pair; the "measurement" has pairs 0-3, 1-2, 4-7 and 5-6 at
/// about 118 ns and the other pairs of a socket at about 142 ns (local 96 ns, across 205 ns).
pub fn epyc_measured_example() -> Topology {
    let mut t = epyc();
    let close = |a: u32, b: u32| matches!((a.min(b), a.max(b)), (0, 3) | (1, 2) | (4, 7) | (5, 6));
    let tenth = |x: f64| (x * 10.0).round() / 10.0;
    let pairs = (0..8u32)
        .flat_map(|c| (0..8u32).map(move |m| (c, m)))
        .map(|(c, m)| {
            let wobble = 0.2 * f64::from((c + 2 * m) % 4);
            let (latency_ns, read_bandwidth_gb_s) = match () {
                _ if c == m => (96.0 + 0.3 * f64::from(c % 3), 38.4),
                _ if c / 4 == m / 4 && close(c, m) => (118.0 + wobble, 30.1),
                _ if c / 4 == m / 4 => (142.0 + wobble, 26.3),
                _ => (205.0 + wobble, 17.2),
            };
            pinctl_topology::MeasuredPair {
                cpu_node: c,
                memory_node: m,
                latency_ns: tenth(latency_ns),
                read_bandwidth_gb_s,
                threads: 8,
                latency_passes: 5,
                bandwidth_passes: 5,
                huge_page_bytes: 256 << 20,
            }
        })
        .collect();
    t.memory_performance.measured = Some(pinctl_topology::Measurement {
        tool: "pinctl 0.1.0".into(),
        measured_at: "2025-06-02T09:30:00Z".into(),
        kernel: t.host.kernel.clone(),
        quick: false,
        budget_ms: 96_000,
        elapsed_ms: 93_412,
        buffer_bytes: 256 << 20,
        last_level_cache_bytes: Some(16 << 20),
        pairs,
        not_measured: Vec::new(),
    });
    t
}

/// C: 2-socket 128-core ARM: 16 nodes of 8 CPUs (node i = 8i..8i+7), no SMT, 10/20/30, 32 GiB.
pub fn arm() -> Topology {
    let host = (0..16).fold(SyntheticTopology::new(), |t, i| {
        t.node(list(&format!("{}-{}", 8 * i, 8 * i + 7)), i / 8, Some(32 * GIB))
    });
    seed(host.distances_by_package(20, 30))
}

/// D: 4 nodes with interleaved CPUs: node k = k, k+4, ..., 44; 10/20, 16 GiB.
pub fn interleaved() -> Topology {
    let host = (0..4).fold(SyntheticTopology::new(), |t, k| {
        t.node((0..12).map(|i| k + 4 * i).collect(), 0, Some(16 * GIB))
    });
    seed(host.distances_by_package(20, 20))
}

/// E: 2-socket 64-core EPYC 9554 (Genoa) in NPS1: one node per socket, each of 8 CCDs of 8
/// cores with SMT and a 32 MiB L3 per CCD; node 0 = 0-63,128-191, node 1 = 64-127,192-255
/// (siblings c and c+128), 10/32, 768 GiB per node (assumed), eth0 and nvme0n1 on node 0,
/// nvme1n1 on node 1 (assumed).
pub fn genoa() -> Topology {
    seed(
        SyntheticTopology::new()
            .node(list("0-63,128-191"), 0, Some(768 * GIB))
            .node(list("64-127,192-255"), 1, Some(768 * GIB))
            .cores(|c| c % 128)
            .l3(Some(32 * MIB), |c| c % 128 / 8)
            .distances_by_package(32, 32)
            .device("eth0", DeviceKind::Nic, [0])
            .device("nvme0n1", DeviceKind::Nvme, [0])
            .device("nvme1n1", DeviceKind::Nvme, [1]),
    )
}

/// F: a small virtual machine: one node of 2 CPUs (one core each, one L3), 8 GiB.
pub fn small_vm() -> Topology {
    seed(SyntheticTopology::new().node(list("0-1"), 0, Some(8 * GIB)).l3(Some(32 * MIB), |_| 0))
}

/// The seed topologies and the file each is checked in as.
pub fn seeds() -> Vec<(&'static str, Topology)> {
    vec![
        ("xeon-e5-2682v4.json", xeon()),
        ("epyc-nps4.json", epyc()),
        ("arm-128core.json", arm()),
        ("interleaved-4node.json", interleaved()),
        ("epyc-nps4-measured.json", epyc_measured_example()),
        ("epyc-9554-nps1.json", genoa()),
        ("vm-2cpu.json", small_vm()),
    ]
}

/// One MiB, for cache sizes.
pub const MIB: u64 = 1 << 20;

/// A checked-in topology snapshot.
pub fn topology(file: &str) -> Topology {
    let path = repo().join("configs/topologies").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Near entries resolved the way `pinctl plan` does for a snapshot: a device name stands for
/// itself when the topology has it.
pub fn inputs(topology: &Topology, config: &Config, strict: bool) -> PlanInputs {
    let mut near = BTreeMap::new();
    for (_, instance) in config.instances() {
        for spec in &instance.near {
            let devices = topology.device(spec).map(|d| vec![d.name.clone()]).unwrap_or_default();
            near.insert(spec.clone(), devices);
        }
    }
    PlanInputs { near, default_keep_free: Vec::new(), strict, ..PlanInputs::default() }
}

/// Parses service-file text (named `name` in messages), panicking with the rendered errors.
pub fn config(name: &str, text: &str) -> Config {
    pinctl_config::parse(Path::new(name), text).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// A bundled config from configs/.
pub fn bundled(file: &str) -> Config {
    let path = repo().join("configs").join(file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    pinctl_config::from_bytes(&path, &bytes).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

pub fn plan_text(topology: &Topology, text: &str, strict: bool) -> Result<Plan, PlanError> {
    let config = config("test.toml", text);
    pinctl_plan::plan(topology, &config, &inputs(topology, &config, strict))
}

/// Plans `before`, then `after` with the first plan's placements as where the instances run
/// today (a reload); returns both re-plans of `after`: sticky, and fresh (no placements).
pub fn replan(t: &Topology, before: &str, after: &str) -> (Plan, Plan, Plan) {
    let old = plan_text(t, before, false).unwrap();
    let config = config("after.toml", after);
    let mut sticky = inputs(t, &config, false);
    sticky.current =
        old.placements.iter().map(|p| (p.instance.clone(), p.placement.clone())).collect();
    let fresh = pinctl_plan::plan(t, &config, &inputs(t, &config, false)).unwrap();
    let new = pinctl_plan::plan(t, &config, &sticky).unwrap();
    assert!(new.optimal);
    assert_eq!(new, pinctl_plan::plan(t, &config, &sticky).unwrap(), "deterministic");
    (old, new, fresh)
}

/// `instance nodes cpus` for every placement, to compare plans.
pub fn where_each(plan: &Plan) -> Vec<String> {
    plan.placements
        .iter()
        .map(|p| format!("{} {} {}", p.instance, p.placement.nodes, p.placement.cpus))
        .collect()
}
