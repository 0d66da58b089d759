//! What comparing nodes by measured (or HMAT) latency changed: when a plan used a latency
//! measure and the topology also has SLIT, the plan is made again on SLIT alone, and every
//! instance the two plans place differently says so with both measures' numbers: `node 3
//! instead of node 1: measured 118.0 ns vs 142.0 ns to near `nvme0n1` (node 0), though SLIT
//! says 32 vs 12`. The second plan only explains; it never changes the first.

use pinctl_config::Config;
use pinctl_topology::{NodeSet, Topology};

use crate::distance::DistanceMeasure;
use crate::problem::Problem;
use crate::{Plan, PlanInputs, plural, search};

pub(crate) fn explain_what_the_measure_changed(
    problem: &Problem,
    topology: &Topology,
    config: &Config,
    inputs: &PlanInputs,
    plan: &mut Plan,
) {
    let measure = problem.distances.measure;
    if !measure.is_latency() || topology.distances.is_empty() {
        return;
    }
    // The same hard rules: a plan that exists on one measure exists on the other.
    let Ok(slit) = Problem::with_measure(topology, config, inputs, Some(DistanceMeasure::Slit))
    else {
        return;
    };
    let Ok(outcome) = search::search(&slit) else { return };
    let ours: Vec<Vec<usize>> = plan
        .placements
        .iter()
        .map(|p| p.placement.nodes.iter().filter_map(|id| topology.node_index(id)).collect())
        .collect();
    // Interchangeable instances (one service, the same `near` nodes) may trade places between
    // the two plans: within each class, only the node sets one plan uses and the other does
    // not are a change, paired in order.
    let mut classes: Vec<usize> = problem.instances.iter().map(|inst| inst.class).collect();
    classes.sort_unstable();
    classes.dedup();
    for class in classes {
        let members: Vec<usize> =
            (0..problem.instances.len()).filter(|&i| problem.instances[i].class == class).collect();
        let mut theirs: Vec<&Vec<usize>> =
            members.iter().map(|&i| &outcome.assignment[i]).collect();
        theirs.sort();
        let mut changed = Vec::new();
        for &i in &members {
            match theirs.iter().position(|set| **set == ours[i]) {
                Some(k) => {
                    theirs.remove(k);
                }
                None => changed.push(i),
            }
        }
        for (i, theirs) in changed.into_iter().zip(theirs) {
            let why = why_elsewhere(problem, &slit, i, &ours[i], theirs);
            plan.placements[i].reasons.push(why);
        }
    }
}

/// `node 3 instead of node 1: ...` for instance `i`, on `ours` by the latency measure of
/// `problem` and on `theirs` by SLIT (`slit`).
fn why_elsewhere(
    problem: &Problem,
    slit: &Problem,
    i: usize,
    ours: &[usize],
    theirs: &[usize],
) -> String {
    let measure = problem.distances.measure;
    let named = |set: &[usize]| {
        let ids: NodeSet = set.iter().map(|&j| problem.nodes[j].id).collect();
        format!("node{} {ids}", plural(ids.len()))
    };
    let head = format!("{} instead of {}", named(ours), named(theirs));
    let says = match measure {
        DistanceMeasure::Measured => "measured",
        _ => "HMAT says",
    };
    let slit_says = |a: u32, b: u32| match a.cmp(&b) {
        std::cmp::Ordering::Greater => format!("though SLIT says {a} vs {b}"),
        std::cmp::Ordering::Equal => format!("where SLIT has a tie, {a} vs {b}"),
        std::cmp::Ordering::Less => format!("and SLIT says {a} vs {b}"),
    };
    let inst = &problem.instances[i];
    let missed = |set: &[usize], targets: &[usize]| !set.iter().any(|j| targets.contains(j));
    if let Some(target) = inst
        .near
        .iter()
        .filter(|t| !t.nodes.is_empty())
        .find(|t| missed(ours, &t.nodes) || missed(theirs, &t.nodes))
    {
        let node_ids: NodeSet = target.nodes.iter().map(|&j| problem.nodes[j].id).collect();
        return format!(
            "{head} (where SLIT alone puts it): {says} {} vs {} to near `{}` (node{} {node_ids}), {}",
            measure.value(problem.near_distance(ours, &target.nodes)),
            measure.value(problem.near_distance(theirs, &target.nodes)),
            target.spec,
            plural(node_ids.len()),
            slit_says(
                slit.near_distance(ours, &target.nodes),
                slit.near_distance(theirs, &target.nodes)
            ),
        );
    }
    if ours.len() > 1 || theirs.len() > 1 {
        let spread = |p: &Problem, set: &[usize]| -> u32 {
            let mut sum = 0u32;
            for (a, &x) in set.iter().enumerate() {
                for &y in &set[a + 1..] {
                    sum = sum.saturating_add(p.distance[x][y]);
                }
            }
            sum
        };
        let between = if ours.len() == 2 && theirs.len() == 2 {
            "between its nodes"
        } else {
            "summed over every pair of its nodes"
        };
        return format!(
            "{head} (where SLIT alone puts it): {says} {} vs {} {between}, {}",
            measure.value(spread(problem, ours)),
            measure.value(spread(problem, theirs)),
            slit_says(spread(slit, ours), spread(slit, theirs)),
        );
    }
    format!(
        "{head} (where SLIT alone puts it): comparing nodes by {} latency placed other \
         instances elsewhere",
        if measure == DistanceMeasure::Measured { "measured" } else { "HMAT" }
    )
}
