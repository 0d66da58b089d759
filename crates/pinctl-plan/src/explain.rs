//! Turns the search's node assignment into placements: CPUs (whole cores first), memory nodes,
//! a reason for each choice, a warning for each soft rule broken, and `--strict`.

use pinctl_topology::{CpuSet, MemoryPolicy, NodeSet, Placement};

use crate::cpus::NodeCpus;
use crate::distance::DistanceMeasure;
use crate::problem::{InstanceInfo, Problem, Shape};
use crate::search::Outcome;
use crate::{Plan, PlanError, PlannedInstance, format_bytes, plural};

pub(crate) fn build(p: &Problem, outcome: Outcome) -> Result<Plan, PlanError> {
    let mut b = Builder::new(p, &outcome.assignment);
    // Sharing instances get what the others leave of their node: they come last.
    let sharing = |i: &usize| matches!(p.instances[*i].shape, Shape::Sharing { .. });
    let (last, first): (Vec<usize>, Vec<usize>) = (0..p.instances.len()).partition(sharing);
    let mut placed: Vec<(usize, PlannedInstance)> =
        first.into_iter().chain(last).map(|i| (i, b.placement(i))).collect();
    placed.sort_by_key(|(i, _)| *i);
    let mut placements: Vec<PlannedInstance> = placed.into_iter().map(|(_, pl)| pl).collect();
    let sharing_groups = crate::sharing::sharing_groups(&mut placements);
    b.shared_memory_violations();
    let Builder { mut warnings, violations, .. } = b;

    if p.strict && !violations.is_empty() {
        return Err(PlanError::Strict { violations });
    }
    if !outcome.exhaustive {
        warnings.push(format!(
            "the search stopped at its step budget: this is the best plan found, not one proven \
             optimal (cost {:?})",
            outcome.cost.terms()
        ));
    }
    let mut all_warnings = violations;
    all_warnings.append(&mut warnings);

    let n = p.nodes.len();
    let used: NodeSet =
        placements.iter().fold(NodeSet::new(), |acc, pl| acc.union(&pl.placement.nodes));
    let all: NodeSet = p.nodes.iter().map(|node| node.id).collect();
    let kept: NodeSet =
        (0..n).filter(|&j| !p.kept_free[j].is_empty()).map(|j| p.nodes[j].id).collect();
    let free_nodes = all.difference(&used);
    let kept_free_for = (0..n)
        .filter(|&j| !p.kept_free[j].is_empty())
        .map(|j| (p.nodes[j].id, p.kept_free[j].clone()))
        .collect();
    let node_use = crate::sharing::node_use(p, &outcome.assignment, &placements);
    Ok(Plan {
        kept_free_nodes: kept.intersection(&free_nodes),
        kept_free_for,
        free_nodes,
        placements,
        warnings: all_warnings,
        cost: outcome.cost,
        optimal: outcome.exhaustive,
        distances: p.distances.clone(),
        node_use,
        sharing_groups,
    })
}

/// What turning an assignment into placements keeps between instances: the CPUs still free
/// on each node (instances sharing a node take them in turn), and the warnings so far.
struct Builder<'a> {
    p: &'a Problem,
    /// The nodes (indexes into `p.nodes`) of each instance.
    assignment: &'a [Vec<usize>],
    /// The instances on each node, ascending.
    occupants: Vec<Vec<usize>>,
    /// The CPUs `cpus = N` instances ask of each node, summed.
    packed: Vec<u32>,
    node_cpus: Vec<NodeCpus>,
    /// The CPUs `cpus = N` instances took on each node (sharing instances get the rest).
    held: Vec<CpuSet>,
    /// The CPUs each instance keeps from where it runs today (claimed before anyone takes
    /// CPUs, so a neighbour's change does not shift them).
    kept: Vec<Option<CpuSet>>,
    warnings: Vec<String>,
    /// Soft rules broken: warnings, or the error under `--strict`.
    violations: Vec<String>,
}

impl<'a> Builder<'a> {
    fn new(p: &'a Problem, assignment: &'a [Vec<usize>]) -> Builder<'a> {
        let mut occupants: Vec<Vec<usize>> = vec![Vec::new(); p.nodes.len()];
        for (i, set) in assignment.iter().enumerate() {
            for &j in set {
                occupants[j].push(i);
            }
        }
        let mut node_cpus: Vec<NodeCpus> = p
            .nodes
            .iter()
            .map(|node| NodeCpus::new(&node.cores, &node.cache_group, node.max_uses()))
            .collect();
        let kept = (0..p.instances.len())
            .map(|i| keep_cpus(p, i, &assignment[i], &mut node_cpus))
            .collect();
        let packed = occupants
            .iter()
            .map(|on| {
                on.iter()
                    .map(|&k| match p.instances[k].shape {
                        Shape::Shared(c) => c,
                        _ => 0,
                    })
                    .fold(0u32, u32::saturating_add)
            })
            .collect();
        Builder {
            p,
            assignment,
            occupants,
            packed,
            node_cpus,
            held: vec![CpuSet::new(); p.nodes.len()],
            kept,
            warnings: p.warnings.clone(),
            violations: Vec::new(),
        }
    }

    fn node_ids(&self, set: &[usize]) -> NodeSet {
        set.iter().map(|&j| self.p.nodes[j].id).collect()
    }

    /// The placement of instance `i`, with a reason for each choice.
    fn placement(&mut self, i: usize) -> PlannedInstance {
        let inst = &self.p.instances[i];
        let set = &self.assignment[i];
        let nodes = self.node_ids(set);
        let on_nodes = format!("node{} {nodes}", plural(nodes.len()));
        let mut reasons = Vec::new();
        let cpus = self.take_cpus(i, &nodes, &mut reasons);
        explain_current(inst, &nodes, &cpus, &mut reasons);
        self.explain_near(i, &on_nodes, &mut reasons);
        self.explain_kept_free(i, &mut reasons);
        let memory_nodes = memory_nodes(inst, &nodes, &mut reasons);
        self.explain_memory(i, &on_nodes, &mut reasons);
        if inst.policy == MemoryPolicy::Preferred && memory_nodes.len() > 1 {
            self.warnings.push(format!(
                "{}: `preferred` prefers only the first node of {memory_nodes} (the kernel takes \
                 one preferred node); `preferred-many` prefers all of them",
                inst.name
            ));
        }
        PlannedInstance {
            instance: inst.name.clone(),
            service: inst.service.clone(),
            placement: Placement { nodes, cpus, memory_policy: inst.policy, memory_nodes },
            reasons,
            sharing_group: None,
        }
    }

    /// Takes instance `i`'s CPUs from its nodes' free CPUs, whole cores first.
    fn take_cpus(&mut self, i: usize, nodes: &NodeSet, reasons: &mut Vec<String>) -> CpuSet {
        let p = self.p;
        let set = &self.assignment[i];
        match p.instances[i].shape {
            Shape::Whole(k) => {
                reasons.push(format!(
                    "owns node{} {nodes} (nodes = {k}){}",
                    plural(k as usize),
                    closeness(p, set)
                ));
                set.iter()
                    .fold(CpuSet::new(), |acc, &j| acc.union(&self.node_cpus[j].take(u32::MAX)))
            }
            Shape::Spanning(c) => {
                reasons.push(format!(
                    "cpus = {c} is more than any node it may use has: owns the {} node{} {nodes}{}, whole cores first",
                    set.len(),
                    plural(set.len()),
                    closeness(p, set)
                ));
                if let Some(kept) = self.kept[i].clone() {
                    return kept;
                }
                let mut left = c;
                let mut cpus = CpuSet::new();
                for &j in set {
                    let got = self.node_cpus[j].take(left);
                    left -= got.len() as u32;
                    cpus = cpus.union(&got);
                }
                cpus
            }
            Shape::Sharing { .. } => {
                let j = set[0];
                let cpus: CpuSet = p.nodes[j].cores.iter().flatten().copied().collect();
                let cpus = cpus.difference(&self.held[j]);
                reasons.push(crate::sharing::sharing_reason(
                    p,
                    &self.occupants,
                    i,
                    j,
                    &self.held[j],
                ));
                cpus
            }
            Shape::Shared(c) => {
                let j = set[0];
                let others = crate::sharing::others_named(p, &self.occupants[j], i);
                let used = self.packed[j];
                let sharing =
                    if others.is_empty() { others } else { format!("; shares it with {others}") };
                let cpus = match self.kept[i].clone() {
                    Some(kept) => kept,
                    None => self.node_cpus[j].take(c),
                };
                self.held[j] = self.held[j].union(&cpus);
                let taken = crate::sharing::taken(&p.nodes[j], used, p.overcommit);
                let caches = crate::sharing::cache_note(&p.nodes[j], &cpus).unwrap_or_default();
                reasons.push(format!(
                    "cpus = {c}: packed in node {} ({taken}), whole cores first{caches}{sharing}",
                    p.nodes[j].id,
                ));
                cpus
            }
        }
    }

    /// Whether instance `i` landed on the node of each device it is `near`, and why not.
    fn explain_near(&mut self, i: usize, on_nodes: &str, reasons: &mut Vec<String>) {
        let p = self.p;
        let inst = &p.instances[i];
        let set = &self.assignment[i];
        for target in &inst.near {
            if target.nodes.is_empty() {
                continue;
            }
            let device_nodes = self.node_ids(&target.nodes);
            let devices =
                target.devices.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", ");
            let on = if target.spec == target.devices.join(",") {
                format!("near {devices}")
            } else {
                format!("near `{}` ({devices})", target.spec)
            };
            if set.iter().any(|j| target.nodes.contains(j)) {
                reasons.push(format!("{on}: on the device's node {device_nodes}"));
            } else {
                let d = p.distances.measure.show(p.near_distance(set, &target.nodes));
                let why = why_not_on(p, &self.occupants, i, &target.nodes);
                reasons.push(format!("{on}: {why}, so the closest node it can have ({d})"));
                self.violations.push(format!(
                    "{}: not on the node of {devices} ({why}): placed on {on_nodes} at {d}",
                    inst.name
                ));
            }
        }
    }

    /// Each kept-free node instance `i` had to use, as a last resort.
    fn explain_kept_free(&mut self, i: usize, reasons: &mut Vec<String>) {
        let p = self.p;
        for &j in &self.assignment[i] {
            if p.kept_free[j].is_empty() {
                continue;
            }
            let kept_for = p.kept_free[j].join(", ");
            reasons.push(format!(
                "uses node {}, kept free for {kept_for}, as a last resort",
                p.nodes[j].id
            ));
            self.violations.push(kept_free_violation(p, self.assignment, &self.occupants, i, j));
        }
    }

    /// Whether instance `i`'s expected memory fits its nodes.
    fn explain_memory(&mut self, i: usize, on_nodes: &str, reasons: &mut Vec<String>) {
        let p = self.p;
        let inst = &p.instances[i];
        let set = &self.assignment[i];
        if inst.memory == 0 {
            return;
        }
        let capacity = match inst.shape {
            Shape::Shared(_) | Shape::Sharing { .. } => p.nodes[set[0]].memory,
            _ => p.memory_of(set),
        };
        let what = format!("{} {}", inst.policy, format_bytes(inst.memory));
        match capacity {
            Some(cap) if inst.memory > cap => {
                reasons.push(format!(
                    "memory {what} is more than {on_nodes} can hold ({}): it spills to other nodes",
                    format_bytes(cap)
                ));
                self.violations.push(format!(
                    "{}: expects {} but {on_nodes} can hold {} after the memory reserve; `{}` lets it spill to other nodes",
                    inst.name,
                    format_bytes(inst.memory),
                    format_bytes(cap),
                    inst.policy
                ));
            }
            Some(cap) => {
                // A sharing instance's memory fits only with its neighbours': say what they
                // expect together.
                let together = match inst.shape {
                    Shape::Sharing { .. } => {
                        let on_node = &self.occupants[set[0]];
                        let total: u64 = on_node.iter().map(|&k| p.instances[k].memory).sum();
                        let with = on_node.iter().filter(|&&k| p.instances[k].memory > 0).count();
                        (with > 1).then(|| {
                            format!(
                                "; its {with} instances expect {} together",
                                format_bytes(total)
                            )
                        })
                    }
                    _ => None,
                };
                reasons.push(format!(
                    "memory {what} fits {on_nodes} ({} after the reserve{})",
                    format_bytes(cap),
                    together.unwrap_or_default()
                ))
            }
            None => reasons.push(format!("memory {what}: {on_nodes} has unknown memory size")),
        }
    }

    /// Shared nodes whose instances together expect more memory than the node holds.
    fn shared_memory_violations(&mut self) {
        let p = self.p;
        for (j, on_node) in self.occupants.iter().enumerate() {
            let shared: Vec<usize> =
                on_node.iter().copied().filter(|&k| !p.instances[k].shape.owns_nodes()).collect();
            let total: u64 = shared.iter().map(|&k| p.instances[k].memory).sum();
            if let Some(cap) = p.nodes[j].memory {
                if shared.len() > 1 && total > cap {
                    let names: Vec<&str> =
                        shared.iter().map(|&k| p.instances[k].name.as_str()).collect();
                    self.violations.push(format!(
                        "node {}: {} together expect {} but it holds {} after the memory reserve; the ones not under `bind` spill to other nodes",
                        p.nodes[j].id,
                        names.join(", "),
                        format_bytes(total),
                        format_bytes(cap)
                    ));
                }
            }
        }
    }
}

/// The memory nodes of an instance on `nodes`: none for a policy that takes no nodes, else its
/// nodes and the memory-only nodes its `only-nodes` names.
fn memory_nodes(inst: &InstanceInfo, nodes: &NodeSet, reasons: &mut Vec<String>) -> NodeSet {
    if !inst.policy.takes_nodes() {
        return NodeSet::new();
    }
    if !inst.memory_only_nodes.is_empty() {
        reasons.push(format!(
            "memory-only node{} {} added to its memory nodes (named in only-nodes)",
            plural(inst.memory_only_nodes.len()),
            inst.memory_only_nodes
        ));
    }
    nodes.union(&inst.memory_only_nodes)
}

/// Why instance `i` is not on any of the device nodes `targets`: who took them, or that it may
/// not use them.
fn why_not_on(p: &Problem, occupants: &[Vec<usize>], i: usize, targets: &[usize]) -> String {
    let parts: Vec<String> = targets
        .iter()
        .map(|&j| {
            let node = p.nodes[j].id;
            let others: Vec<&str> = occupants[j]
                .iter()
                .filter(|&&k| k != i)
                .map(|&k| p.instances[k].name.as_str())
                .collect();
            if !p.instances[i].is_candidate[j] {
                let why = p.nodes[j].excluded_because.unwrap_or("not in its only-nodes");
                format!("node {node} is not available to it ({why})")
            } else if others.is_empty() {
                format!("node {node} cannot hold it")
            } else {
                format!("node {node} went to {}", others.join(", "))
            }
        })
        .collect();
    parts.join(", ")
}

/// ", package 0, distance 12" for a multi-node set; nothing for one node.
fn closeness(p: &Problem, set: &[usize]) -> String {
    if set.len() < 2 {
        return String::new();
    }
    let mut packages: Vec<u32> = set.iter().filter_map(|&j| p.nodes[j].package).collect();
    packages.sort_unstable();
    packages.dedup();
    let mut distances: Vec<u32> = Vec::new();
    for (a, &x) in set.iter().enumerate() {
        for &y in &set[a + 1..] {
            distances.push(p.distance[x][y]);
        }
    }
    let worst = distances.iter().copied().max().unwrap_or(0);
    let measure = p.distances.measure;
    // Packages rank only while distance is a firmware number: on a latency measure a set
    // across packages may be the closest measured while one package had room.
    let why_across = if measure.is_latency() {
        "the measured latency decides, not the package"
    } else {
        "no single package had room"
    };
    let where_ = match packages.as_slice() {
        [] => String::new(),
        [one] => format!("one package ({one}), "),
        many => format!(
            "packages {} ({why_across}), ",
            many.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        ),
    };
    let largest = match measure {
        DistanceMeasure::Slit | DistanceMeasure::Assumed => "largest distance",
        DistanceMeasure::Measured => "largest measured latency",
        DistanceMeasure::Hmat => "largest HMAT latency",
    };
    format!(": {where_}{largest} between them {}", measure.value(worst))
}

/// The `--strict` message for an instance placed on kept-free node `j`: what it needed and
/// why nothing else was left.
fn kept_free_violation(
    p: &Problem,
    assignment: &[Vec<usize>],
    occupants: &[Vec<usize>],
    i: usize,
    j: usize,
) -> String {
    let inst = &p.instances[i];
    let kept_for = p.kept_free[j].join(", ");
    let node = p.nodes[j].id;
    // A when-needed instance alone on the node wanted a node of its own, as `nodes = 1` does.
    let needs = match inst.shape {
        Shape::Whole(k) => Some(format!("{k} whole node{}", plural(k as usize))),
        Shape::Sharing { alone_first: true, .. } if occupants[j].len() == 1 => {
            Some("a node of its own (share-nodes = \"when-needed\")".to_string())
        }
        _ => None,
    };
    match needs {
        Some(needs) => {
            let total = p.nodes.len();
            let taken = (0..total)
                .filter(|&x| occupants[x].iter().any(|&o| o != i))
                .filter(|&x| assignment[i].iter().all(|&y| y != x))
                .count();
            let kept = (0..total).filter(|&x| !p.kept_free[x].is_empty()).count();
            format!(
                "{} needs {needs}: {total} nodes, {taken} taken, {kept} kept free for {kept_for}; it uses node {node}",
                inst.name,
            )
        }
        None => {
            // With sharing instances there the node's CPUs are theirs whoever came first: say
            // whom it shares the node with rather than why it came.
            let sharing = |k: usize| matches!(p.instances[k].shape, Shape::Sharing { .. });
            let others = crate::sharing::others_named(p, &occupants[j], i);
            if occupants[j].iter().any(|&k| sharing(k)) && !others.is_empty() {
                format!("{} shares node {node}, kept free for {kept_for}, with {others}", inst.name)
            } else {
                format!(
                    "{} uses node {node}, kept free for {kept_for}: no other node had room",
                    inst.name
                )
            }
        }
    }
}

/// The CPUs instance `i` keeps, claimed from `node_cpus`: those it runs on today, when it
/// stays on the same nodes with a size of `cpus = N`, all N are still usable there and no
/// instance earlier in the file kept them first. (`nodes = N` takes every usable CPU of its
/// nodes anyway.)
fn keep_cpus(p: &Problem, i: usize, set: &[usize], node_cpus: &mut [NodeCpus]) -> Option<CpuSet> {
    let inst = &p.instances[i];
    let running = inst.current.as_ref().filter(|r| r.set == set)?;
    let (Shape::Shared(count) | Shape::Spanning(count)) = inst.shape else {
        return None;
    };
    let cpus = &running.at.cpus;
    if cpus.len() != count as usize {
        return None;
    }
    // Claimed on copies first, so a CPU that is gone leaves every node untouched.
    let mut claimed: Vec<(usize, NodeCpus)> = Vec::new();
    let mut found = 0;
    for &j in set {
        let here: CpuSet =
            p.nodes[j].cores.iter().flatten().copied().filter(|&c| cpus.contains(c)).collect();
        found += here.len();
        let mut node = node_cpus[j].clone();
        if !node.claim(&here) {
            return None;
        }
        claimed.push((j, node));
    }
    if found != cpus.len() {
        return None;
    }
    for (j, node) in claimed {
        node_cpus[j] = node;
    }
    Some(cpus.clone())
}

/// Whether an instance running today stays where it is, and if not what changes.
fn explain_current(inst: &InstanceInfo, nodes: &NodeSet, cpus: &CpuSet, reasons: &mut Vec<String>) {
    let Some(running) = &inst.current else {
        return;
    };
    let now = &running.at;
    let on = |n: &NodeSet| format!("node{} {n}", plural(n.len()));
    let reason = if now.nodes == *nodes && now.cpus == *cpus {
        "stays where it runs now".to_string()
    } else if now.nodes == *nodes {
        format!(
            "stays on {}; its CPUs change from {} (no longer all usable, or taken first by an \
             instance earlier in the file)",
            on(nodes),
            now.cpus
        )
    } else {
        format!(
            "moves from {} (CPUs {}), where it runs now: staying would break a rule ranked \
             above moving",
            on(&now.nodes),
            now.cpus
        )
    };
    reasons.push(reason);
}
