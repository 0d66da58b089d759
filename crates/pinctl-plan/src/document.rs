//! The `pinctl plan --json` document: the contract of docs/planning.md, as types, so that its
//! JSON Schema (docs/schema/plan.schema.json) is generated from what is written.

use pinctl_topology::{CpuSet, MemoryPolicy, NodeId, NodeSet};
use serde::{Serialize, Serializer};

use crate::{Plan, PlannedInstance};

/// The version of the plan document. docs/planning.md states what a change of it promises: it
/// goes up when a field is removed, renamed or changes type or meaning; new fields may come
/// within a version.
pub const PLAN_SCHEMA_VERSION: u32 = 2;

/// `pinctl plan --json`: node sets as arrays of ids, CPU sets as list strings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanDocument {
    /// The version of this document's form: 2 (1 listed each instance's sharers in
    /// `shares_with`, which grew with the square of their count). It goes up when a field is removed, renamed or
    /// changes type or meaning.
    pub schema_version: PlanSchemaVersion,
    /// One per instance, in the order of the service file.
    pub services: Vec<PlacementDocument>,
    /// Nodes no instance uses.
    pub free_nodes: Vec<NodeId>,
    /// Kept-free nodes (`keep-free`, or the default route's NICs) that the plan leaves empty.
    pub kept_free_nodes: Vec<NodeId>,
    /// What the planner wants known: soft rules broken, entries that name nothing.
    pub warnings: Vec<String>,
    /// What the topology says about the host (the `warnings` of `pinctl topology --json`).
    pub host_warnings: Vec<String>,
    /// The service file's warnings (also printed on stderr with their context), each as
    /// `FILE:LINE:COLUMN: message`, or `FILE: message` for the whole file.
    pub config_warnings: Vec<String>,
    /// Whether the search proved the plan optimal.
    pub optimal: bool,
    /// What nodes were compared by: `measure` (`measured`, `hmat`, `slit`, `assumed`) and a
    /// `note` on where the numbers come from or why a better measure was not used.
    pub distances: crate::DistanceReport,
    /// Interrupts that land on an instance's CPUs today, by instance then interrupt (empty
    /// when none do, or the topology says nothing of interrupts: a snapshot, hwloc XML).
    pub interrupts_on_service_cpus: Vec<crate::InterruptLanding>,
    /// Every node hosting instances that do not own it (`cpus = N` instances, instances of
    /// `share-nodes`), ascending by node: who is there and how many CPUs of instances each of
    /// its CPUs carries.
    pub node_use: Vec<NodeUseDocument>,
    /// Instances whose CPUs overlap, directly or through another member (instances sharing a
    /// node, or CPUs under `cpu-overcommit`), each group once, in the order of their first
    /// member in the service file; an instance names its group in `sharing_group`.
    pub sharing_groups: Vec<SharingGroupDocument>,
}

/// One group of instances whose CPUs overlap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SharingGroupDocument {
    /// Its number: the `sharing_group` of its members, and its index in `sharing_groups`.
    pub group: usize,
    /// The nodes its members run on.
    pub nodes: Vec<NodeId>,
    /// Its members' CPUs, together.
    pub cpus: CpuSet,
    /// Its members, in the order of the service file (two or more).
    pub members: Vec<String>,
}

/// How a node that instances do not own is used.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NodeUseDocument {
    pub node: NodeId,
    /// The instances on it, in the order of the service file.
    pub instances: Vec<String>,
    /// CPUs services may be given there.
    pub usable_cpus: u32,
    /// The sizes of the instances' CPU sets there, summed (a CPU in three sets counts 3).
    pub cpus_given: u32,
    /// `cpus_given / usable_cpus`, rounded to two decimals: above 1 where CPUs are shared.
    pub cpus_per_cpu: f64,
}

/// Where one instance runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PlacementDocument {
    /// The instance: `tikv-0`, or the service's name for a single instance.
    pub name: String,
    pub service: String,
    /// Nodes whose CPUs it runs on.
    pub nodes: Vec<NodeId>,
    pub cpus: CpuSet,
    pub memory_policy: MemoryPolicy,
    /// The policy's nodes; empty for `default` and `local`.
    pub memory_nodes: Vec<NodeId>,
    /// Why these nodes and CPUs, one sentence each.
    pub reasons: Vec<String>,
    /// The `group` in `sharing_groups` of the instances whose CPUs overlap this one's (they
    /// share a node, or CPUs under `cpu-overcommit`); null when its CPUs are its own.
    pub sharing_group: Option<usize>,
    /// The service file the instance is defined in (several files of one host are planned
    /// together); filled in by whoever read the files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The supervisor of that file (`[host] name`, else the file's name without `.toml`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<String>,
}

/// The `schema_version` of a plan document: always [`PLAN_SCHEMA_VERSION`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanSchemaVersion;

impl Serialize for PlanSchemaVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(PLAN_SCHEMA_VERSION)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for PlanSchemaVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PlanSchemaVersion".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "integer", "const": PLAN_SCHEMA_VERSION })
    }
}

fn ids(set: &NodeSet) -> Vec<NodeId> {
    set.iter().collect()
}

impl Plan {
    /// The JSON document of this plan on a host with these warnings, from a service file with
    /// these.
    pub fn document(&self, host_warnings: &[String], config_warnings: &[String]) -> PlanDocument {
        PlanDocument {
            schema_version: PlanSchemaVersion,
            services: self.placements.iter().map(PlannedInstance::document).collect(),
            free_nodes: ids(&self.free_nodes),
            kept_free_nodes: ids(&self.kept_free_nodes),
            warnings: self.warnings.clone(),
            host_warnings: host_warnings.to_vec(),
            config_warnings: config_warnings.to_vec(),
            optimal: self.optimal,
            distances: self.distances.clone(),
            node_use: self
                .node_use
                .iter()
                .map(|u| NodeUseDocument {
                    node: u.node,
                    instances: u.instances.clone(),
                    usable_cpus: u.usable_cpus,
                    cpus_given: u.cpus_given,
                    cpus_per_cpu: u.cpus_per_cpu().parse().unwrap_or(0.0),
                })
                .collect(),
            sharing_groups: self
                .sharing_groups
                .iter()
                .enumerate()
                .map(|(group, g)| SharingGroupDocument {
                    group,
                    nodes: ids(&g.nodes),
                    cpus: g.cpus.clone(),
                    members: g.members.clone(),
                })
                .collect(),
            interrupts_on_service_cpus: Vec::new(),
        }
    }
}

impl PlannedInstance {
    /// The JSON form of one placement, as in [`PlanDocument::services`].
    pub fn document(&self) -> PlacementDocument {
        let p = &self.placement;
        PlacementDocument {
            name: self.instance.clone(),
            service: self.service.clone(),
            nodes: ids(&p.nodes),
            cpus: p.cpus.clone(),
            memory_policy: p.memory_policy,
            memory_nodes: ids(&p.memory_nodes),
            reasons: self.reasons.clone(),
            sharing_group: self.sharing_group,
            file: None,
            supervisor: None,
        }
    }
}

impl Serialize for PlannedInstance {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.document().serialize(s)
    }
}

/// A plan alone, as its document with no host or file warnings (it knows neither):
/// `pinctl plan --json` writes [`Plan::document`] with the topology's and the file's.
impl Serialize for Plan {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.document(&[], &[]).serialize(s)
    }
}
