//! The planning problem in index form, and the cost of a complete or partial assignment.
//!
//! [`Problem::evaluate`] computes the cost of an assignment from scratch, independently of the
//! search: the search uses it on every complete plan it keeps, and the brute-force tests use it
//! to rank every feasible assignment.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use pinctl_config::{Config, Instance, InstanceSize, KeepFree, Overcommit, Service, ShareNodes};
use pinctl_topology::{CpuId, CpuSet, MemoryPolicy, NodeId, NodeSet, Placement, Topology};

use crate::distance::{DistanceMeasure, DistanceReport, DistanceTable};
use crate::{PlanError, PlanInputs, format_bytes, plural};

/// A node as the planner sees it, by position in `Topology::nodes`.
#[derive(Debug, Clone)]
pub(crate) struct NodeInfo {
    pub(crate) id: NodeId,
    /// CPUs services may get (online, in the allowed cpuset, not in `reserve-cpus`), grouped
    /// by core (SMT siblings together), cores in order of their first CPU.
    pub(crate) cores: Vec<Vec<CpuId>>,
    pub(crate) cpu_count: u32,
    /// The last-level cache group of each core (`cpus::cache_groups`), and each group: the
    /// cache's level (`None` for CPUs without cache facts) and its usable CPUs.
    pub(crate) cache_group: Vec<usize>,
    pub(crate) caches: Vec<(Option<u8>, CpuSet)>,
    /// CPUs of `cpus = N` instances the node may carry: `cpu_count` times `cpu-overcommit`.
    pub(crate) slots: u32,
    /// Memory services may get under `bind`: MemTotal minus the reserve; `None` = unknown.
    pub(crate) memory: Option<u64>,
    pub(crate) package: Option<u32>,
    /// Whether any instance may run here (usable CPUs, memory allowed by the cpuset).
    pub(crate) placeable: bool,
    /// Why nothing may run here, for messages.
    pub(crate) excluded_because: Option<&'static str>,
}

impl NodeInfo {
    pub(crate) fn cpu_count(&self) -> u32 {
        self.cpu_count
    }

    /// The most instances one CPU may be given to: the overcommit ratio rounded up.
    pub(crate) fn max_uses(&self) -> u32 {
        self.slots.div_ceil(self.cpu_count.max(1)).max(1)
    }
}

/// How an instance occupies nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `share-nodes`: one node, whose CPUs it shares with the other sharing instances there
    /// (all but those `cpus = N` instances hold), counting `weight` CPUs when spreading; with
    /// `alone_first` (`when-needed`) it prefers a node of its own.
    Sharing { weight: u32, alone_first: bool },
    /// `nodes = N`: exactly N nodes, owned.
    Whole(u32),
    /// `cpus = N` larger than any candidate node: the fewest nodes holding N CPUs, owned.
    Spanning(u32),
    /// `cpus = N` that fits one node: N CPUs of one node, which other `cpus` instances may share.
    Shared(u32),
}

impl Shape {
    pub(crate) fn owns_nodes(self) -> bool {
        matches!(self, Shape::Whole(_) | Shape::Spanning(_))
    }

    /// What a placement on one node adds to its load (CPUs of `cpus = N`, weight of sharing).
    pub(crate) fn load(self) -> u32 {
        match self {
            Shape::Shared(c) => c,
            Shape::Sharing { weight, .. } => weight,
            Shape::Whole(_) | Shape::Spanning(_) => 0,
        }
    }

    /// Whether it prefers a node of its own (`share-nodes = "when-needed"`).
    pub(crate) fn alone_first(self) -> bool {
        matches!(self, Shape::Sharing { alone_first: true, .. })
    }
}

/// One `near` entry of an instance, resolved to nodes.
#[derive(Debug, Clone)]
pub(crate) struct NearTarget {
    /// As written in the config.
    pub(crate) spec: String,
    pub(crate) devices: Vec<String>,
    /// Node indices of the devices; empty when unknown (then the entry does not steer).
    pub(crate) nodes: Vec<usize>,
}

/// One instance as the planner sees it.
#[derive(Debug, Clone)]
pub(crate) struct InstanceInfo {
    pub(crate) name: String,
    pub(crate) service: String,
    pub(crate) shape: Shape,
    /// Expected resident memory, 0 when not given.
    pub(crate) memory: u64,
    pub(crate) policy: MemoryPolicy,
    /// Node indices this instance may use (only-nodes, placeable).
    pub(crate) candidates: Vec<usize>,
    pub(crate) is_candidate: Vec<bool>,
    pub(crate) near: Vec<NearTarget>,
    /// Instances with the same class are interchangeable (same service, same near nodes).
    pub(crate) class: usize,
    /// Memory-only nodes the service named in `only-nodes`: added to its memory nodes.
    pub(crate) memory_only_nodes: NodeSet,
    /// Where it runs today, in a re-plan.
    pub(crate) current: Option<Running>,
}

/// Where an instance runs today: its nodes as indexes (ascending) and as given.
#[derive(Debug, Clone)]
pub(crate) struct Running {
    /// Empty when a node is not in the topology: no option equals it, so the instance moves.
    pub(crate) set: Vec<usize>,
    pub(crate) at: Placement,
}

impl InstanceInfo {
    pub(crate) fn binds(&self) -> bool {
        !self.policy.may_spill() && self.memory > 0
    }
}

/// The whole problem: nodes, distances, instances, kept-free nodes.
#[derive(Debug, Clone)]
pub struct Problem {
    pub(crate) nodes: Vec<NodeInfo>,
    /// How far each node is from each other, by position (crate::distance says in what).
    pub(crate) distance: Vec<Vec<u32>>,
    pub(crate) instances: Vec<InstanceInfo>,
    /// Per node index: the keep-free entries (NIC names or `node N`) that name it.
    pub(crate) kept_free: Vec<Vec<String>>,
    pub(crate) warnings: Vec<String>,
    pub(crate) strict: bool,
    /// Which measure `distance` holds, and why not a better one.
    pub(crate) distances: DistanceReport,
    /// `cpu-overcommit` of the file (1 when it says none).
    pub(crate) overcommit: Overcommit,
}

/// The cost of a plan: compared field by field, in declaration order, lower is better
/// (docs/planning.md explains each term and the rule it comes from).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cost {
    /// Rule 1: bytes of expected memory beyond the capacity of the nodes they are on (only
    /// policies that may spill can exceed; `bind` never does).
    pub memory_overflow: u64,
    /// Rule 1, one instance per node where the host has room: instances of `share-nodes =
    /// "when-needed"` without a node of their own. On each node, those beyond its first
    /// instance: `min(when-needed instances there, instances there - 1)`, so that instances
    /// that must share spread over as many nodes as they can (8 over 2 nodes cost 6 whether
    /// 4 + 4 or 7 + 1, and spread decides).
    pub shared_instances: u64,
    /// Rule 2: `near` entries (per instance) whose device node the instance is not on.
    pub near_misses: u64,
    /// Rule 2: for each missed entry, the distance from the instance's nodes to the device's.
    pub near_distance: u64,
    /// Rule 3: kept-free nodes that host an instance.
    pub kept_free_used: u64,
    /// Rule 3: CPUs of kept-free nodes given to instances (all of an owned node's), so that a
    /// kept-free node that must be used is left as much room as possible for the network
    /// stack: a small shared instance goes there before a whole-node one.
    pub kept_free_cpus: u64,
    /// Rule 4: nodes used, summed over instances.
    pub node_count: u64,
    /// Rule 4: pairs of an instance's nodes in different packages, summed over instances.
    pub cross_package_pairs: u64,
    /// Rule 4: SLIT distances between an instance's nodes (each pair once), summed.
    pub node_distance: u64,
    /// Rule 5 (sticky): instances running today (`PlanInputs::current`) whose nodes change.
    pub moved: u64,
    /// Rule 6: node loads (CPUs used / usable; owned nodes full), highest first.
    pub spread: Vec<Load>,
    /// Rule 7: each instance's node ids, ascending, in config order.
    pub tie_break: Vec<Vec<NodeId>>,
}

/// The load of a node as an exact fraction.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub used: u32,
    pub capacity: u32,
}

impl Ord for Load {
    fn cmp(&self, other: &Self) -> Ordering {
        let a = u64::from(self.used) * u64::from(other.capacity.max(1));
        let b = u64::from(other.used) * u64::from(self.capacity.max(1));
        a.cmp(&b)
    }
}

impl PartialOrd for Load {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Load {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Load {}

/// The numeric terms of a cost (everything before `spread`), as one comparable array, indexed
/// by the positions in [`term`].
pub(crate) type Terms = [u64; term::COUNT];

/// Where each numeric field of [`Cost`] sits in [`Terms`] (comparison order).
pub(crate) mod term {
    pub(crate) const MEMORY_OVERFLOW: usize = 0;
    pub(crate) const SHARED_INSTANCES: usize = 1;
    pub(crate) const NEAR_MISSES: usize = 2;
    pub(crate) const NEAR_DISTANCE: usize = 3;
    pub(crate) const KEPT_FREE_USED: usize = 4;
    pub(crate) const KEPT_FREE_CPUS: usize = 5;
    pub(crate) const NODE_COUNT: usize = 6;
    pub(crate) const CROSS_PACKAGE_PAIRS: usize = 7;
    pub(crate) const NODE_DISTANCE: usize = 8;
    pub(crate) const MOVED: usize = 9;
    pub(crate) const COUNT: usize = 10;
}

impl Cost {
    pub(crate) fn terms(&self) -> Terms {
        let mut t = [0; term::COUNT];
        t[term::MEMORY_OVERFLOW] = self.memory_overflow;
        t[term::NEAR_MISSES] = self.near_misses;
        t[term::NEAR_DISTANCE] = self.near_distance;
        t[term::KEPT_FREE_USED] = self.kept_free_used;
        t[term::KEPT_FREE_CPUS] = self.kept_free_cpus;
        t[term::SHARED_INSTANCES] = self.shared_instances;
        t[term::NODE_COUNT] = self.node_count;
        t[term::CROSS_PACKAGE_PAIRS] = self.cross_package_pairs;
        t[term::NODE_DISTANCE] = self.node_distance;
        t[term::MOVED] = self.moved;
        t
    }
}

/// What a plan, whole or partial, puts on each node (by position): the search keeps one as
/// it descends, [`Problem::evaluate`] builds one for a whole assignment.
pub(crate) struct NodeTally {
    /// Instances on each node.
    pub(crate) occupied: Vec<u32>,
    pub(crate) owner: Vec<bool>,
    /// CPUs of `cpus = N` instances on each node.
    pub(crate) used: Vec<u32>,
    /// CPUs and weights of the instances on each node that do not own it (spread).
    pub(crate) load: Vec<u32>,
    /// Sharing instances on each node, how many of them prefer a node of their own, and the
    /// memory they expect there.
    pub(crate) sharers: Vec<u32>,
    pub(crate) alone_first: Vec<u32>,
    pub(crate) sharing_memory: Vec<u64>,
    pub(crate) bind_memory: Vec<u64>,
    pub(crate) total_memory: Vec<u64>,
}

impl NodeTally {
    /// `n` nodes with nothing on them.
    pub(crate) fn new(n: usize) -> NodeTally {
        NodeTally {
            occupied: vec![0; n],
            owner: vec![false; n],
            used: vec![0; n],
            load: vec![0; n],
            sharers: vec![0; n],
            alone_first: vec![0; n],
            sharing_memory: vec![0; n],
            bind_memory: vec![0; n],
            total_memory: vec![0; n],
        }
    }
}

pub(crate) fn add_terms(a: &Terms, b: &Terms) -> Terms {
    let mut out = *a;
    for (o, v) in out.iter_mut().zip(b) {
        *o += v;
    }
    out
}

/// Every node of the topology with the CPUs and memory services may get on it.
fn node_infos(topology: &Topology, config: &Config) -> Vec<NodeInfo> {
    let online = topology.online_cpus();
    let reserve = &config.host.reserve_cpus;
    let overcommit = config.host.cpu_overcommit.unwrap_or(Overcommit::NONE);
    topology
        .nodes
        .iter()
        .map(|n| {
            let mut usable = n.cpus.intersection(&online).difference(reserve);
            if let Some(allowed) = &topology.host.allowed_cpus {
                usable = usable.intersection(allowed);
            }
            let memory_allowed =
                topology.host.allowed_nodes.as_ref().is_none_or(|a| a.contains(n.id));
            let memory = n.memory_bytes.map(|total| {
                let reserve = config.host.memory_reserve.unwrap_or(total / 50);
                total.saturating_sub(reserve)
            });
            let excluded_because = if !n.has_cpu || n.cpus.is_empty() {
                Some("memory-only")
            } else if usable.is_empty() {
                Some("no usable CPUs (reserve-cpus or cpuset)")
            } else if !memory_allowed {
                Some("memory outside the cpuset")
            } else {
                None
            };
            let cores = crate::cpus::cores(topology, &usable);
            let cache_group = crate::cpus::cache_groups(topology, &cores);
            let mut caches: Vec<(Option<u8>, CpuSet)> = Vec::new();
            for (core, &g) in cores.iter().zip(&cache_group) {
                if g == caches.len() {
                    let level = topology.cache_of(core[0]).map(|c| topology.caches[c].level);
                    caches.push((level, CpuSet::new()));
                }
                caches[g].1.extend(core.iter().copied());
            }
            let cpu_count = usable.len() as u32;
            NodeInfo {
                id: n.id,
                cores,
                cpu_count,
                cache_group,
                caches,
                slots: overcommit.slots(cpu_count),
                memory,
                package: topology.package_of_node(n.id),
                placeable: excluded_because.is_none(),
                excluded_because,
            }
        })
        .collect()
}

/// Per node index, the `keep-free` entries (or the default NICs) that name it; entries that
/// name nothing in this topology become warnings.
fn kept_free_nodes(
    topology: &Topology,
    config: &Config,
    inputs: &PlanInputs,
    warnings: &mut Vec<String>,
) -> Vec<Vec<String>> {
    let index_of = |id: NodeId| topology.node_index(id);
    let mut kept_free: Vec<Vec<String>> = vec![Vec::new(); topology.nodes.len()];
    let entries: Vec<KeepFree> = match &config.host.keep_free {
        Some(list) => list.clone(),
        None => inputs.default_keep_free.iter().cloned().map(KeepFree::Nic).collect(),
    };
    for entry in &entries {
        match entry {
            KeepFree::Node(id) => match index_of(*id) {
                Some(i) => kept_free[i].push(format!("node {id}")),
                None => warnings.push(format!(
                    "keep-free names node {id}, which this topology does not have: ignored"
                )),
            },
            KeepFree::Nic(name) => match topology.device(name) {
                Some(d) if !d.nodes.is_empty() => {
                    for id in d.nodes.iter() {
                        if let Some(i) = index_of(id) {
                            kept_free[i].push(format!("`{name}`"));
                        }
                    }
                }
                Some(_) => warnings.push(format!(
                    "keep-free names `{name}`, whose node is unknown: no node is kept free for it"
                )),
                None => warnings.push(format!(
                    "keep-free names `{name}`, which this topology does not have: ignored"
                )),
            },
        }
    }
    // Keeping every node free keeps none: on a one-node host the default route's NIC is on
    // the only node. Said once, and not a broken rule (`--strict` passes): nothing the plan
    // could do would keep it.
    if !kept_free.is_empty() && kept_free.iter().all(|k| !k.is_empty()) {
        let mut names: Vec<&str> = kept_free.iter().flatten().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        let (is, every) = match (names.len(), topology.nodes.len()) {
            (1, 1) => ("is on", "the only node"),
            (_, 1) => ("are on", "the only node"),
            (1, _) => ("covers", "every node"),
            _ => ("cover", "every node"),
        };
        warnings.push(format!(
            "keep-free: {} {is} {every}: no node can be kept free, so none is (set \
             `keep-free = []` to say so)",
            names.join(", ")
        ));
        kept_free.iter_mut().for_each(Vec::clear);
    }
    kept_free
}

/// Every instance of every service, in config order, with its shape, candidate nodes, near
/// targets and class. Fails for an instance no node can take or whose `bind` cannot fit.
fn instance_infos(
    topology: &Topology,
    config: &Config,
    inputs: &PlanInputs,
    nodes: &[NodeInfo],
    warnings: &mut Vec<String>,
) -> Result<Vec<InstanceInfo>, PlanError> {
    let mut instances = Vec::new();
    // Instances of one service with the same `near` nodes are interchangeable, unless they run
    // somewhere today: moving one is not the same as moving another.
    type ClassKey = (usize, Vec<Vec<usize>>, Option<Vec<usize>>);
    let mut classes: BTreeMap<ClassKey, usize> = BTreeMap::new();
    for (service_index, service) in config.services.iter().enumerate() {
        let (candidates, memory_only_nodes) = service_candidates(nodes, service);
        let max_node_cpus = candidates.iter().map(|&i| nodes[i].cpu_count()).max().unwrap_or(0);
        let shape = match service.size {
            InstanceSize::Nodes(1) if service.share_nodes.shares() => Shape::Sharing {
                weight: service.share_weight,
                alone_first: service.share_nodes == ShareNodes::WhenNeeded,
            },
            InstanceSize::Nodes(k) => Shape::Whole(k),
            InstanceSize::Cpus(c) if c <= max_node_cpus => Shape::Shared(c),
            InstanceSize::Cpus(c) => Shape::Spanning(c),
        };
        let mut is_candidate = vec![false; nodes.len()];
        for &i in &candidates {
            is_candidate[i] = true;
        }
        for instance in &service.instances {
            if candidates.is_empty() {
                return Err(PlanError::Infeasible {
                    instance: instance.name.clone(),
                    reason: no_candidate_reason(nodes, service.only_nodes.as_ref()),
                });
            }
            let near = near_targets(topology, inputs, instance, warnings)?;
            let current = inputs.current.get(&instance.name).map(|at| {
                let set: Option<Vec<usize>> =
                    at.nodes.iter().map(|id| topology.node_index(id)).collect();
                Running { set: set.unwrap_or_default(), at: at.clone() }
            });
            let key = (
                service_index,
                near.iter().map(|t| t.nodes.clone()).collect(),
                current.as_ref().map(|r| r.set.clone()),
            );
            let next = classes.len();
            let class = *classes.entry(key).or_insert(next);
            let info = InstanceInfo {
                name: instance.name.clone(),
                service: service.name.clone(),
                shape,
                memory: service.memory.unwrap_or(0),
                policy: service.memory_policy,
                candidates: candidates.clone(),
                is_candidate: is_candidate.clone(),
                near,
                class,
                memory_only_nodes: memory_only_nodes.clone(),
                current,
            };
            check_bind_capacity(nodes, &info)?;
            instances.push(info);
        }
    }
    Ok(instances)
}

/// The node indexes a service's instances may use, and the memory-only nodes its
/// `only-nodes` names (added to its memory nodes).
fn service_candidates(nodes: &[NodeInfo], service: &Service) -> (Vec<usize>, NodeSet) {
    let mut candidates = Vec::new();
    let mut memory_only_nodes = NodeSet::new();
    for (i, node) in nodes.iter().enumerate() {
        let listed = service.only_nodes.as_ref().is_none_or(|o| o.contains(node.id));
        if listed && node.placeable {
            candidates.push(i);
        }
        if node.excluded_because == Some("memory-only")
            && service.only_nodes.as_ref().is_some_and(|o| o.contains(node.id))
        {
            memory_only_nodes.insert(node.id);
        }
    }
    (candidates, memory_only_nodes)
}

/// An instance's `near` entries resolved to node indexes; an entry that resolves to no
/// device, or to devices of unknown node, is a warning and does not steer. A device on a node
/// the topology lacks is a warning too, and an error under `--strict`.
fn near_targets(
    topology: &Topology,
    inputs: &PlanInputs,
    instance: &Instance,
    warnings: &mut Vec<String>,
) -> Result<Vec<NearTarget>, PlanError> {
    let name = &instance.name;
    let mut near = Vec::new();
    for spec in &instance.near {
        let devices = inputs.near.get(spec).cloned().unwrap_or_default();
        let mut target = NodeSet::new();
        let mut unknown = Vec::new();
        for d in &devices {
            match topology.device(d) {
                Some(dev) if !dev.nodes.is_empty() => target = target.union(&dev.nodes),
                _ => unknown.push(d.as_str()),
            }
        }
        if devices.is_empty() && !inputs.reported_near.contains(spec) {
            let message = format!("{name}: near `{spec}` resolves to no device: placed without it");
            if inputs.strict {
                return Err(PlanError::Strict { violations: vec![message] });
            }
            warnings.push(message);
        } else if target.is_empty() && !devices.is_empty() {
            warnings.push(format!(
                "{name}: near `{spec}`: the node of {} is unknown: placed without it",
                quoted_list(&unknown)
            ));
        }
        let nodes_idx: Vec<usize> =
            target.iter().filter_map(|id| topology.node_index(id)).collect();
        if nodes_idx.is_empty() && !target.is_empty() {
            // The device says a node this topology does not list (offline, or an inconsistent
            // source): never silently ignored, refused under --strict.
            let message = format!(
                "{name}: near `{spec}` is on node {target}, which this topology does not list: \
                 placed without it"
            );
            if inputs.strict {
                return Err(PlanError::Strict { violations: vec![message] });
            }
            warnings.push(message);
        }
        near.push(NearTarget { spec: spec.clone(), devices, nodes: nodes_idx });
    }
    Ok(near)
}

impl Problem {
    /// Prepares the problem: usable CPUs and memory of every node, each instance's shape,
    /// candidate nodes and near targets, the kept-free nodes. Fails on what no search can fix
    /// (a `bind` that no set of nodes of its size can hold, an instance with no candidate node).
    pub fn new(
        topology: &Topology,
        config: &Config,
        inputs: &PlanInputs,
    ) -> Result<Problem, PlanError> {
        Problem::with_measure(topology, config, inputs, None)
    }

    /// [`Problem::new`] comparing nodes by `only` (when the topology has it) instead of the
    /// best measure it carries.
    pub fn with_measure(
        topology: &Topology,
        config: &Config,
        inputs: &PlanInputs,
        only: Option<DistanceMeasure>,
    ) -> Result<Problem, PlanError> {
        let mut warnings = Vec::new();
        let nodes = node_infos(topology, config);
        // The nodes the planner compares: where instances may run, and where devices are.
        let mut needed: Vec<bool> = nodes.iter().map(|n| n.placeable).collect();
        for id in topology.devices.iter().flat_map(|d| d.nodes.iter()) {
            if let Some(i) = topology.node_index(id) {
                needed[i] = true;
            }
        }
        let table = DistanceTable::new(topology, &needed, only);
        let distance = table.matrix;
        let kept_free = kept_free_nodes(topology, config, inputs, &mut warnings);
        let instances = instance_infos(topology, config, inputs, &nodes, &mut warnings)?;
        let overcommit = config.host.cpu_overcommit.unwrap_or(Overcommit::NONE);
        Ok(Problem {
            nodes,
            distance,
            instances,
            kept_free,
            warnings,
            strict: inputs.strict,
            distances: table.report,
            overcommit,
        })
    }

    /// Which measure the problem compares nodes by.
    pub fn distances(&self) -> &DistanceReport {
        &self.distances
    }

    /// Whether two nodes' packages count as a distance of their own: only while the distances
    /// are firmware numbers; measured nanoseconds already include crossing a socket.
    pub(crate) fn crosses_packages(&self, a: usize, b: usize) -> bool {
        let (pa, pb) = (self.nodes[a].package, self.nodes[b].package);
        !self.distances.measure.is_latency() && pa.is_some() && pb.is_some() && pa != pb
    }

    /// Number of instances, in config order.
    pub fn instance_count(&self) -> usize {
        self.instances.len()
    }

    /// Number of nodes (positions in `Topology::nodes`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Name of instance `i` (config order).
    pub fn instance_name(&self, i: usize) -> &str {
        &self.instances[i].name
    }

    /// The cost of an assignment of node-index sets to instances (config order; `None` =
    /// not placed yet, contributing nothing), or `None` when it breaks a hard rule: a shape
    /// that does not match the instance's size, a node outside its candidates, a node owned
    /// twice or shared with an owner, CPUs or `bind` memory over a node's capacity.
    pub fn evaluate(&self, assignment: &[Option<Vec<usize>>]) -> Option<Cost> {
        let mut tally = NodeTally::new(self.nodes.len());
        // Placing nothing costs nothing.
        let mut cost = Cost::default();
        for (inst, set) in self.instances.iter().zip(assignment) {
            let Some(set) = set else {
                cost.tie_break.push(Vec::new());
                continue;
            };
            if !self.valid_shape(inst, set) {
                return None;
            }
            match inst.shape {
                Shape::Whole(_) | Shape::Spanning(_) => {
                    cost.memory_overflow += self.own(&mut tally, inst, set)?;
                }
                Shape::Shared(_) | Shape::Sharing { .. } => self.share(&mut tally, inst, set[0])?,
            }
            let terms = self.placement_terms(inst, set);
            cost.near_misses += terms[term::NEAR_MISSES];
            cost.near_distance += terms[term::NEAR_DISTANCE];
            cost.node_count += terms[term::NODE_COUNT];
            cost.cross_package_pairs += terms[term::CROSS_PACKAGE_PAIRS];
            cost.node_distance += terms[term::NODE_DISTANCE];
            cost.moved += terms[term::MOVED];
            cost.tie_break.push(set.iter().map(|&j| self.nodes[j].id).collect());
        }
        self.node_terms(&tally, &mut cost)?;
        cost.spread = self.spread(&tally.owner, &tally.load, &tally.sharing_memory);
        Some(cost)
    }

    /// Gives the nodes of `set` to an instance that owns them; returns the bytes of its
    /// memory beyond theirs, or `None` when a node is taken or `bind` memory does not fit.
    fn own(&self, tally: &mut NodeTally, inst: &InstanceInfo, set: &[usize]) -> Option<u64> {
        for &j in set {
            if tally.owner[j] || tally.occupied[j] > 0 {
                return None;
            }
            tally.owner[j] = true;
            tally.occupied[j] += 1;
        }
        match self.memory_of(set) {
            Some(capacity) if inst.memory > capacity => {
                (!inst.binds()).then_some(inst.memory - capacity)
            }
            _ => Some(0),
        }
    }

    /// Puts a sharing or `cpus = N` instance on node `j`, or `None` when an owner holds it or
    /// its `bind` memory no longer fits.
    fn share(&self, tally: &mut NodeTally, inst: &InstanceInfo, j: usize) -> Option<()> {
        if tally.owner[j] {
            return None;
        }
        tally.occupied[j] += 1;
        tally.load[j] += inst.shape.load();
        match inst.shape {
            Shape::Shared(c) => tally.used[j] += c,
            _ => {
                tally.sharers[j] += 1;
                tally.alone_first[j] += u32::from(inst.shape.alone_first());
                tally.sharing_memory[j] += inst.memory;
            }
        }
        tally.total_memory[j] += inst.memory;
        if inst.binds() {
            tally.bind_memory[j] += inst.memory;
            if self.nodes[j].memory.is_some_and(|m| tally.bind_memory[j] > m) {
                return None;
            }
        }
        Some(())
    }

    /// Adds each node's terms (memory past it, a kept-free node used, instances sharing beyond
    /// the first) to `cost`, or `None` when a node carries more CPUs than its limit.
    fn node_terms(&self, tally: &NodeTally, cost: &mut Cost) -> Option<()> {
        for j in 0..self.nodes.len() {
            if tally.used[j] > self.cpu_limit(j, tally.sharers[j]) {
                return None;
            }
            if let Some(m) = self.nodes[j].memory {
                cost.memory_overflow += tally.total_memory[j].saturating_sub(m);
            }
            if tally.occupied[j] > 0 && !self.kept_free[j].is_empty() {
                cost.kept_free_used += 1;
                let whole = tally.owner[j] || tally.sharers[j] > 0;
                cost.kept_free_cpus +=
                    u64::from(if whole { self.nodes[j].cpu_count() } else { tally.used[j] });
            }
            cost.shared_instances +=
                shared_beyond_first(u64::from(tally.alone_first[j]), tally.occupied[j]);
        }
        Some(())
    }

    /// Node loads, highest first, over placeable nodes: an owned node is full, another one
    /// carries the CPUs of its `cpus = N` instances and the weights of its sharing ones, or,
    /// when larger, the share of its memory its sharing instances expect (`sharing_memory`).
    pub(crate) fn spread(&self, owner: &[bool], load: &[u32], sharing_memory: &[u64]) -> Vec<Load> {
        let mut loads: Vec<Load> = (0..self.nodes.len())
            .filter(|&j| self.nodes[j].placeable)
            .map(|j| {
                let capacity = self.nodes[j].cpu_count();
                if owner[j] {
                    return Load { used: capacity, capacity };
                }
                let cpus = Load { used: load[j], capacity };
                match self.nodes[j].memory {
                    Some(m) if sharing_memory[j] > 0 => cpus.max(memory_load(sharing_memory[j], m)),
                    _ => cpus,
                }
            })
            .collect();
        loads.sort_by(|a, b| b.cmp(a));
        loads
    }

    /// The most CPUs `cpus = N` instances may take on node `j` when `sharers` sharing instances
    /// are there too: its CPU slots (`cpu-overcommit`), or, beside sharing instances, all its
    /// CPUs but one, each given once (the sharing instances get the rest).
    pub(crate) fn cpu_limit(&self, j: usize, sharers: u32) -> u32 {
        let node = &self.nodes[j];
        if sharers > 0 { node.cpu_count().saturating_sub(1) } else { node.slots }
    }

    /// Whether `set` (ascending node indices) has the shape the instance's size asks for.
    pub(crate) fn valid_shape(&self, inst: &InstanceInfo, set: &[usize]) -> bool {
        if set.is_empty()
            || !set.windows(2).all(|w| w[0] < w[1])
            || !set.iter().all(|&j| j < self.nodes.len() && inst.is_candidate[j])
        {
            return false;
        }
        match inst.shape {
            Shape::Whole(k) => set.len() == k as usize,
            Shape::Shared(c) => set.len() == 1 && self.nodes[set[0]].cpu_count() >= c,
            Shape::Sharing { .. } => set.len() == 1,
            Shape::Spanning(c) => {
                let cpus: Vec<u32> = set.iter().map(|&j| self.nodes[j].cpu_count()).collect();
                let sum: u32 = cpus.iter().sum();
                let smallest = cpus.iter().copied().min().unwrap_or(0);
                // Minimal: dropping its smallest node would leave too few CPUs.
                sum >= c && sum - smallest < c
            }
        }
    }

    /// Memory `bind` may use on these nodes; `None` when any of them has unknown memory.
    pub(crate) fn memory_of(&self, set: &[usize]) -> Option<u64> {
        set.iter().map(|&j| self.nodes[j].memory).sum()
    }

    /// The terms one placement adds on its own (near, node count, closeness, moved); memory
    /// and kept-free terms depend on the other placements and are left at 0.
    pub(crate) fn placement_terms(&self, inst: &InstanceInfo, set: &[usize]) -> Terms {
        let mut t = [0u64; term::COUNT];
        for target in inst.near.iter().filter(|t| !t.nodes.is_empty()) {
            if !set.iter().any(|j| target.nodes.contains(j)) {
                t[term::NEAR_MISSES] += 1;
                t[term::NEAR_DISTANCE] += u64::from(self.near_distance(set, &target.nodes));
            }
        }
        t[term::NODE_COUNT] = set.len() as u64;
        t[term::MOVED] = u64::from(inst.current.as_ref().is_some_and(|r| r.set != set));
        for (a, &x) in set.iter().enumerate() {
            for &y in &set[a + 1..] {
                if self.crosses_packages(x, y) {
                    t[term::CROSS_PACKAGE_PAIRS] += 1;
                }
                t[term::NODE_DISTANCE] += u64::from(self.distance[x][y]);
            }
        }
        t
    }

    /// The smallest distance from any node of `set` to any node of `targets`.
    pub(crate) fn near_distance(&self, set: &[usize], targets: &[usize]) -> u32 {
        set.iter()
            .flat_map(|&j| targets.iter().map(move |&t| (j, t)))
            .map(|(j, t)| self.distance[j][t])
            .min()
            .unwrap_or(0)
    }
}

/// The share of a node's `capacity` bytes that `expected` bytes take, in MiB (expected rounded
/// up, capacity down) so that it compares exactly with CPU loads.
pub(crate) fn memory_load(expected: u64, capacity: u64) -> Load {
    let mib = |b: u64| u32::try_from(b >> 20).unwrap_or(u32::MAX);
    Load { used: mib(expected.saturating_add((1 << 20) - 1)), capacity: mib(capacity).max(1) }
}

/// When-needed instances without a node of their own on a node of `occupants` instances, of
/// which `alone_first` prefer one: those beyond its first instance.
pub(crate) fn shared_beyond_first(alone_first: u64, occupants: u32) -> u64 {
    alone_first.min(u64::from(occupants.saturating_sub(1)))
}

fn quoted_list(items: &[&str]) -> String {
    items.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
}

fn no_candidate_reason(nodes: &[NodeInfo], only: Option<&NodeSet>) -> String {
    let mut parts = Vec::new();
    let listed: Vec<&NodeInfo> =
        nodes.iter().filter(|n| only.is_none_or(|o| o.contains(n.id))).collect();
    if let Some(only) = only {
        parts.push(format!(
            "only-nodes {only} names {} node{}",
            listed.len(),
            plural(listed.len())
        ));
    }
    let mut by_reason: BTreeMap<&str, NodeSet> = BTreeMap::new();
    for n in &listed {
        if let Some(why) = n.excluded_because {
            by_reason.entry(why).or_default().insert(n.id);
        }
    }
    for (why, set) in by_reason {
        parts.push(format!("node{} {set}: {why}", plural(set.len())));
    }
    if parts.is_empty() {
        parts.push("the topology has no nodes".to_string());
    }
    format!("has no node to run on ({})", parts.join("; "))
}

/// A `bind` instance whose memory no set of nodes of its size can hold: no search helps.
fn check_bind_capacity(nodes: &[NodeInfo], inst: &InstanceInfo) -> Result<(), PlanError> {
    if !inst.binds() {
        return Ok(());
    }
    let mut memories: Vec<u64> = Vec::new();
    for &j in &inst.candidates {
        match nodes[j].memory {
            Some(m) => memories.push(m),
            None => return Ok(()),
        }
    }
    memories.sort_unstable_by(|a, b| b.cmp(a));
    let count = match inst.shape {
        Shape::Whole(k) => k as usize,
        Shape::Shared(_) | Shape::Sharing { .. } => 1,
        // The fewest nodes a spanning instance takes; more nodes only if the planner must.
        Shape::Spanning(_) => memories.len(),
    };
    let best: u64 = memories.iter().take(count).sum();
    if inst.memory <= best {
        return Ok(());
    }
    let mut needed = 0;
    let mut acc = 0u64;
    for m in &memories {
        needed += 1;
        acc += m;
        if acc >= inst.memory {
            break;
        }
    }
    let more =
        if acc >= inst.memory && matches!(inst.shape, Shape::Whole(_) | Shape::Sharing { .. }) {
            format!(" or `nodes = {needed}`")
        } else {
            String::new()
        };
    let what = match inst.shape {
        Shape::Whole(k) => format!("{k} node{}", plural(k as usize)),
        Shape::Shared(c) => format!("the node of its {c} CPUs"),
        Shape::Sharing { .. } => "1 node".to_string(),
        Shape::Spanning(_) => "its nodes".to_string(),
    };
    Err(PlanError::BindTooSmall {
        instance: inst.name.clone(),
        memory: format_bytes(inst.memory),
        placement: what,
        available: format_bytes(best),
        suggestion: format!("use `memory-policy = \"preferred\"`{more}"),
    })
}
