//! pinctl's model of a NUMA machine: nodes with their CPUs, memory and distances, CPUs with
//! their package and core, devices with the node(s) they are local to, and the host settings
//! that decide whether pinning holds.
//!
//! This crate is pure data. It must not read files, call the kernel or know where a fact came
//! from beyond the [`Locality`] tag: discovery lives in `pinctl-sysfs`, decisions in
//! `pinctl-plan`. Its serde form is the `pinctl topology --json` contract (docs/topology.md).
#![forbid(unsafe_code)]

mod cache;
mod discovery;
mod idset;
mod interrupts;
mod performance;
mod placement;
mod policy;
pub mod text;
mod warnings;

pub use cache::{Cache, last_level_caches, sort_caches};
pub use discovery::DiscoveryWarning;
pub use idset::{
    CpuKind, CpuSet, IdKind, IdSet, MAX_CPU_ID, MAX_ID, MAX_NODE_ID, NodeKind, NodeSet,
    ParseIdSetError,
};
pub use interrupts::{Interrupts, Irq, IrqCount, Irqbalance, NetQueues, QueueCpus};
pub use performance::{
    AccessClass, HmatAccess, LATENCY_NS_RANGE, MeasuredPair, Measurement, MemoryPerformance,
    MemoryTier, NotMeasured, implausible_latency, plausible_latency_ns,
};
pub use placement::Placement;
pub use policy::{MemoryPolicy, ParseMemoryPolicyError};
pub use warnings::{MEMORY_AGREEMENT_PERCENT, host_warnings};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The version of the JSON form of [`Topology`] (`pinctl topology --json`, snapshots).
/// docs/topology.md states what a change of it promises: it goes up when a field is removed,
/// renamed or changes type or meaning; pinctl reads every older version and refuses newer ones.
/// Version 1 made a device's `nodes` an array of ids; documents without a version (older
/// pinctl) wrote it as a list string.
pub const TOPOLOGY_SCHEMA_VERSION: u32 = 1;

/// The `schema_version` field of a topology document. The model is always the current version
/// (older documents are converted as they are read), so it holds no number: it writes
/// [`TOPOLOGY_SCHEMA_VERSION`] and reads any version up to it, or none (older pinctl).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchemaVersion;

impl Serialize for SchemaVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(TOPOLOGY_SCHEMA_VERSION)
    }
}

impl<'de> Deserialize<'de> for SchemaVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = u64::deserialize(d)?;
        if v > u64::from(TOPOLOGY_SCHEMA_VERSION) {
            return Err(serde::de::Error::custom(format!(
                "schema_version `{v}` is newer than {TOPOLOGY_SCHEMA_VERSION}, the newest this \
                 pinctl reads"
            )));
        }
        Ok(SchemaVersion)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for SchemaVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TopologySchemaVersion".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "integer", "const": TOPOLOGY_SCHEMA_VERSION })
    }
}

/// Id of a NUMA node as the kernel numbers it (may be sparse: 0, 1, 4, 5, ...).
pub type NodeId = u32;
/// Id of a logical CPU as the kernel numbers it.
pub type CpuId = u32;

/// A whole machine as pinctl sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// The version of this JSON form: 1. It goes up when a field is removed, renamed or changes
    /// type or meaning; pinctl reads older versions and documents without one (older pinctl).
    #[serde(default)]
    pub schema_version: SchemaVersion,
    /// Online NUMA nodes, ascending by id.
    pub nodes: Vec<Node>,
    /// SLIT distances; row `i` and column `j` follow the order of `nodes`. Empty when the
    /// source does not say (e.g. a dump without `distance` files).
    pub distances: Vec<Vec<u32>>,
    /// Every CPU the source knows of (online or not), ascending by id.
    pub cpus: Vec<Cpu>,
    /// Storage, network and other PCI devices, ascending by name.
    pub devices: Vec<Device>,
    /// Kernel and cgroup facts about the host.
    pub host: HostFacts,
    /// Things about the host that defeat or weaken pinning, in a stable order: the discovery
    /// warnings first, then the host warnings.
    pub warnings: Vec<String>,
    /// Files of the source discovery could not use and what it assumed instead. Absent from
    /// the JSON when there are none (a healthy source).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discovery_warnings: Vec<DiscoveryWarning>,
    /// What is known about reaching each node's memory beyond SLIT: HMAT, memory tiers, and a
    /// measurement by `pinctl probe` (docs/probe.md). Absent from the JSON when nothing is.
    #[serde(default, skip_serializing_if = "MemoryPerformance::is_empty")]
    pub memory_performance: MemoryPerformance,
    /// The last-level caches (L3 on x86 servers) and the CPUs that share each, ascending by
    /// their lowest CPU; a CPU is in one at most. Absent from the JSON where the source does
    /// not say (a dump without `cache/` folders, a snapshot of an older pinctl).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<Cache>,
    /// The host's interrupts, network queues and irqbalance (docs/irq.md). Absent from the
    /// JSON when the source says nothing about them (hwloc XML, older snapshots).
    #[serde(default, skip_serializing_if = "Interrupts::is_empty")]
    pub interrupts: Interrupts,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub id: NodeId,
    /// CPUs local to this node (online ones only).
    pub cpus: CpuSet,
    /// MemTotal of the node, `None` where the source has no meminfo.
    pub memory_bytes: Option<u64>,
    /// MemFree of the node, `None` where the source has no meminfo.
    pub memory_free_bytes: Option<u64>,
    /// Whether the kernel lists the node in `has_cpu` (or, without that file, it has CPUs).
    pub has_cpu: bool,
    /// Whether the kernel lists the node in `has_memory` (or, without that file, it has memory).
    pub has_memory: bool,
}

/// One logical CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    pub id: CpuId,
    pub online: bool,
    /// `physical_package_id` (socket), when known.
    pub package: Option<u32>,
    /// `core_id` within the package, when known.
    pub core: Option<u32>,
    /// The node this CPU belongs to, when it belongs to an online node.
    pub node: Option<NodeId>,
}

/// What kind of device this is, as far as placement cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Nvme,
    Disk,
    Nic,
    Infiniband,
    Gpu,
    /// PCI processing accelerators (class 0x12xx) and co-processors (0x0b40).
    Accelerator,
    Other,
}

/// How a device's locality was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Locality {
    /// `numa_node` of the device or its first PCI ancestor that has one.
    NumaNode,
    /// `numa_node` was -1; the PCI device's `local_cpulist` named the node(s).
    LocalCpulist,
    /// An NVMe native-multipath namespace: the union of its controllers' nodes.
    MultipathControllers,
    /// A dm/md/LVM volume, bond or VLAN: the union of its members' nodes.
    Members,
    /// Given by an hwloc XML topology.
    Hwloc,
    /// Nothing said where it is.
    Unknown,
}

/// A device pinctl can place services near.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// Kernel name: `nvme0n1`, `eth0`, `mlx5_0`, `dm-0`, `bond0`.
    pub name: String,
    pub kind: DeviceKind,
    /// PCI address (`0000:00:02.0`) of the function behind it, when there is one.
    pub pci: Option<String>,
    /// The single local node, or `None` when unknown or when the device spans several nodes.
    pub node: Option<NodeId>,
    /// Every local node; empty when unknown. An array of node ids in JSON (as in `pinctl plan
    /// --json`); a list string (`"0-1"`) is read too, as documents without a `schema_version`
    /// wrote it.
    #[serde(with = "node_ids")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<NodeId>"))]
    pub nodes: NodeSet,
    pub locality: Locality,
    /// Member devices for stacked block devices, bonds and VLANs; controllers for multipath.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// Other names `near` accepts for it: the DRM `cardN` and `renderDN` of a GPU named
    /// `nvidiaN`, the render node of a `cardN`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

/// Host-wide facts that decide whether pinning holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct HostFacts {
    /// `uname -r` as `/proc/sys/kernel/osrelease` says.
    pub kernel: Option<String>,
    /// `/proc/sys/kernel/numa_balancing`.
    pub numa_balancing: Option<u32>,
    /// `/proc/sys/vm/zone_reclaim_mode`.
    pub zone_reclaim_mode: Option<u32>,
    /// `Cpus_allowed_list` of the reading process (its cpuset); `None` when unknown.
    pub allowed_cpus: Option<CpuSet>,
    /// `Mems_allowed_list` of the reading process (its cpuset); `None` when unknown.
    pub allowed_nodes: Option<NodeSet>,
    /// Nodes the kernel knows but that are offline.
    pub offline_nodes: NodeSet,
    /// MemTotal of `/proc/meminfo`: the machine's memory, which the nodes' figures should add
    /// up to. `None` where the source has none (hwloc XML, documents of older pinctl).
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// The newer memory policies the running kernel accepts, probed on the live machine (by
    /// trying each on pinctl's own thread), never guessed from the version. `None` where
    /// nothing was probed: another machine's capture, a snapshot, hwloc XML.
    #[serde(default)]
    pub memory_policies: Option<PolicySupport>,
}

/// What the running kernel's `set_mempolicy` accepts beyond the original four modes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PolicySupport {
    /// MPOL_PREFERRED_MANY (`preferred-many`, Linux 5.15).
    pub preferred_many: bool,
    /// MPOL_WEIGHTED_INTERLEAVE (`weighted-interleave`, Linux 6.9).
    pub weighted_interleave: bool,
    /// MPOL_F_NUMA_BALANCING with `bind` (Linux 5.12): automatic NUMA balancing may move
    /// pages within the bound nodes.
    pub numa_balancing_flag: bool,
    /// Each node's weight for weighted interleave
    /// (`/sys/kernel/mm/mempolicy/weighted_interleave/nodeN`), in node order; empty where the
    /// kernel has no such folder.
    #[serde(default)]
    pub interleave_weights: Vec<NodeWeight>,
}

impl PolicySupport {
    /// Whether the kernel accepts `policy` (the original four and `local` it always does).
    pub fn supports(&self, policy: MemoryPolicy) -> bool {
        match policy {
            MemoryPolicy::PreferredMany => self.preferred_many,
            MemoryPolicy::WeightedInterleave => self.weighted_interleave,
            MemoryPolicy::Default
            | MemoryPolicy::Bind
            | MemoryPolicy::Preferred
            | MemoryPolicy::Interleave
            | MemoryPolicy::Local => true,
        }
    }
}

/// A node's weight in weighted interleave (1-255: pages placed on it per round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NodeWeight {
    pub node: NodeId,
    pub weight: u8,
}

/// A node set as an array of node ids, read from that or from a list string (`"0-1"`).
pub(crate) mod node_ids {
    use serde::de::{self, SeqAccess, Visitor};
    use serde::ser::SerializeSeq;
    use serde::{Deserializer, Serializer};

    use crate::NodeSet;

    pub(crate) fn serialize<S: Serializer>(set: &NodeSet, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(set.len()))?;
        for id in set.iter() {
            seq.serialize_element(&id)?;
        }
        seq.end()
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NodeSet, D::Error> {
        struct Ids;
        impl<'de> Visitor<'de> for Ids {
            type Value = NodeSet;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of node ids, or a node list string such as \"0-1\"")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<NodeSet, E> {
                NodeSet::parse_list(v).map_err(E::custom)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeSet, A::Error> {
                let mut set = NodeSet::new();
                while let Some(id) = seq.next_element::<u32>()? {
                    if id > crate::MAX_NODE_ID {
                        return Err(de::Error::custom(format!(
                            "node id `{id}` is above {}",
                            crate::MAX_NODE_ID
                        )));
                    }
                    set.insert(id);
                }
                Ok(set)
            }
        }
        d.deserialize_any(Ids)
    }
}

impl Topology {
    /// The node with this id.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.binary_search_by_key(&id, |n| n.id).ok().map(|i| &self.nodes[i])
    }

    /// Position of a node in `nodes` (and in the rows and columns of `distances`).
    pub fn node_index(&self, id: NodeId) -> Option<usize> {
        self.nodes.binary_search_by_key(&id, |n| n.id).ok()
    }

    /// SLIT distance from node `a` to node `b`, when known.
    pub fn distance(&self, a: NodeId, b: NodeId) -> Option<u32> {
        let (i, j) = (self.node_index(a)?, self.node_index(b)?);
        self.distances.get(i)?.get(j).copied()
    }

    /// Ids of all online nodes.
    pub fn node_ids(&self) -> NodeSet {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Online CPUs of all nodes.
    pub fn online_cpus(&self) -> CpuSet {
        self.cpus.iter().filter(|c| c.online).map(|c| c.id).collect()
    }

    /// CPUs of a set of nodes.
    pub fn cpus_of(&self, nodes: &NodeSet) -> CpuSet {
        nodes.iter().filter_map(|n| self.node(n)).fold(CpuSet::new(), |acc, n| acc.union(&n.cpus))
    }

    /// The CPU with this id.
    pub fn cpu(&self, id: CpuId) -> Option<&Cpu> {
        self.cpus.binary_search_by_key(&id, |c| c.id).ok().map(|i| &self.cpus[i])
    }

    /// The package (socket) of a node: the package of its first CPU that has one.
    pub fn package_of_node(&self, id: NodeId) -> Option<u32> {
        self.node(id)?.cpus.iter().find_map(|c| self.cpu(c)?.package)
    }

    /// Number of distinct packages among online CPUs.
    pub fn package_count(&self) -> usize {
        let mut p: Vec<u32> =
            self.cpus.iter().filter(|c| c.online).filter_map(|c| c.package).collect();
        p.sort_unstable();
        p.dedup();
        p.len()
    }

    /// Position in `caches` of the last-level cache `cpu` shares, when known.
    pub fn cache_of(&self, cpu: CpuId) -> Option<usize> {
        self.caches.iter().position(|c| c.cpus.contains(cpu))
    }

    /// The device with this name.
    pub fn device(&self, name: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// Recomputes `warnings` from the rest of the model: the discovery warnings, which only
    /// discovery can know, then [`host_warnings`].
    pub fn refresh_warnings(&mut self) {
        let mut warnings: Vec<String> =
            self.discovery_warnings.iter().map(ToString::to_string).collect();
        warnings.extend(host_warnings(self));
        self.warnings = warnings;
    }
}

impl Device {
    /// Sets `nodes`, and `node` when the set has exactly one element.
    pub fn set_nodes(&mut self, nodes: NodeSet) {
        self.node = if nodes.len() == 1 { nodes.first() } else { None };
        self.nodes = nodes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn two_node() -> Topology {
        let mut t = Topology {
            schema_version: SchemaVersion,
            nodes: vec![
                Node {
                    id: 0,
                    cpus: "0-3".parse().unwrap(),
                    memory_bytes: Some(8 << 30),
                    memory_free_bytes: Some(4 << 30),
                    has_cpu: true,
                    has_memory: true,
                },
                Node {
                    id: 2,
                    cpus: "4-7".parse().unwrap(),
                    memory_bytes: Some(8 << 30),
                    memory_free_bytes: None,
                    has_cpu: true,
                    has_memory: true,
                },
            ],
            distances: vec![vec![10, 21], vec![21, 10]],
            cpus: (0..8)
                .map(|i| Cpu {
                    id: i,
                    online: true,
                    package: Some(i / 4),
                    core: Some(i % 4),
                    node: Some(if i < 4 { 0 } else { 2 }),
                })
                .collect(),
            devices: vec![Device {
                name: "nvme0n1".into(),
                kind: DeviceKind::Nvme,
                pci: Some("0000:00:02.0".into()),
                node: Some(2),
                nodes: "2".parse().unwrap(),
                locality: Locality::NumaNode,
                members: vec![],
                aliases: vec![],
            }],
            host: HostFacts {
                numa_balancing: Some(1),
                zone_reclaim_mode: Some(0),
                ..Default::default()
            },
            warnings: vec![],
            discovery_warnings: vec![],
            memory_performance: MemoryPerformance::default(),
            caches: vec![
                Cache { level: 3, cpus: "0-3".parse().unwrap(), size_bytes: Some(32 << 20) },
                Cache { level: 3, cpus: "4-7".parse().unwrap(), size_bytes: None },
            ],
            interrupts: Interrupts::default(),
        };
        t.refresh_warnings();
        t
    }

    #[test]
    fn lookups_follow_sparse_ids() {
        let t = two_node();
        assert_eq!(t.distance(0, 2), Some(21));
        assert_eq!(t.distance(2, 2), Some(10));
        assert_eq!(t.distance(0, 1), None);
        assert_eq!(t.cpus_of(&"0,2".parse().unwrap()).to_string(), "0-7");
        assert_eq!(t.package_of_node(2), Some(1));
        assert_eq!(t.package_count(), 2);
        assert_eq!((t.cache_of(2), t.cache_of(5), t.cache_of(9)), (Some(0), Some(1), None));
    }

    #[test]
    fn refreshing_keeps_discovery_warnings_first() {
        let mut t = two_node();
        let json = serde_json::to_string(&t).unwrap();
        assert!(!json.contains("discovery_warnings"), "absent when there are none: {json}");
        t.discovery_warnings.push(DiscoveryWarning {
            file: "sys/devices/system/node/node2/meminfo".into(),
            problem: "is empty".into(),
            assumed: "node 2's memory is unknown".into(),
        });
        t.refresh_warnings();
        t.refresh_warnings();
        assert_eq!(t.warnings.len(), 2, "{:?}", t.warnings);
        assert_eq!(
            t.warnings[0],
            "`sys/devices/system/node/node2/meminfo` is empty; assumed node 2's memory is unknown"
        );
        assert!(t.warnings[1].contains("numa_balancing"));
        let back: Topology = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn json_round_trips_exactly() {
        let t = two_node();
        let json = serde_json::to_string_pretty(&t).unwrap();
        let back: Topology = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), json);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["nodes"][1]["cpus"], "4-7");
        assert_eq!(v["devices"][0]["node"], 2);
        assert_eq!(v["devices"][0]["nodes"], serde_json::json!([2]));
        assert_eq!(v["schema_version"], TOPOLOGY_SCHEMA_VERSION);
    }

    #[test]
    fn documents_of_older_pinctl_still_read() {
        let t = two_node();
        let mut v = serde_json::to_value(&t).unwrap();
        v.as_object_mut().unwrap().remove("schema_version");
        v["devices"][0]["nodes"] = "2".into();
        v["host"].as_object_mut().unwrap().remove("memory_bytes");
        // Older pinctl wrote no caches: read as unknown, and written without the key.
        let caches = v.as_object_mut().unwrap().remove("caches").expect("caches are written");
        let mut without = t.clone();
        without.caches.clear();
        assert_eq!(serde_json::from_value::<Topology>(v.clone()).unwrap(), without);
        assert!(!serde_json::to_string(&without).unwrap().contains("caches"));
        v["caches"] = caches;
        assert_eq!(
            v["caches"][0],
            serde_json::json!({"level": 3, "cpus": "0-3", "size_bytes": 33554432})
        );
        assert_eq!(serde_json::from_value::<Topology>(v.clone()).unwrap(), t);
        v["devices"][0]["nodes"] = serde_json::json!([4096]);
        let e = serde_json::from_value::<Topology>(v.clone()).unwrap_err().to_string();
        assert!(e.contains("node id `4096` is above 4095"), "{e}");
        v["devices"][0]["nodes"] = serde_json::json!([2]);
        v["schema_version"] = (TOPOLOGY_SCHEMA_VERSION + 1).into();
        let e = serde_json::from_value::<Topology>(v).unwrap_err().to_string();
        assert!(e.contains("is newer than"), "{e}");
    }
}
