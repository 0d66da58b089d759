//! Branch and bound over the instances: the first descent is a greedy plan (each instance takes
//! its cheapest option), then the search backtracks and keeps any plan of lower cost, pruning
//! every branch whose lower bound is already worse than the best plan found.
//!
//! Exhaustive unless the step budget runs out (large hosts with many interchangeable options);
//! the outcome says which, and both are deterministic: the budget counts steps, not time.

use std::cmp::{Ordering, Reverse};

use crate::PlanError;
use crate::problem::{Cost, InstanceInfo, Load, Problem, Shape, Terms, add_terms};

/// Options tried after the first complete plan before the search settles for the best so far.
pub(crate) const STEPS_AFTER_FIRST_PLAN: u64 = 20_000;
/// Options tried without finding any complete plan before the search gives up.
pub(crate) const STEPS_WITHOUT_PLAN: u64 = 2_000_000;
/// Above this many node sets per instance, sets are grown from each seed node instead.
const MAX_ENUMERATED_SETS: u64 = 4096;

/// What the search found.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// Node indices of each instance, config order.
    pub(crate) assignment: Vec<Vec<usize>>,
    pub(crate) cost: Cost,
    /// Whether every branch was either explored or proven no better.
    pub(crate) exhaustive: bool,
}

struct Option_ {
    set: Vec<usize>,
    delta: Terms,
    /// For options on one shared node: its load after and before (spread heuristic).
    load_after: Load,
    load_before: Load,
}

struct Search<'p> {
    p: &'p Problem,
    order: Vec<usize>,
    /// Lower bound of the terms the instances `order[d..]` will add.
    remaining: Vec<Terms>,
    occupied: Vec<u32>,
    owner: Vec<bool>,
    used: Vec<u32>,
    bind_memory: Vec<u64>,
    total_memory: Vec<u64>,
    assignment: Vec<Option<Vec<usize>>>,
    terms: Terms,
    best: Option<(Cost, Vec<Vec<usize>>)>,
    steps: u64,
    steps_at_first_plan: Option<u64>,
    out_of_budget: bool,
    /// The deepest dead end: (depth, message), for the infeasibility error.
    dead_end: Option<(usize, String, String)>,
}

pub(crate) fn search(p: &Problem) -> Result<Outcome, PlanError> {
    let n = p.nodes.len();
    let mut order: Vec<usize> = (0..p.instances.len()).collect();
    order.sort_by_key(|&i| {
        let inst = &p.instances[i];
        let has_near = inst.near.iter().any(|t| !t.nodes.is_empty());
        let size = match inst.shape {
            Shape::Whole(k) => u64::from(k) << 32,
            Shape::Spanning(c) | Shape::Shared(c) => u64::from(c),
        };
        (!inst.shape.owns_nodes(), !has_near, Reverse(size), inst.class, i)
    });
    let mut remaining = vec![[0u64; 7]; order.len() + 1];
    for d in (0..order.len()).rev() {
        remaining[d] = add_terms(&remaining[d + 1], &lower_bound(p, &p.instances[order[d]]));
    }
    let mut s = Search {
        p,
        order,
        remaining,
        occupied: vec![0; n],
        owner: vec![false; n],
        used: vec![0; n],
        bind_memory: vec![0; n],
        total_memory: vec![0; n],
        assignment: vec![None; p.instances.len()],
        terms: [0; 7],
        best: None,
        steps: 0,
        steps_at_first_plan: None,
        out_of_budget: false,
        dead_end: None,
    };
    s.descend(0);
    match s.best {
        Some((cost, assignment)) => Ok(Outcome { assignment, cost, exhaustive: !s.out_of_budget }),
        None if s.out_of_budget => Err(PlanError::SearchLimit { steps: s.steps }),
        None => {
            let (_, instance, reason) = s.dead_end.unwrap_or_default();
            Err(PlanError::Infeasible { instance, reason })
        }
    }
}

/// What any placement of `inst` adds at least, term by term.
fn lower_bound(p: &Problem, inst: &InstanceInfo) -> Terms {
    let mut t = [0u64; 7];
    let memories = || inst.candidates.iter().map(|&j| p.nodes[j].memory);
    match inst.shape {
        Shape::Shared(_) | Shape::Whole(1) => {
            let options = inst.candidates.iter().map(|&j| p.placement_terms(inst, &[j]));
            for k in [1, 2] {
                t[k] = options.clone().map(|o| o[k]).min().unwrap_or(0);
            }
            t[4] = 1;
            if !inst.binds() {
                let best = memories().map(|m| m.unwrap_or(u64::MAX)).max().unwrap_or(0);
                t[0] = inst.memory.saturating_sub(best);
            }
        }
        Shape::Whole(k) => {
            t[4] = u64::from(k);
            let pairs = u64::from(k) * u64::from(k - 1) / 2;
            let closest = inst
                .candidates
                .iter()
                .flat_map(|&a| inst.candidates.iter().map(move |&b| (a, b)))
                .filter(|(a, b)| a != b)
                .map(|(a, b)| p.distance[a][b])
                .min()
                .unwrap_or(0);
            t[6] = pairs * u64::from(closest);
        }
        Shape::Spanning(c) => {
            let mut cpus: Vec<u32> =
                inst.candidates.iter().map(|&j| p.nodes[j].cpu_count()).collect();
            cpus.sort_unstable_by(|a, b| b.cmp(a));
            let mut acc = 0;
            for n in cpus {
                if acc >= c {
                    break;
                }
                acc += n;
                t[4] += 1;
            }
        }
    }
    t
}

impl Search<'_> {
    fn descend(&mut self, depth: usize) {
        if depth == self.order.len() {
            self.leaf();
            return;
        }
        let i = self.order[depth];
        let options = self.options(depth, i);
        if options.is_empty() {
            let deeper = self.dead_end.as_ref().is_none_or(|(d, _, _)| depth > *d);
            if deeper && self.best.is_none() {
                let reason = self.diagnose(i);
                self.dead_end = Some((depth, self.p.instances[i].name.clone(), reason));
            }
            return;
        }
        for option in options {
            if self.budget_spent() {
                return;
            }
            self.steps += 1;
            let bound =
                add_terms(&add_terms(&self.terms, &option.delta), &self.remaining[depth + 1]);
            if let Some((best, _)) = &self.best {
                match bound.cmp(&best.terms()) {
                    // Options are sorted by their terms: every later one is worse too.
                    Ordering::Greater => return,
                    Ordering::Equal => {
                        let spread = self.spread_with(i, &option.set);
                        if spread > best.spread {
                            continue;
                        }
                    }
                    Ordering::Less => {}
                }
            }
            self.apply(i, &option.set, &option.delta, 1);
            self.descend(depth + 1);
            self.apply(i, &option.set, &option.delta, -1);
        }
    }

    fn budget_spent(&mut self) -> bool {
        let spent = match self.steps_at_first_plan {
            Some(first) => self.steps - first >= STEPS_AFTER_FIRST_PLAN,
            None => self.steps >= STEPS_WITHOUT_PLAN,
        };
        self.out_of_budget |= spent;
        spent
    }

    fn leaf(&mut self) {
        let Some(cost) = self.p.evaluate(&self.assignment) else {
            debug_assert!(false, "the search produced a plan that breaks a hard rule");
            return;
        };
        if self.best.as_ref().is_none_or(|(best, _)| cost < *best) {
            let assignment =
                self.assignment.iter().map(|s| s.clone().unwrap_or_default()).collect();
            self.best = Some((cost, assignment));
            self.steps_at_first_plan.get_or_insert(self.steps);
        }
    }

    /// Spread of the current partial plan with instance `i` also on `set`.
    fn spread_with(&self, i: usize, set: &[usize]) -> Vec<Load> {
        let shape = self.p.instances[i].shape;
        let mut owner = self.owner.clone();
        let mut used = self.used.clone();
        for &j in set {
            match shape {
                Shape::Shared(c) => used[j] += c,
                _ => owner[j] = true,
            }
        }
        self.p.spread(&owner, &used)
    }

    fn apply(&mut self, i: usize, set: &[usize], delta: &Terms, sign: i32) {
        let inst = &self.p.instances[i];
        let add = sign > 0;
        for &j in set {
            if add {
                self.occupied[j] += 1;
            } else {
                self.occupied[j] -= 1;
            }
            match inst.shape {
                Shape::Shared(c) => {
                    let bind = if inst.binds() { inst.memory } else { 0 };
                    if add {
                        self.used[j] += c;
                        self.total_memory[j] += inst.memory;
                        self.bind_memory[j] += bind;
                    } else {
                        self.used[j] -= c;
                        self.total_memory[j] -= inst.memory;
                        self.bind_memory[j] -= bind;
                    }
                }
                _ => self.owner[j] = add,
            }
        }
        for (t, d) in self.terms.iter_mut().zip(delta) {
            if add {
                *t += d;
            } else {
                *t -= d;
            }
        }
        self.assignment[i] = if add { Some(set.to_vec()) } else { None };
    }

    /// Every option for instance `i` at this point, cheapest first.
    fn options(&self, depth: usize, i: usize) -> Vec<Option_> {
        let p = self.p;
        let inst = &p.instances[i];
        // Interchangeable instances take their options in ascending order (symmetry).
        let floor = depth
            .checked_sub(1)
            .map(|d| self.order[d])
            .filter(|&prev| p.instances[prev].class == inst.class)
            .and_then(|prev| self.assignment[prev].as_ref())
            .map(|set| set[0]);
        let mut out = Vec::new();
        match inst.shape {
            Shape::Shared(c) => {
                for &j in &inst.candidates {
                    if floor.is_some_and(|f| j < f) || self.owner[j] {
                        continue;
                    }
                    let capacity = p.nodes[j].cpu_count();
                    if self.used[j] + c > capacity {
                        continue;
                    }
                    let memory = p.nodes[j].memory;
                    if inst.binds() && memory.is_some_and(|m| self.bind_memory[j] + inst.memory > m)
                    {
                        continue;
                    }
                    let mut delta = p.placement_terms(inst, &[j]);
                    if let Some(m) = memory {
                        let before = self.total_memory[j].saturating_sub(m);
                        delta[0] = (self.total_memory[j] + inst.memory).saturating_sub(m) - before;
                    }
                    if self.occupied[j] == 0 && !p.kept_free[j].is_empty() {
                        delta[3] = 1;
                    }
                    out.push(Option_ {
                        set: vec![j],
                        delta,
                        load_after: Load { used: self.used[j] + c, capacity },
                        load_before: Load { used: self.used[j], capacity },
                    });
                }
            }
            Shape::Whole(_) | Shape::Spanning(_) => {
                let free: Vec<usize> = inst
                    .candidates
                    .iter()
                    .copied()
                    .filter(|&j| self.occupied[j] == 0 && floor.is_none_or(|f| j > f))
                    .collect();
                for set in self.node_sets(inst, &free) {
                    if floor.is_some_and(|f| set[0] <= f) {
                        continue;
                    }
                    let memory = p.memory_of(&set);
                    if inst.binds() && memory.is_some_and(|m| inst.memory > m) {
                        continue;
                    }
                    let mut delta = p.placement_terms(inst, &set);
                    if let Some(m) = memory {
                        delta[0] = inst.memory.saturating_sub(m);
                    }
                    delta[3] = set.iter().filter(|&&j| !p.kept_free[j].is_empty()).count() as u64;
                    let full = Load { used: 1, capacity: 1 };
                    out.push(Option_ { set, delta, load_after: full, load_before: full });
                }
            }
        }
        out.sort_by(|a, b| {
            a.delta
                .cmp(&b.delta)
                .then(a.load_after.cmp(&b.load_after))
                .then(b.load_before.cmp(&a.load_before))
                .then_with(|| a.set.cmp(&b.set))
        });
        out
    }

    /// Candidate node sets of an instance that owns its nodes, among `free` (ascending).
    fn node_sets(&self, inst: &InstanceInfo, free: &[usize]) -> Vec<Vec<usize>> {
        let p = self.p;
        match inst.shape {
            Shape::Whole(k) => {
                let k = k as usize;
                if k > free.len() {
                    return Vec::new();
                }
                if binomial(free.len() as u64, k as u64) <= MAX_ENUMERATED_SETS {
                    combinations(free, k)
                } else {
                    self.grown_sets(free, |set| set.len() >= k)
                }
            }
            Shape::Spanning(c) => {
                if free.len() <= 12 {
                    (1u32..1 << free.len())
                        .map(|mask| {
                            free.iter()
                                .enumerate()
                                .filter(|(b, _)| mask & (1 << b) != 0)
                                .map(|(_, &j)| j)
                                .collect::<Vec<usize>>()
                        })
                        .filter(|set| p.valid_shape(inst, set))
                        .collect()
                } else {
                    let enough = |set: &[usize]| {
                        set.iter().map(|&j| p.nodes[j].cpu_count()).sum::<u32>() >= c
                    };
                    let mut sets = self.grown_sets(free, enough);
                    sets.retain(|set| p.valid_shape(inst, set));
                    sets
                }
            }
            Shape::Shared(_) => Vec::new(),
        }
    }

    /// From each seed node, the set grown by adding the free node closest to the set (fewest
    /// package crossings, then smallest total distance, then most CPUs, then lowest id) until
    /// `done`; deduplicated and ascending.
    fn grown_sets(&self, free: &[usize], done: impl Fn(&[usize]) -> bool) -> Vec<Vec<usize>> {
        let p = self.p;
        let mut sets: Vec<Vec<usize>> = Vec::new();
        for &seed in free {
            let mut set = vec![seed];
            while !done(&set) {
                let next = free.iter().copied().filter(|j| !set.contains(j)).min_by_key(|&j| {
                    let crossings = set
                        .iter()
                        .filter(|&&s| {
                            let (a, b) = (p.nodes[s].package, p.nodes[j].package);
                            a.is_some() && b.is_some() && a != b
                        })
                        .count();
                    let distance: u32 = set.iter().map(|&s| p.distance[s][j]).sum();
                    (crossings, distance, Reverse(p.nodes[j].cpu_count()), j)
                });
                match next {
                    Some(j) => set.push(j),
                    None => break,
                }
            }
            if done(&set) {
                set.sort_unstable();
                sets.push(set);
            }
        }
        sets.sort();
        sets.dedup();
        sets
    }

    /// Why instance `i` has no option in the current partial plan.
    fn diagnose(&self, i: usize) -> String {
        let p = self.p;
        let inst = &p.instances[i];
        let total = p.nodes.len();
        let candidates = inst.candidates.len();
        let taken_by: Vec<&str> = {
            let mut names: Vec<&str> = self
                .assignment
                .iter()
                .enumerate()
                .filter_map(|(k, s)| s.as_ref().map(|s| (k, s)))
                .filter(|(_, s)| s.iter().any(|j| inst.is_candidate[*j]))
                .map(|(k, _)| p.instances[k].name.as_str())
                .collect();
            names.dedup();
            names
        };
        let excluded = total - candidates;
        let excluded_note = if excluded > 0 {
            format!(", {excluded} not available to it (only-nodes, cpuset, memory-only)")
        } else {
            String::new()
        };
        match inst.shape {
            Shape::Whole(k) => {
                let free = inst.candidates.iter().filter(|&&j| self.occupied[j] == 0).count();
                let taken = candidates - free;
                format!(
                    "needs {k} whole node{}: {total} node{}, {taken} taken{}{excluded_note}{}",
                    crate::plural(k as usize),
                    crate::plural(total),
                    list_names(&taken_by),
                    if free > 0 && inst.binds() {
                        format!(
                            ", the {free} free ones too small for {} under bind",
                            crate::format_bytes(inst.memory)
                        )
                    } else {
                        String::new()
                    }
                )
            }
            Shape::Spanning(c) => {
                let free: Vec<usize> =
                    inst.candidates.iter().copied().filter(|&j| self.occupied[j] == 0).collect();
                let cpus: u32 = free.iter().map(|&j| p.nodes[j].cpu_count()).sum();
                format!(
                    "needs {c} CPUs on whole nodes (more than any node has): {} free node{} with {cpus} CPUs{}{excluded_note}",
                    free.len(),
                    crate::plural(free.len()),
                    list_names(&taken_by),
                )
            }
            Shape::Shared(c) => {
                let most = inst
                    .candidates
                    .iter()
                    .filter(|&&j| !self.owner[j])
                    .map(|&j| p.nodes[j].cpu_count() - self.used[j])
                    .max()
                    .unwrap_or(0);
                let owned = inst.candidates.iter().filter(|&&j| self.owner[j]).count();
                format!(
                    "needs {c} CPUs on one node: the most free on a node it may use is {most}; {owned} of its {candidates} node{} owned by whole-node instances{}",
                    crate::plural(candidates),
                    list_names(&taken_by),
                )
            }
        }
    }
}

fn list_names(names: &[&str]) -> String {
    if names.is_empty() { String::new() } else { format!(" (by {})", names.join(", ")) }
}

fn binomial(n: u64, k: u64) -> u64 {
    if k > n {
        return 0;
    }
    let k = k.min(n - k);
    let mut acc: u64 = 1;
    for i in 0..k {
        acc = acc.saturating_mul(n - i) / (i + 1);
        if acc > MAX_ENUMERATED_SETS * 1024 {
            return u64::MAX;
        }
    }
    acc
}

/// All `k`-element subsets of `items`, each ascending, in lexicographic order.
fn combinations(items: &[usize], k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut picked = Vec::with_capacity(k);
    fn rec(
        items: &[usize],
        k: usize,
        start: usize,
        picked: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        if picked.len() == k {
            out.push(picked.clone());
            return;
        }
        for i in start..items.len() {
            if items.len() - i < k - picked.len() {
                break;
            }
            picked.push(items[i]);
            rec(items, k, i + 1, picked, out);
            picked.pop();
        }
    }
    rec(items, k, 0, &mut picked, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_and_binomials_agree() {
        assert_eq!(combinations(&[1, 3, 5, 7], 2).len() as u64, binomial(4, 2));
        assert_eq!(combinations(&[1, 3, 5], 2), vec![vec![1, 3], vec![1, 5], vec![3, 5]]);
        assert_eq!(binomial(8, 0), 1);
        assert_eq!(binomial(3, 5), 0);
        assert_eq!(binomial(256, 4), u64::MAX, "too many to enumerate");
    }
}
