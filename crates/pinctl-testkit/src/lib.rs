//! Synthetic topologies for tests and benchmarks: one builder instead of a copy of the same
//! `Topology { nodes, cpus, distances, devices, .. }` assembly in every test suite and bench.
//!
//! Why a crate of its own rather than a `testing` feature of `pinctl-topology`: the model
//! crate stays free of test scaffolding (nothing to feature-gate, nothing that an
//! `--all-features` release build compiles in), and since this crate depends on the model
//! only, `pinctl-config`, `pinctl-plan` and the root package's tests and benches can all
//! dev-depend on it without a cycle. It is never published.
//!
//! It must not read the machine: everything it builds is data given by the caller.
#![forbid(unsafe_code)]

use pinctl_topology::{
    Cache, Cpu, CpuId, CpuSet, Device, DeviceKind, HostFacts, Locality, MeasuredPair, Measurement,
    Node, NodeId, NodeSet, SchemaVersion, Topology, sort_caches,
};

/// One GiB, for node memory sizes.
pub const GIB: u64 = 1 << 30;

/// How the builder fills the distance matrix.
enum Distances {
    /// 10 on the diagonal, `same` between nodes of one package, `other` across packages.
    ByPackage { same: u32, other: u32 },
    /// Given whole.
    Matrix(Vec<Vec<u32>>),
}

/// A topology described node by node. Node `i` gets id `i` in the order nodes are added; a
/// CPU's package is its node's, its core comes from [`SyntheticTopology::cores`]. Devices
/// get PCI addresses `0000:40:00.0`, `0000:41:00.0`, ... in the order they are added.
/// CPUs are sorted by id and devices by name, as discovery sorts them.
///
/// ```
/// use pinctl_testkit::{GIB, SyntheticTopology};
/// use pinctl_topology::DeviceKind;
///
/// let t = SyntheticTopology::new()
///     .node("0-3".parse().unwrap(), 0, Some(16 * GIB))
///     .node("4-7".parse().unwrap(), 0, Some(16 * GIB))
///     .distances_by_package(20, 20)
///     .device("eth0", DeviceKind::Nic, [1])
///     .build();
/// assert_eq!(t.distances, vec![vec![10, 20], vec![20, 10]]);
/// assert_eq!(t.device("eth0").unwrap().node, Some(1));
/// ```
pub struct SyntheticTopology {
    /// CPUs, package and memory of each node.
    nodes: Vec<(CpuSet, u32, Option<u64>)>,
    core_of: Box<dyn Fn(CpuId) -> u32>,
    distances: Distances,
    devices: Vec<(String, DeviceKind, NodeSet)>,
    host: HostFacts,
    /// Which L3 each CPU shares (CPUs with the same key share one) and its size; none: the
    /// topology has no cache facts.
    l3: Option<L3Domains>,
}

/// The L3 domains of [`SyntheticTopology::l3`].
struct L3Domains {
    of: Box<dyn Fn(CpuId) -> u32>,
    size_bytes: Option<u64>,
}

impl std::fmt::Debug for SyntheticTopology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyntheticTopology")
            .field("nodes", &self.nodes)
            .field("devices", &self.devices)
            .finish_non_exhaustive()
    }
}

impl Default for SyntheticTopology {
    fn default() -> Self {
        SyntheticTopology::new()
    }
}

impl SyntheticTopology {
    /// No nodes yet; every CPU its own core, distances 10 / 20 / 20, default host facts.
    pub fn new() -> SyntheticTopology {
        SyntheticTopology {
            nodes: Vec::new(),
            core_of: Box::new(|cpu| cpu),
            distances: Distances::ByPackage { same: 20, other: 20 },
            devices: Vec::new(),
            host: HostFacts::default(),
            l3: None,
        }
    }

    /// Adds the next node: its CPUs (none for a memory-only node), its package, and its
    /// memory (`None`: unknown).
    pub fn node(mut self, cpus: CpuSet, package: u32, memory_bytes: Option<u64>) -> Self {
        self.nodes.push((cpus, package, memory_bytes));
        self
    }

    /// The core id of each CPU: CPUs with the same core id in one package are SMT siblings.
    pub fn cores(mut self, core_of: impl Fn(CpuId) -> u32 + 'static) -> Self {
        self.core_of = Box::new(core_of);
        self
    }

    /// Distances of 10 to itself, `same` within a package and `other` across packages.
    pub fn distances_by_package(mut self, same: u32, other: u32) -> Self {
        self.distances = Distances::ByPackage { same, other };
        self
    }

    /// The whole distance matrix, one row per node.
    pub fn distance_matrix(mut self, matrix: Vec<Vec<u32>>) -> Self {
        self.distances = Distances::Matrix(matrix);
        self
    }

    /// A device local to `nodes` (none: its node is unknown).
    pub fn device(
        mut self,
        name: &str,
        kind: DeviceKind,
        nodes: impl IntoIterator<Item = NodeId>,
    ) -> Self {
        self.devices.push((name.to_string(), kind, nodes.into_iter().collect()));
        self
    }

    /// Last-level caches: CPUs for which `l3_of` gives the same key share one L3 of
    /// `size_bytes` (an EPYC's CCX: `|cpu| cpu % 64 / 8` for eight cores per CCX numbered as
    /// `cores` numbers them). Without it the topology has no cache facts.
    pub fn l3(mut self, size_bytes: Option<u64>, l3_of: impl Fn(CpuId) -> u32 + 'static) -> Self {
        self.l3 = Some(L3Domains { of: Box::new(l3_of), size_bytes });
        self
    }

    /// Host facts (kernel, sysctls, the allowed cpuset).
    pub fn host(mut self, host: HostFacts) -> Self {
        self.host = host;
        self
    }

    /// The topology, without host warnings (`Topology::refresh_warnings` computes them).
    pub fn build(self) -> Topology {
        let SyntheticTopology { nodes: specs, core_of, distances, devices, host, l3 } = self;
        let nodes = specs
            .iter()
            .enumerate()
            .map(|(i, (cpus, _, memory))| Node {
                id: i as NodeId,
                cpus: cpus.clone(),
                memory_bytes: *memory,
                memory_free_bytes: None,
                has_cpu: !cpus.is_empty(),
                has_memory: true,
            })
            .collect();
        let cpus = online_cpus(&specs, &core_of);
        let distances = distances.matrix(&specs);
        let devices = pci_devices(devices);
        let caches = l3.map_or_else(Vec::new, |l3| l3.caches(&cpus));
        Topology {
            schema_version: SchemaVersion,
            nodes,
            distances,
            cpus,
            devices,
            host,
            warnings: Vec::new(),
            discovery_warnings: Vec::new(),
            memory_performance: Default::default(),
            caches,
            interrupts: Default::default(),
        }
    }
}

/// Every CPU of the nodes `specs` describes, online, by id, with its package, core and node.
fn online_cpus(specs: &[(CpuSet, u32, Option<u64>)], core_of: &dyn Fn(CpuId) -> u32) -> Vec<Cpu> {
    let mut cpus: Vec<Cpu> = specs
        .iter()
        .enumerate()
        .flat_map(|(i, (set, package, _))| set.iter().map(move |c| (c, i, *package)))
        .map(|(c, i, package)| Cpu {
            id: c,
            online: true,
            package: Some(package),
            core: Some(core_of(c)),
            node: Some(i as NodeId),
        })
        .collect();
    cpus.sort_by_key(|c| c.id);
    cpus
}

impl Distances {
    /// The SLIT matrix of the nodes `specs` describes.
    fn matrix(self, specs: &[(CpuSet, u32, Option<u64>)]) -> Vec<Vec<u32>> {
        let (same, other) = match self {
            Distances::Matrix(m) => return m,
            Distances::ByPackage { same, other } => (same, other),
        };
        specs
            .iter()
            .enumerate()
            .map(|(i, (_, a, _))| {
                specs
                    .iter()
                    .enumerate()
                    .map(|(j, (_, b, _))| match () {
                        _ if i == j => 10,
                        _ if a == b => same,
                        _ => other,
                    })
                    .collect()
            })
            .collect()
    }
}

/// The devices, by name, each at its own PCI address (`0000:40:00.0` on).
fn pci_devices(devices: Vec<(String, DeviceKind, NodeSet)>) -> Vec<Device> {
    let mut devices: Vec<Device> = devices
        .into_iter()
        .enumerate()
        .map(|(k, (name, kind, nodes))| {
            let mut device = Device {
                name,
                kind,
                pci: Some(format!("0000:{:02x}:00.0", 0x40 + k)),
                node: None,
                nodes: NodeSet::new(),
                locality: Locality::NumaNode,
                members: Vec::new(),
                aliases: Vec::new(),
            };
            device.set_nodes(nodes);
            device
        })
        .collect();
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    devices
}

impl L3Domains {
    /// One L3 per key over `cpus`.
    fn caches(&self, cpus: &[Cpu]) -> Vec<Cache> {
        let mut by_key: std::collections::BTreeMap<u32, CpuSet> = Default::default();
        for c in cpus {
            by_key.entry((self.of)(c.id)).or_default().insert(c.id);
        }
        let mut caches: Vec<Cache> = by_key
            .into_values()
            .map(|cpus| Cache { level: 3, cpus, size_bytes: self.size_bytes })
            .collect();
        sort_caches(&mut caches);
        caches
    }
}

/// Three nodes of 2 CPUs and 1 GiB, nodes 0 and 1 in package 0 and node 2 in package 1, with
/// EPYC-like SLIT distances (12 inside a package, 32 across): the machine the tests of measured
/// distances contradict.
pub fn three_nodes_slit_12_32() -> Topology {
    SyntheticTopology::new()
        .node("0-1".parse().unwrap_or_default(), 0, Some(GIB))
        .node("2-3".parse().unwrap_or_default(), 0, Some(GIB))
        .node("4-5".parse().unwrap_or_default(), 1, Some(GIB))
        .distance_matrix(vec![vec![10, 12, 32], vec![12, 10, 32], vec![32, 32, 10]])
        .build()
}

/// A full (not `--quick`) `pinctl probe` result of the pairs `(CPU node, memory node, latency
/// ns)`, sorted as readers leave them (by CPU node, then memory node): 10 GB/s and 3 passes of each kind per pair, 2 threads, a 256 MiB
/// buffer on huge pages, by `pinctl 0.1.0` on 2025-01-01. Tests change the fields they are
/// about.
pub fn measurement(pairs: impl IntoIterator<Item = (NodeId, NodeId, f64)>) -> Measurement {
    let mut m = Measurement {
        tool: "pinctl 0.1.0".into(),
        measured_at: "2025-01-01T00:00:00Z".into(),
        kernel: None,
        quick: false,
        budget_ms: 10_000,
        elapsed_ms: 9_000,
        buffer_bytes: 256 << 20,
        last_level_cache_bytes: Some(32 << 20),
        pairs: pairs
            .into_iter()
            .map(|(cpu_node, memory_node, latency_ns)| MeasuredPair {
                cpu_node,
                memory_node,
                latency_ns,
                read_bandwidth_gb_s: 10.0,
                threads: 2,
                latency_passes: 3,
                bandwidth_passes: 3,
                huge_page_bytes: 256 << 20,
            })
            .collect(),
        not_measured: Vec::new(),
    };
    m.pairs.sort_by_key(|p| (p.cpu_node, p.memory_node));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_decide_distances_and_cores_pair_siblings() {
        let t = SyntheticTopology::new()
            .node("0-1,4-5".parse().unwrap(), 0, Some(GIB))
            .node("2-3,6-7".parse().unwrap(), 0, None)
            .node(CpuSet::new(), 1, Some(GIB))
            .cores(|c| c % 4)
            .distances_by_package(12, 32)
            .device("nvme0n1", DeviceKind::Nvme, [2])
            .device("md0", DeviceKind::Other, [0, 1])
            .build();
        assert_eq!(t.distances, vec![vec![10, 12, 32], vec![12, 10, 32], vec![32, 32, 10]]);
        let ids: Vec<CpuId> = t.cpus.iter().map(|c| c.id).collect();
        assert_eq!(ids, (0..8).collect::<Vec<_>>(), "CPUs sorted by id");
        assert_eq!(
            (t.cpus[4].core, t.cpus[4].node),
            (Some(0), Some(0)),
            "CPU 4 is CPU 0's sibling"
        );
        assert!(!t.nodes[2].has_cpu && t.nodes[1].memory_bytes.is_none());
        let names: Vec<&str> = t.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["md0", "nvme0n1"]);
        assert_eq!(t.devices[0].node, None, "two nodes: no single node");
        assert_eq!(t.devices[1].pci.as_deref(), Some("0000:40:00.0"));
        assert!(t.caches.is_empty(), "no cache facts unless asked for");
    }

    #[test]
    fn l3_domains_group_cpus_by_key() {
        let t = SyntheticTopology::new()
            .node("0-7,16-23".parse().unwrap(), 0, None)
            .node("8-15,24-31".parse().unwrap(), 0, None)
            .cores(|c| c % 16)
            .l3(Some(32 << 20), |c| c % 16 / 4)
            .build();
        let caches: Vec<String> = t.caches.iter().map(|c| c.cpus.to_string()).collect();
        assert_eq!(caches, ["0-3,16-19", "4-7,20-23", "8-11,24-27", "12-15,28-31"]);
        assert!(t.caches.iter().all(|c| c.level == 3 && c.size_bytes == Some(32 << 20)));
        assert_eq!(t.cache_of(21), Some(1));
    }
}
