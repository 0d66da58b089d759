//! pinctl's placement planner: from a validated service file and a topology, where every
//! service instance runs (nodes, CPUs, memory policy and memory nodes) and why.
//!
//! [`plan`] is a pure function: same inputs, same plan, byte for byte. It must not read files,
//! look at the running machine or call the kernel; what it needs from the host (which devices a
//! `near` entry names, the NICs of the default route) comes in [`PlanInputs`], resolved by the
//! caller. The rules and the cost they define are in docs/planning.md.
#![forbid(unsafe_code)]

mod contrast;
mod cpus;
mod distance;
mod document;
mod explain;
mod interrupts;
pub mod problem;
mod search;
mod sharing;

use std::collections::{BTreeMap, BTreeSet};

use pinctl_config::Config;
use pinctl_topology::{NodeId, NodeSet, Topology};

pub use pinctl_topology::Placement;

pub use distance::{DistanceMeasure, DistanceReport};
pub use document::{
    NodeUseDocument, PLAN_SCHEMA_VERSION, PlacementDocument, PlanDocument, PlanSchemaVersion,
    SharingGroupDocument,
};
pub use interrupts::InterruptLanding;
pub use problem::{Cost, Load, Problem};

/// What the planner needs from the host besides the topology, resolved by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanInputs {
    /// Each `near` entry as written in the config -> the device names it resolves to (empty
    /// when it resolves to none; an entry missing from the map counts as empty).
    pub near: BTreeMap<String, Vec<String>>,
    /// `near` entries that resolve to nothing and that the caller has already reported (with
    /// their place in the file): placed without them, and not warned about a second time.
    pub reported_near: BTreeSet<String>,
    /// NICs of the default route: the keep-free default when the config sets none.
    pub default_keep_free: Vec<String>,
    /// Turn every soft-rule violation (memory over capacity, near missed, kept-free node used)
    /// into an error.
    pub strict: bool,
    /// Where running instances are today, by instance name: a re-plan (the supervisor's
    /// reload) keeps each one there when no rule ranked above moving says otherwise
    /// (docs/planning.md, field `moved`). Empty for a fresh plan.
    pub current: BTreeMap<String, Placement>,
}

/// Where every instance runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// One per instance, in config order.
    pub placements: Vec<PlannedInstance>,
    /// Nodes no instance uses.
    pub free_nodes: NodeSet,
    /// Kept-free nodes (keep-free entries) that the plan leaves empty.
    pub kept_free_nodes: NodeSet,
    /// Every kept-free node (used or not) and the keep-free entries that name it
    /// (`` `eth0` ``, `node 7`).
    pub kept_free_for: BTreeMap<u32, Vec<String>>,
    /// Soft-rule violations and other things the user should know, in a stable order.
    pub warnings: Vec<String>,
    /// The plan's cost (docs/planning.md).
    pub cost: Cost,
    /// Whether the search proved the plan optimal; `false` when it stopped at its step
    /// budget with the best plan found (very large configs).
    pub optimal: bool,
    /// What nodes were compared by (measured latency, HMAT, SLIT), and why.
    pub distances: DistanceReport,
    /// Every node hosting instances that do not own it, ascending: who is there, and how many
    /// CPUs of their CPU sets it carries.
    pub node_use: Vec<NodeUse>,
    /// The instances whose CPUs overlap, each group named once (an instance points at its
    /// group): a list of sharers in every instance would grow with the square of their count.
    /// In the order of their first member in the config.
    pub sharing_groups: Vec<SharingGroup>,
}

/// Instances whose CPU sets overlap, directly or through another member: the instances of
/// `share-nodes` on one node, or `cpus = N` instances given the same CPUs under
/// `cpu-overcommit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharingGroup {
    /// Its members, in config order (two or more).
    pub members: Vec<String>,
    /// The nodes they run on.
    pub nodes: NodeSet,
    /// Their CPUs, together.
    pub cpus: pinctl_topology::CpuSet,
}

/// A node that instances share (or may share): `cpus = N` instances, sharing instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeUse {
    pub node: NodeId,
    /// The instances on it, in config order.
    pub instances: Vec<String>,
    /// CPUs services may be given there.
    pub usable_cpus: u32,
    /// The sizes of the instances' CPU sets there, summed: a CPU in three sets counts three
    /// times.
    pub cpus_given: u32,
}

impl NodeUse {
    /// CPUs of instances per usable CPU, rounded to two decimals (`2`, `1.5`, `0.25`).
    pub fn cpus_per_cpu(&self) -> String {
        sharing::ratio(self.cpus_given, self.usable_cpus)
    }

    /// Whether an instance on the node shares CPUs with another (its sharing group runs there).
    pub fn overlaps(&self, groups: &[SharingGroup]) -> bool {
        groups.iter().any(|g| g.nodes.contains(self.node))
    }
}

impl Plan {
    /// The planned instance named `instance`.
    pub fn instance(&self, instance: &str) -> Option<&PlannedInstance> {
        self.placements.iter().find(|p| p.instance == instance)
    }

    /// The sharing group of the instance named `instance`, when its CPUs are not its own.
    pub fn sharing_group_of(&self, instance: &str) -> Option<&SharingGroup> {
        self.instance(instance)?.sharing_group.and_then(|g| self.sharing_groups.get(g))
    }
}

/// One instance of the plan: where it runs, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedInstance {
    /// `tikv-0`, or the service name for a single-instance service.
    pub instance: String,
    pub service: String,
    pub placement: Placement,
    /// Why these nodes and CPUs, one sentence each.
    pub reasons: Vec<String>,
    /// The index in [`Plan::sharing_groups`] of the instances whose CPUs overlap this one's
    /// (instances sharing a node, or CPUs given more than once under `cpu-overcommit`); `None`
    /// when its CPUs are its own.
    pub sharing_group: Option<usize>,
}

/// Why no plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// An instance cannot be placed: the reason names the resource that is short.
    #[error("{instance} {reason}")]
    Infeasible { instance: String, reason: String },
    /// A `bind` instance whose memory no set of nodes of its size can hold.
    #[error(
        "{instance} needs {memory} under `bind`, but {placement} can hold at most {available} \
         after the memory reserve: {suggestion}"
    )]
    BindTooSmall {
        instance: String,
        memory: String,
        placement: String,
        available: String,
        suggestion: String,
    },
    /// `--strict`, and the best plan breaks soft rules.
    #[error("--strict: the best plan breaks {} soft rule{}:\n  {}", .violations.len(), plural(.violations.len()), .violations.join("\n  "))]
    Strict { violations: Vec<String> },
    /// The search tried its whole budget without finding any plan (docs/planning.md); the
    /// deepest point it reached names the instance it could not place there.
    #[error(
        "no placement found within {steps} search steps; the furthest attempt could not place \
         {instance}: it {reason}"
    )]
    SearchLimit { steps: u64, instance: String, reason: String },
}

/// Computes the plan: the placement of lowest cost (docs/planning.md) that keeps every hard
/// rule, with a reason for each choice and a warning for each soft rule it breaks.
pub fn plan(topology: &Topology, config: &Config, inputs: &PlanInputs) -> Result<Plan, PlanError> {
    let problem = Problem::new(topology, config, inputs)?;
    let outcome = search::search(&problem)?;
    let mut plan = explain::build(&problem, outcome)?;
    contrast::explain_what_the_measure_changed(&problem, topology, config, inputs, &mut plan);
    Ok(plan)
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Bytes in the unit a person would write: `48GiB`, `62.7GiB`.
pub(crate) fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u32); 5] =
        [("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if bytes >= 1 << shift {
            let whole = bytes % (1 << shift) == 0;
            return if whole {
                format!("{}{unit}", bytes >> shift)
            } else {
                format!("{:.1}{unit}", bytes as f64 / (1u64 << shift) as f64)
            };
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_like_config_values() {
        assert_eq!(format_bytes(48 << 30), "48GiB");
        assert_eq!(format_bytes((64u64 << 30) - (64u64 << 30) / 50), "62.7GiB");
        assert_eq!(format_bytes(1000), "1000B");
    }
}
