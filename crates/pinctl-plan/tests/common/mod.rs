//! The seed topologies of issue 3 section 4, built from the facts in ../shared/DOMAIN.md
//! (choices marked "assumed" there are ours), and helpers to plan the bundled configs.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pinctl_config::Config;
use pinctl_plan::{Plan, PlanError, PlanInputs};
use pinctl_topology::{
    Cpu, CpuSet, Device, DeviceKind, HostFacts, Locality, Node, NodeSet, Topology,
};

const GIB: u64 = 1 << 30;

/// The repository root (two levels above this crate).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A topology from per-node CPU lists; `core_of` gives each CPU's (package, core).
fn build(
    node_cpus: Vec<CpuSet>,
    memory: u64,
    distance: impl Fn(usize, usize) -> u32,
    core_of: impl Fn(u32, usize) -> (u32, u32),
    devices: Vec<(&str, DeviceKind, u32)>,
) -> Topology {
    let n = node_cpus.len();
    let nodes = node_cpus
        .iter()
        .enumerate()
        .map(|(i, cpus)| Node {
            id: i as u32,
            cpus: cpus.clone(),
            memory_bytes: Some(memory),
            memory_free_bytes: None,
            has_cpu: true,
            has_memory: true,
        })
        .collect();
    let mut cpus: Vec<Cpu> = node_cpus
        .iter()
        .enumerate()
        .flat_map(|(i, set)| set.iter().map(move |c| (c, i)))
        .map(|(c, i)| {
            let (package, core) = core_of(c, i);
            Cpu {
                id: c,
                online: true,
                package: Some(package),
                core: Some(core),
                node: Some(i as u32),
            }
        })
        .collect();
    cpus.sort_by_key(|c| c.id);
    let mut devices: Vec<Device> = devices
        .into_iter()
        .enumerate()
        .map(|(k, (name, kind, node))| Device {
            name: name.to_string(),
            kind,
            pci: Some(format!("0000:{:02x}:00.0", 0x40 + k)),
            node: Some(node),
            nodes: NodeSet::from_iter([node]),
            locality: Locality::NumaNode,
            members: Vec::new(),
        })
        .collect();
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    let mut t = Topology {
        nodes,
        distances: (0..n).map(|i| (0..n).map(|j| distance(i, j)).collect()).collect(),
        cpus,
        devices,
        host: HostFacts {
            kernel: Some("6.8.0".into()),
            numa_balancing: Some(0),
            zone_reclaim_mode: Some(0),
            allowed_cpus: None,
            allowed_nodes: None,
            offline_nodes: NodeSet::new(),
        },
        warnings: Vec::new(),
    };
    t.refresh_warnings();
    t
}

fn list(s: &str) -> CpuSet {
    s.parse().unwrap()
}

/// A: 2-socket Xeon E5-2682 v4, node0 = 0-15,32-47, node1 = 16-31,48-63, 10/21, 128 GiB.
pub fn xeon() -> Topology {
    build(
        vec![list("0-15,32-47"), list("16-31,48-63")],
        128 * GIB,
        |i, j| if i == j { 10 } else { 21 },
        |c, i| (i as u32, c % 32),
        vec![("eth0", DeviceKind::Nic, 0)],
    )
}

/// B: 2-socket EPYC in NPS4: node n = 8n..8n+7 and 64+8n..64+8n+7, 64 GiB, 10/12/32,
/// eth0 on node 5, nvme0n1 on node 2, nvme1n1 on node 6.
pub fn epyc() -> Topology {
    build(
        (0..8)
            .map(|n| list(&format!("{}-{},{}-{}", 8 * n, 8 * n + 7, 64 + 8 * n, 64 + 8 * n + 7)))
            .collect(),
        64 * GIB,
        |i, j| {
            if i == j {
                10
            } else if i / 4 == j / 4 {
                12
            } else {
                32
            }
        },
        |c, i| ((i / 4) as u32, c % 64),
        vec![
            ("eth0", DeviceKind::Nic, 5),
            ("nvme0n1", DeviceKind::Nvme, 2),
            ("nvme1n1", DeviceKind::Nvme, 6),
        ],
    )
}

/// C: 2-socket 128-core ARM: 16 nodes of 8 CPUs (node i = 8i..8i+7), no SMT, 10/20/30, 32 GiB.
pub fn arm() -> Topology {
    build(
        (0..16).map(|i| list(&format!("{}-{}", 8 * i, 8 * i + 7))).collect(),
        32 * GIB,
        |i, j| {
            if i == j {
                10
            } else if i / 8 == j / 8 {
                20
            } else {
                30
            }
        },
        |c, i| ((i / 8) as u32, c),
        vec![],
    )
}

/// D: 4 nodes with interleaved CPUs: node k = k, k+4, ..., 44; 10/20, 16 GiB.
pub fn interleaved() -> Topology {
    build(
        (0..4).map(|k| (0..12).map(|i| k + 4 * i).collect()).collect(),
        16 * GIB,
        |i, j| if i == j { 10 } else { 20 },
        |c, _| (0, c),
        vec![],
    )
}

/// The seed topologies and the file each is checked in as.
pub fn seeds() -> Vec<(&'static str, Topology)> {
    vec![
        ("xeon-e5-2682v4.json", xeon()),
        ("epyc-nps4.json", epyc()),
        ("arm-128core.json", arm()),
        ("interleaved-4node.json", interleaved()),
    ]
}

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
    PlanInputs { near, default_keep_free: Vec::new(), strict }
}

/// Parses service-file text (named `name` in messages), panicking with the rendered errors.
pub fn config(name: &str, text: &str) -> Config {
    pinctl_config::parse(Path::new(name), text).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

/// A bundled config from configs/.
pub fn bundled(file: &str) -> Config {
    let path = repo().join("configs").join(file);
    pinctl_config::load(&path).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

pub fn plan_text(topology: &Topology, text: &str, strict: bool) -> Result<Plan, PlanError> {
    let config = config("test.toml", text);
    pinctl_plan::plan(topology, &config, &inputs(topology, &config, strict))
}
