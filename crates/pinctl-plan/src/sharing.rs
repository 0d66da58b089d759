//! What the plan says about instances that share: the reason of an instance of `share-nodes`,
//! the last-level caches a `cpus = N` instance's CPUs fall in, how full an overcommitted node
//! is, which instances' CPU sets overlap, and the CPUs-per-CPU ratio of every shared node.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

use pinctl_topology::{CpuSet, NodeId, NodeSet};

use crate::problem::{NodeInfo, Problem, Shape};
use crate::{NodeUse, PlannedInstance, SharingGroup, plural};

/// `12 of its 16 usable CPUs taken`, or on an overcommitted node `4 CPUs of instances on its
/// 2 usable CPUs: 2 per CPU, as cpu-overcommit 2 allows`.
pub(crate) fn taken(node: &NodeInfo, used: u32, overcommit: pinctl_config::Overcommit) -> String {
    let capacity = node.cpu_count();
    if used <= capacity {
        return format!("{used} of its {capacity} usable CPUs taken");
    }
    format!(
        "{used} CPUs of instances on its {capacity} usable CPUs: {} per CPU, as cpu-overcommit {overcommit} allows",
        ratio(used, capacity)
    )
}

/// `2`, `1.5`, `1.33`: a ratio rounded to two decimals, without trailing zeros.
pub(crate) fn ratio(given: u32, cpus: u32) -> String {
    let hundredths = (u64::from(given) * 100 + u64::from(cpus.max(1)) / 2) / u64::from(cpus.max(1));
    let (whole, part) = (hundredths / 100, hundredths % 100);
    match part {
        0 => format!("{whole}"),
        p if p % 10 == 0 => format!("{whole}.{}", p / 10),
        p => format!("{whole}.{p:02}"),
    }
}

/// `, inside one L3 of the node's 2 (16-19,80-83)` or `, over 2 L3s of the node's 8 (1 of them
/// whole)`: where `cpus` fall among the last-level caches of `node`. `None` when the node has
/// one cache, or none known: nothing to choose between.
pub(crate) fn cache_note(node: &NodeInfo, cpus: &CpuSet) -> Option<String> {
    let known = node.caches.iter().filter(|(level, _)| level.is_some()).count();
    if node.caches.len() < 2 || known == 0 {
        return None;
    }
    let touched: Vec<&(Option<u8>, CpuSet)> =
        node.caches.iter().filter(|(_, c)| !c.is_disjoint(cpus)).collect();
    let levels: BTreeSet<Option<u8>> = touched.iter().map(|(level, _)| *level).collect();
    let name = match levels.iter().collect::<Vec<_>>().as_slice() {
        [Some(level)] => format!("L{level}"),
        _ => "last-level cache".to_string(),
    };
    let n = node.caches.len();
    Some(match touched.as_slice() {
        [(_, cache)] => format!(", inside one {name} of the node's {n} ({cache})"),
        many => {
            let whole = many.iter().filter(|(_, c)| c.is_subset(cpus)).count();
            format!(
                ", over {} {name}s of the node's {n} ({whole} of them whole), the fewest it fits in",
                many.len()
            )
        }
    })
}

/// The reason of a `share-nodes` instance `i` on node `j`, where `cpus = N` instances hold
/// `held`: whom it shares with and why.
pub(crate) fn sharing_reason(
    p: &Problem,
    occupants: &[Vec<usize>],
    i: usize,
    j: usize,
    held: &CpuSet,
) -> String {
    let inst = &p.instances[i];
    let node = p.nodes[j].id;
    let Shape::Sharing { weight, alone_first } = inst.shape else {
        unreachable!("a sharing reason for an instance that does not share");
    };
    let mode = if alone_first { "when-needed" } else { "always" };
    let weight = if weight == 1 { String::new() } else { format!(", share-weight {weight}") };
    let held = if held.is_empty() {
        String::new()
    } else {
        format!("; all its CPUs but the {} that `cpus = N` instances hold", held.len())
    };
    let others = others_named(p, &occupants[j], i);
    if others.is_empty() {
        return if alone_first {
            format!(
                "has node {node} to itself (share-nodes = \"when-needed\"{weight}: a node of its own where the host has room)"
            )
        } else {
            format!(
                "alone on node {node} (share-nodes = \"always\"{weight}: sharing instances spread evenly over the nodes they may use)"
            )
        };
    }
    let why = if alone_first {
        let free: Vec<usize> =
            inst.candidates.iter().copied().filter(|&c| occupants[c].is_empty()).collect();
        let kept_free = free.iter().all(|&c| !p.kept_free[c].is_empty());
        if free.is_empty() {
            "every node it may use hosts an instance".to_string()
        } else if kept_free {
            let ids: pinctl_topology::NodeSet = free.iter().map(|&c| p.nodes[c].id).collect();
            let verb = if free.len() == 1 { "is" } else { "are" };
            format!("node{} {ids} {verb} kept free", plural(free.len()))
        } else {
            "a node of its own would break a rule ranked above sharing".to_string()
        }
    } else {
        "sharing instances spread evenly over the nodes they may use".to_string()
    };
    format!(
        "shares node {node} and its CPUs with {others} (share-nodes = \"{mode}\"{weight}: {why}){held}"
    )
}

/// The instances on a node but `i`, as `a, b, c` or `a, b, c, d, e and 3 more`, in config
/// order (`on_node` is ascending); empty when `i` is alone. Only the names shown are visited:
/// each of thousands of instances sharing a node says whom it shares with, and must not walk
/// (or copy) all the others to do so.
pub(crate) fn others_named(p: &Problem, on_node: &[usize], i: usize) -> String {
    const SHOWN: usize = 5;
    let count = on_node.len() - usize::from(on_node.binary_search(&i).is_ok());
    let shown: Vec<&str> = on_node
        .iter()
        .filter(|&&k| k != i)
        .take(SHOWN)
        .map(|&k| p.instances[k].name.as_str())
        .collect();
    if count <= SHOWN {
        shown.join(", ")
    } else {
        format!("{} and {} more", shown.join(", "), count - SHOWN)
    }
}

/// The sharing groups of the plan: instances whose CPU sets overlap, directly or through
/// another member, each group once. Every instance points at its group. Linear in the sizes of
/// the CPU sets (each CPU joins the instances that hold it), where a list of sharers per
/// instance grows with the square of their count (8,192 instances on a node, issue 26).
pub(crate) fn sharing_groups(placements: &mut [PlannedInstance]) -> Vec<SharingGroup> {
    let mut roots = Roots::new(placements.len());
    let mut holder: HashMap<u32, usize> = HashMap::new();
    for (k, p) in placements.iter().enumerate() {
        for cpu in p.placement.cpus.iter() {
            match holder.entry(cpu) {
                Entry::Occupied(first) => roots.join(*first.get(), k),
                Entry::Vacant(free) => {
                    free.insert(k);
                }
            }
        }
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); placements.len()];
    for k in 0..placements.len() {
        members[roots.root(k)].push(k);
    }
    // Groups in the order of their first member: a root's list starts with its lowest index.
    let mut order: Vec<Vec<usize>> = members.into_iter().filter(|m| m.len() > 1).collect();
    order.sort_by_key(|m| m[0]);
    let mut groups = Vec::with_capacity(order.len());
    for (g, group) in order.into_iter().enumerate() {
        let mut nodes = NodeSet::new();
        let mut cpus = CpuSet::new();
        for &k in &group {
            placements[k].sharing_group = Some(g);
            nodes = nodes.union(&placements[k].placement.nodes);
            cpus = cpus.union(&placements[k].placement.cpus);
        }
        let members = group.iter().map(|&k| placements[k].instance.clone()).collect();
        groups.push(SharingGroup { members, nodes, cpus });
    }
    groups
}

/// Disjoint sets of instances (union-find with path halving): which instances are joined by
/// CPUs they hold in common.
struct Roots(Vec<usize>);

impl Roots {
    fn new(n: usize) -> Roots {
        Roots((0..n).collect())
    }

    fn root(&mut self, mut k: usize) -> usize {
        while self.0[k] != k {
            self.0[k] = self.0[self.0[k]];
            k = self.0[k];
        }
        k
    }

    /// Joins the sets of `a` and `b`; the lower index stays the root, so a group's root is its
    /// first member in config order.
    fn join(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.root(a), self.root(b));
        let (low, high) = if ra < rb { (ra, rb) } else { (rb, ra) };
        self.0[high] = low;
    }
}

/// Every node that hosts instances without being owned: who is there and how many CPUs of
/// their CPU sets it carries.
pub(crate) fn node_use(
    p: &Problem,
    assignment: &[Vec<usize>],
    placements: &[PlannedInstance],
) -> Vec<NodeUse> {
    let mut on: Vec<Vec<usize>> = vec![Vec::new(); p.nodes.len()];
    for (i, set) in assignment.iter().enumerate() {
        if !p.instances[i].shape.owns_nodes() {
            for &j in set {
                on[j].push(i);
            }
        }
    }
    let mut out = Vec::new();
    for (j, instances) in on.iter().enumerate().filter(|(_, list)| !list.is_empty()) {
        let node = &p.nodes[j];
        let cpus: CpuSet = node.cores.iter().flatten().copied().collect();
        let given: usize =
            instances.iter().map(|&i| placements[i].placement.cpus.intersection(&cpus).len()).sum();
        let id: NodeId = node.id;
        out.push(NodeUse {
            node: id,
            instances: instances.iter().map(|&i| placements[i].instance.clone()).collect(),
            usable_cpus: node.cpu_count(),
            cpus_given: given as u32,
        });
    }
    out
}
