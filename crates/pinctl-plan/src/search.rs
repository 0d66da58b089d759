//! Branch and bound over the instances, in two passes (docs/planning.md, "How the plan is
//! found"). Pass one finds the lowest cost before the tie-break: its first descent is a greedy
//! plan (each instance takes its cheapest option), then it backtracks, keeps any better plan
//! and prunes every branch whose lower bound cannot beat the best so far. Pass two walks
//! instances in config order and nodes in ascending order to the first plan of that cost: the
//! one with the lowest node ids.
//!
//! Exhaustive unless a step budget runs out; the outcome says which, and both are
//! deterministic: budgets count steps, not time.

use std::cmp::{Ordering, Reverse};

use crate::PlanError;
use crate::problem::{
    Cost, InstanceInfo, Load, NodeTally, Problem, Shape, Terms, add_terms, memory_load,
    shared_beyond_first, term,
};

mod diagnose;

/// Budget of each pass once it has a plan, in options tried times instances times nodes (the
/// cost of an option grows with both), so small problems get many steps and large ones few;
/// see [`step_budget`].
const WORK_BUDGET: u64 = 4_000_000;

/// Options a pass may try once it has a plan (after the first, or for the lowest-ids pass):
/// `WORK_BUDGET / (instances x nodes)`, at least 5,000 and at most 200,000.
pub(crate) fn step_budget(instances: usize, nodes: usize) -> u64 {
    (WORK_BUDGET / (instances.max(1) * nodes.max(1)) as u64).clamp(5_000, 200_000)
}

/// Options tried without finding any complete plan before the search gives up.
const WORK_WITHOUT_PLAN: u64 = 100_000_000;

/// Options the first pass may try before it has any plan: `100,000,000 / (instances x
/// nodes)`, at least 50,000 and at most 2,000,000 (a tightly packed config is a bin-packing
/// problem; past this the planner says it could not find a placement rather than run on).
pub(crate) fn steps_without_plan(instances: usize, nodes: usize) -> u64 {
    (WORK_WITHOUT_PLAN / (instances.max(1) * nodes.max(1)) as u64).clamp(50_000, 2_000_000)
}

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

/// One option for the instance being placed: its node set and what it adds to the terms.
struct Choice {
    set: Vec<usize>,
    delta: Terms,
    /// For options on one shared node: its load after and before (spread heuristic).
    load_after: Load,
    load_before: Load,
    /// Empty nodes it occupies.
    empty_taken: usize,
    /// `delta` plus what taking those empty nodes forces on the `when-needed` instances still
    /// to place (`Search::must_share`): what the option adds to the bound. Options are tried in
    /// its order, so that once one is beyond the best plan, so is every later one.
    bound_delta: Terms,
}

/// What a search pass looks for.
enum Goal {
    /// The lowest (terms, spread), options tried cheapest first.
    Optimise,
    /// The first plan in config order and ascending node ids whose (terms, spread) is this
    /// optimum: the lowest ids among all optimal plans (rule 7).
    LowestIds { terms: Terms, spread: Vec<Load> },
}

struct Search<'p> {
    p: &'p Problem,
    goal: Goal,
    /// Whether a `LowestIds` pass found its plan (and stops).
    done: bool,
    budget: u64,
    budget_without_plan: u64,
    order: Vec<usize>,
    /// Lower bound of the terms the instances `order[d..]` will add.
    remaining: Vec<Terms>,
    /// CPUs the `cpus = N` instances among `order[d..]` need.
    shared_demand: Vec<u32>,
    /// Load the instances among `order[d..]` that do not own nodes add (CPUs and weights).
    water: Vec<u32>,
    /// Nodes the owning instances among `order[d..]` take at least.
    owner_demand: Vec<usize>,
    /// Instances of `share-nodes = "when-needed"` among `order[d..]`.
    alone_demand: Vec<usize>,
    /// What the partial plan puts on each node.
    tally: NodeTally,
    /// Placeable nodes that no instance occupies.
    empty: usize,
    assignment: Vec<Option<Vec<usize>>>,
    terms: Terms,
    best: Option<(Cost, Vec<Vec<usize>>)>,
    steps: u64,
    steps_at_first_plan: Option<u64>,
    out_of_budget: bool,
    /// The deepest dead end: (depth, message), for the infeasibility error.
    dead_end: Option<(usize, String, String)>,
}

/// Stack a descent takes per level (one instance): about 1.5 KiB in a debug build, less
/// optimised; a quarter of it is kept as margin.
const STACK_PER_INSTANCE: usize = 2 << 10;

/// Up to this many instances the search runs on the caller's stack, whatever thread it is (a
/// tokio worker has 2 MiB).
const INSTANCES_ON_CALLER_STACK: usize = 512;

/// Both passes. The descent recurses once per instance, 8192 deep for the largest file: more
/// than a main thread's 8 MiB holds in a debug build and than a runtime's worker thread holds
/// in any build, so a large problem is searched on a thread of its own whose stack is sized
/// for its depth (reserved, and only touched as deep as the search goes).
pub(crate) fn search(p: &Problem) -> Result<Outcome, PlanError> {
    if p.instances.len() <= INSTANCES_ON_CALLER_STACK {
        return search_here(p);
    }
    let stack = (p.instances.len() + 64) * STACK_PER_INSTANCE + (1 << 20);
    std::thread::scope(|scope| {
        let searched = std::thread::Builder::new()
            .name("pinctl-plan".into())
            .stack_size(stack)
            .spawn_scoped(scope, || search_here(p));
        match searched {
            Ok(handle) => handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No thread to be had (a process at its thread limit): the caller's stack is tried.
            Err(_) => search_here(p),
        }
    })
}

fn search_here(p: &Problem) -> Result<Outcome, PlanError> {
    let mut order: Vec<usize> = (0..p.instances.len()).collect();
    order.sort_by_key(|&i| {
        let inst = &p.instances[i];
        let has_near = inst.near.iter().any(|t| !t.nodes.is_empty());
        let size = match inst.shape {
            Shape::Whole(k) => u64::from(k) << 32,
            Shape::Spanning(c) | Shape::Shared(c) => u64::from(c),
            Shape::Sharing { weight, .. } => u64::from(weight),
        };
        // Instances that want a node of their own come right after the owners, which take
        // empty nodes too: placed after the `cpus = N` ones, those would have spread over every
        // empty node first.
        (
            !inst.shape.owns_nodes(),
            !inst.shape.alone_first(),
            !has_near,
            Reverse(size),
            inst.class,
            i,
        )
    });
    let mut first = Search::new(p, order, Goal::Optimise);
    first.descend(0);
    let Some((cost, assignment)) = first.best.take() else {
        if first.out_of_budget {
            let (_, instance, reason) = first.dead_end.unwrap_or_default();
            return Err(PlanError::SearchLimit { steps: first.steps, instance, reason });
        }
        let (_, instance, reason) = first.dead_end.unwrap_or_default();
        return Err(PlanError::Infeasible { instance, reason });
    };
    if first.out_of_budget {
        return Ok(Outcome { assignment, cost, exhaustive: false });
    }
    // The optimum is known; now the plan with the lowest node ids among those that reach it.
    let goal = Goal::LowestIds { terms: cost.terms(), spread: cost.spread.clone() };
    let mut second = Search::new(p, (0..p.instances.len()).collect(), goal);
    second.descend(0);
    match second.best {
        Some((cost, assignment)) if second.done => {
            Ok(Outcome { assignment, cost, exhaustive: true })
        }
        _ => Ok(Outcome { assignment, cost, exhaustive: false }),
    }
}

impl<'p> Search<'p> {
    fn new(p: &'p Problem, order: Vec<usize>, goal: Goal) -> Search<'p> {
        let n = p.nodes.len();
        let mut remaining = vec![[0u64; term::COUNT]; order.len() + 1];
        let mut shared_demand = vec![0u32; order.len() + 1];
        let mut water = vec![0u32; order.len() + 1];
        let mut owner_demand = vec![0usize; order.len() + 1];
        let mut alone_demand = vec![0usize; order.len() + 1];
        for d in (0..order.len()).rev() {
            let inst = &p.instances[order[d]];
            let least = lower_bound(p, inst);
            remaining[d] = add_terms(&remaining[d + 1], &least);
            owner_demand[d] = owner_demand[d + 1]
                + if inst.shape.owns_nodes() { least[term::NODE_COUNT] as usize } else { 0 };
            shared_demand[d] = shared_demand[d + 1]
                + match inst.shape {
                    Shape::Shared(c) => c,
                    _ => 0,
                };
            water[d] = water[d + 1] + inst.shape.load();
            alone_demand[d] = alone_demand[d + 1] + usize::from(inst.shape.alone_first());
        }
        Search {
            p,
            goal,
            done: false,
            budget: step_budget(p.instances.len(), n),
            budget_without_plan: steps_without_plan(p.instances.len(), n),
            order,
            remaining,
            shared_demand,
            water,
            owner_demand,
            alone_demand,
            tally: NodeTally::new(n),
            empty: p.nodes.iter().filter(|node| node.placeable).count(),
            assignment: vec![None; p.instances.len()],
            terms: [0; term::COUNT],
            best: None,
            steps: 0,
            steps_at_first_plan: None,
            out_of_budget: false,
            dead_end: None,
        }
    }
}

/// What any placement of `inst` adds at least, term by term.
fn lower_bound(p: &Problem, inst: &InstanceInfo) -> Terms {
    let mut t = [0u64; term::COUNT];
    let memories = || inst.candidates.iter().map(|&j| p.nodes[j].memory);
    match inst.shape {
        Shape::Shared(_) | Shape::Sharing { .. } | Shape::Whole(1) => {
            let options = inst.candidates.iter().map(|&j| p.placement_terms(inst, &[j]));
            for k in [term::NEAR_MISSES, term::NEAR_DISTANCE] {
                t[k] = options.clone().map(|o| o[k]).min().unwrap_or(0);
            }
            t[term::NODE_COUNT] = 1;
            if !inst.binds() {
                let best = memories().map(|m| m.unwrap_or(u64::MAX)).max().unwrap_or(0);
                t[term::MEMORY_OVERFLOW] = inst.memory.saturating_sub(best);
            }
        }
        Shape::Whole(k) => {
            t[term::NODE_COUNT] = u64::from(k);
            let pairs = u64::from(k) * u64::from(k - 1) / 2;
            let closest = inst
                .candidates
                .iter()
                .flat_map(|&a| inst.candidates.iter().map(move |&b| (a, b)))
                .filter(|(a, b)| a != b)
                .map(|(a, b)| p.distance[a][b])
                .min()
                .unwrap_or(0);
            t[term::NODE_DISTANCE] = pairs * u64::from(closest);
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
                t[term::NODE_COUNT] += 1;
            }
        }
    }
    // An instance running where it can no longer be (its shape or candidates changed) moves
    // whatever option it takes; any other may stay.
    let cannot_stay = inst.current.as_ref().is_some_and(|r| !p.valid_shape(inst, &r.set));
    t[term::MOVED] = u64::from(cannot_stay);
    t
}

impl Search<'_> {
    fn descend(&mut self, depth: usize) {
        if depth == self.order.len() {
            self.leaf();
            return;
        }
        let i = self.order[depth];
        if self.cannot_improve(depth, i) {
            return;
        }
        // Once the greedy descent has met its first dead end (which names the instance that did
        // not fit) or found a plan, prune what can no longer fit.
        let pruning = self.dead_end.is_some() || self.best.is_some();
        if let Some(shortage) = self.cannot_fit(depth).filter(|_| pruning) {
            if self.wants_dead_end(depth) {
                self.dead_end = Some((depth, self.p.instances[i].name.clone(), shortage));
            }
            return;
        }
        let options = self.options(depth, i);
        if options.is_empty() {
            if self.wants_dead_end(depth) {
                let reason = self.diagnose(i);
                self.dead_end = Some((depth, self.p.instances[i].name.clone(), reason));
            }
            return;
        }
        for option in options {
            if self.done || self.budget_spent() {
                return;
            }
            self.steps += 1;
            let bound =
                add_terms(&add_terms(&self.terms, &option.bound_delta), &self.remaining[depth + 1]);
            let target = match &self.goal {
                Goal::Optimise => self.best.as_ref().map(|(best, _)| (best.terms(), &best.spread)),
                Goal::LowestIds { terms, spread } => Some((*terms, spread)),
            };
            if let Some((terms, spread)) = target {
                match bound.cmp(&terms) {
                    // Cheapest first: every later option is worse too.
                    Ordering::Greater if matches!(self.goal, Goal::Optimise) => return,
                    Ordering::Greater => continue,
                    Ordering::Equal => {
                        let bound = self.spread_bound(depth + 1, i, &option.set, true);
                        // Optimising, an equal spread cannot improve; the lowest-ids pass
                        // looks for exactly the optimum.
                        let hopeless = match self.goal {
                            Goal::Optimise => bound >= *spread,
                            Goal::LowestIds { .. } => bound > *spread,
                        };
                        if hopeless {
                            continue;
                        }
                    }
                    Ordering::Less => {}
                }
            }
            self.apply(i, &option.set, &option.delta, 1);
            self.descend(depth + 1);
            self.apply(i, &option.set, &option.delta, -1);
            if self.cannot_improve(depth, i) {
                return;
            }
            // A dead end below may have been the first: what cannot fit now never will.
            if self.dead_end.is_some() && self.best.is_none() && self.cannot_fit(depth).is_some() {
                return;
            }
        }
    }

    /// Whether no completion of the current partial plan (instances `order[..depth]`
    /// placed) can beat the best plan: prunes a whole level at once once the best plan meets
    /// the bound, instead of refuting its options one by one.
    fn cannot_improve(&self, depth: usize, i: usize) -> bool {
        let (Goal::Optimise, Some((best, _))) = (&self.goal, &self.best) else {
            return false;
        };
        let mut bound = add_terms(&self.terms, &self.remaining[depth]);
        bound[term::SHARED_INSTANCES] += self.must_share(depth, 0);
        match bound.cmp(&best.terms()) {
            Ordering::Greater => true,
            Ordering::Equal => self.spread_bound(depth, i, &[], true) >= best.spread,
            Ordering::Less => false,
        }
    }

    /// Whether a dead end at `depth` is the furthest the first pass got without a plan (the
    /// infeasibility error reports that one).
    fn wants_dead_end(&self, depth: usize) -> bool {
        let deeper = self.dead_end.as_ref().is_none_or(|(d, _, _)| depth > *d);
        deeper && self.best.is_none() && matches!(self.goal, Goal::Optimise)
    }

    /// Whether the instances `order[depth..]` can no longer all fit, whatever their choices:
    /// the owning ones need more empty nodes than are left, or the shared ones more CPUs than
    /// the nodes nobody owns have once the owners took the smallest empty nodes. Returns the
    /// shortage.
    fn cannot_fit(&self, depth: usize) -> Option<String> {
        let (owners, shared) = (self.owner_demand[depth], u64::from(self.shared_demand[depth]));
        if owners == 0 && shared == 0 {
            return None;
        }
        let mut empty: Vec<u32> = Vec::new();
        let mut free_cpus = 0u64;
        for (j, node) in self.p.nodes.iter().enumerate().filter(|(_, n)| n.placeable) {
            if self.tally.owner[j] {
                continue;
            }
            if self.tally.occupied[j] == 0 {
                empty.push(node.slots);
            }
            free_cpus += u64::from(node.slots.saturating_sub(self.tally.used[j]));
        }
        let left = self.order.len() - depth;
        let what = format!(
            "cannot be placed: with it, the {left} instance{} still to place need {owners} whole node{} and {shared} CPU{} on shared nodes",
            crate::plural(left),
            crate::plural(owners),
            crate::plural(shared as usize)
        );
        if owners > empty.len() {
            let (n, verb) = (empty.len(), if empty.len() == 1 { "is" } else { "are" });
            return Some(format!("{what}, but only {n} node{} {verb} empty", crate::plural(n)));
        }
        empty.sort_unstable();
        let owned: u64 = empty[..owners].iter().map(|&c| u64::from(c)).sum();
        let available = free_cpus - owned;
        (available < shared)
            .then(|| format!("{what}, but at most {available} CPUs are left for shared instances"))
    }

    /// How many of the `when-needed` instances among `order[depth..]` will share a node
    /// whatever their choices, once `taken` more empty nodes are gone: those beyond the empty
    /// nodes the owning instances still to place leave over (each other one is counted).
    fn must_share(&self, depth: usize, taken: usize) -> u64 {
        let alone = self.alone_demand[depth];
        if alone == 0 {
            return 0;
        }
        let empty = self.empty.saturating_sub(taken).saturating_sub(self.owner_demand[depth]);
        alone.saturating_sub(empty) as u64
    }

    fn budget_spent(&mut self) -> bool {
        let spent = match (&self.goal, self.steps_at_first_plan) {
            (Goal::LowestIds { .. }, _) => self.steps >= self.budget,
            (Goal::Optimise, Some(first)) => self.steps - first >= self.budget,
            (Goal::Optimise, None) => self.steps >= self.budget_without_plan,
        };
        self.out_of_budget |= spent;
        spent
    }

    fn leaf(&mut self) {
        // The state holds the numeric terms; a full evaluation is only needed for a plan that
        // is kept.
        let spread = self.p.spread(&self.tally.owner, &self.tally.load, &self.tally.sharing_memory);
        let keep = match (&self.goal, &self.best) {
            (Goal::Optimise, None) => true,
            (Goal::Optimise, Some((best, _))) => {
                (self.terms, &spread) < (best.terms(), &best.spread)
            }
            (Goal::LowestIds { terms, spread: target }, _) => {
                self.terms == *terms && spread == *target
            }
        };
        if !keep {
            return;
        }
        let Some(cost) = self.p.evaluate(&self.assignment) else {
            debug_assert!(false, "the search produced a plan that breaks a hard rule");
            return;
        };
        debug_assert_eq!(cost.terms(), self.terms);
        let assignment = self.assignment.iter().map(|s| s.clone().unwrap_or_default()).collect();
        self.best = Some((cost, assignment));
        self.steps_at_first_plan.get_or_insert(self.steps);
        self.done = matches!(self.goal, Goal::LowestIds { .. });
    }

    /// A lower bound of the spread of every plan completing the current partial plan with
    /// instance `i` on `set`: the CPUs the later shared instances need, poured like water into
    /// the least loaded nodes that nobody owns (fractional water-filling minimises the sorted
    /// load vector over all fractional distributions, so no real completion is below it).
    /// Memory shares only ever raise a node's load above its CPU load, so pouring CPUs onto
    /// CPU loads alone keeps it a lower bound.
    fn spread_bound(&self, water_from: usize, i: usize, set: &[usize], tight: bool) -> Vec<Load> {
        let p = self.p;
        let shape = p.instances[i].shape;
        let mut fixed: Vec<Load> = Vec::new();
        let mut open: Vec<Load> = Vec::new();
        for (j, node) in p.nodes.iter().enumerate().filter(|(_, n)| n.placeable) {
            let capacity = node.cpu_count();
            let mine = set.contains(&j);
            if self.tally.owner[j] || (mine && shape.owns_nodes()) {
                fixed.push(Load { used: capacity, capacity });
                continue;
            }
            let used = self.tally.load[j] + if mine { shape.load() } else { 0 };
            // With the terms already at the target, a completion that reaches it adds no
            // kept-free node: those stay as they are.
            if tight && !p.kept_free[j].is_empty() && self.tally.occupied[j] == 0 && !mine {
                fixed.push(Load { used, capacity });
            } else {
                open.push(Load { used, capacity });
            }
        }
        // Later owners fill whole empty nodes; taking the smallest leaves the most room for
        // the water, so the bound stays below every real completion.
        let mut owners = self.owner_demand[water_from];
        if owners > 0 {
            open.sort_by_key(|l| (l.used != 0, l.capacity));
            let empty = open.iter().take_while(|l| l.used == 0).count();
            owners = owners.min(empty);
            fixed.extend(std::iter::repeat_n(Load { used: 1, capacity: 1 }, owners));
            open.drain(..owners);
        }
        let water = self.water[water_from];
        open.sort();
        let same_capacity = open.windows(2).all(|w| w[0].capacity == w[1].capacity);
        if water > 0 && !open.is_empty() {
            if same_capacity {
                pour_units(&mut open, water);
            } else {
                pour_fraction(&mut open, water);
            }
        }
        fixed.extend(open);
        fixed.sort_by(|a, b| b.cmp(a));
        fixed
    }

    fn apply(&mut self, i: usize, set: &[usize], delta: &Terms, sign: i32) {
        let inst = &self.p.instances[i];
        let add = sign > 0;
        for &j in set {
            if add {
                self.tally.occupied[j] += 1;
                if self.tally.occupied[j] == 1 && self.p.nodes[j].placeable {
                    self.empty -= 1;
                }
            } else {
                self.tally.occupied[j] -= 1;
                if self.tally.occupied[j] == 0 && self.p.nodes[j].placeable {
                    self.empty += 1;
                }
            }
            match inst.shape {
                Shape::Shared(_) | Shape::Sharing { .. } => {
                    let bind = if inst.binds() { inst.memory } else { 0 };
                    let (c, sharer) = match inst.shape {
                        Shape::Shared(c) => (c, 0),
                        _ => (0, 1),
                    };
                    let alone = u32::from(inst.shape.alone_first());
                    let sharing_memory = if sharer > 0 { inst.memory } else { 0 };
                    if add {
                        self.tally.used[j] += c;
                        self.tally.load[j] += inst.shape.load();
                        self.tally.sharers[j] += sharer;
                        self.tally.alone_first[j] += alone;
                        self.tally.sharing_memory[j] += sharing_memory;
                        self.tally.total_memory[j] += inst.memory;
                        self.tally.bind_memory[j] += bind;
                    } else {
                        self.tally.used[j] -= c;
                        self.tally.load[j] -= inst.shape.load();
                        self.tally.sharers[j] -= sharer;
                        self.tally.alone_first[j] -= alone;
                        self.tally.sharing_memory[j] -= sharing_memory;
                        self.tally.total_memory[j] -= inst.memory;
                        self.tally.bind_memory[j] -= bind;
                    }
                }
                _ => self.tally.owner[j] = add,
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
    fn options(&self, depth: usize, i: usize) -> Vec<Choice> {
        let inst = &self.p.instances[i];
        let floor = self.symmetry_floor(depth, inst);
        let mut out = match inst.shape {
            Shape::Shared(_) | Shape::Sharing { .. } => {
                inst.candidates.iter().filter_map(|&j| self.share_option(inst, j, floor)).collect()
            }
            Shape::Whole(_) | Shape::Spanning(_) => self.owning_options(inst, floor),
        };
        for choice in &mut out {
            choice.bound_delta = choice.delta;
            choice.bound_delta[term::SHARED_INSTANCES] +=
                self.must_share(depth + 1, choice.empty_taken);
        }
        if matches!(self.goal, Goal::LowestIds { .. }) {
            out.sort_by(|a, b| a.set.cmp(&b.set));
            return out;
        }
        out.sort_by(|a, b| {
            a.bound_delta
                .cmp(&b.bound_delta)
                .then(a.load_after.cmp(&b.load_after))
                .then(b.load_before.cmp(&a.load_before))
                .then_with(|| a.set.cmp(&b.set))
        });
        out
    }

    /// The lowest first node instance `inst` may take at `depth`. Interchangeable instances
    /// take their options in ascending order (symmetry), once a first plan exists: the first
    /// descent is a free greedy choice, and levels computed without the floor explore every
    /// option, so canonical orders stay reachable.
    fn symmetry_floor(&self, depth: usize, inst: &InstanceInfo) -> Option<usize> {
        depth
            .checked_sub(1)
            .filter(|_| self.best.is_some() || matches!(self.goal, Goal::LowestIds { .. }))
            .map(|d| self.order[d])
            .filter(|&prev| self.p.instances[prev].class == inst.class)
            .and_then(|prev| self.assignment[prev].as_ref())
            .map(|set| set[0])
    }

    /// Node `j` as an option for an instance that shares its node, if it fits: free CPUs and,
    /// under bind, memory.
    fn share_option(&self, inst: &InstanceInfo, j: usize, floor: Option<usize>) -> Option<Choice> {
        let p = self.p;
        if floor.is_some_and(|f| j < f) || self.tally.owner[j] {
            return None;
        }
        let (c, sharer) = match inst.shape {
            Shape::Shared(c) => (c, 0),
            _ => (0, 1),
        };
        let capacity = p.nodes[j].cpu_count();
        // N different CPUs, within the node's limit (overcommitted or not); a sharing instance
        // needs a CPU that no `cpus = N` instance holds.
        if c > capacity || self.tally.used[j] + c > p.cpu_limit(j, self.tally.sharers[j] + sharer) {
            return None;
        }
        let memory = p.nodes[j].memory;
        if inst.binds() && memory.is_some_and(|m| self.tally.bind_memory[j] + inst.memory > m) {
            return None;
        }
        let delta = self.share_terms(inst, j, c, sharer);
        let load = |cpus: u32, memory: u64| {
            let cpus = Load { used: cpus, capacity };
            match p.nodes[j].memory {
                Some(m) if memory > 0 => cpus.max(memory_load(memory, m)),
                _ => cpus,
            }
        };
        let (now, expected) = (self.tally.load[j], self.tally.sharing_memory[j]);
        let more = if sharer > 0 { inst.memory } else { 0 };
        Some(Choice {
            set: vec![j],
            delta,
            load_after: load(now + inst.shape.load(), expected + more),
            load_before: load(now, expected),
            empty_taken: usize::from(self.tally.occupied[j] == 0),
            bound_delta: [0; term::COUNT],
        })
    }

    /// What sharing node `j` adds to the terms: the placement's own, memory past the node's,
    /// a kept-free node used, and instances sharing beyond the first.
    fn share_terms(&self, inst: &InstanceInfo, j: usize, c: u32, sharer: u32) -> Terms {
        let p = self.p;
        let mut delta = p.placement_terms(inst, &[j]);
        if let Some(m) = p.nodes[j].memory {
            let before = self.tally.total_memory[j].saturating_sub(m);
            delta[term::MEMORY_OVERFLOW] =
                (self.tally.total_memory[j] + inst.memory).saturating_sub(m) - before;
        }
        if !p.kept_free[j].is_empty() {
            delta[term::KEPT_FREE_USED] = u64::from(self.tally.occupied[j] == 0);
            // A node with sharing instances counts whole: they get all its CPUs.
            delta[term::KEPT_FREE_CPUS] = match (self.tally.sharers[j], sharer) {
                (0, 1) => u64::from(p.nodes[j].cpu_count() - self.tally.used[j]),
                (0, _) => u64::from(c),
                _ => 0,
            };
        }
        let alone = u64::from(self.tally.alone_first[j]);
        let before = shared_beyond_first(alone, self.tally.occupied[j]);
        let after = shared_beyond_first(
            alone + u64::from(inst.shape.alone_first()),
            self.tally.occupied[j] + 1,
        );
        delta[term::SHARED_INSTANCES] = after - before;
        delta
    }

    /// The free node sets an instance that owns its nodes may take (from `floor` on), each
    /// with what it adds to the terms.
    fn owning_options(&self, inst: &InstanceInfo, floor: Option<usize>) -> Vec<Choice> {
        let p = self.p;
        let free: Vec<usize> = inst
            .candidates
            .iter()
            .copied()
            .filter(|&j| self.tally.occupied[j] == 0 && floor.is_none_or(|f| j > f))
            .collect();
        let mut out = Vec::new();
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
                delta[term::MEMORY_OVERFLOW] = inst.memory.saturating_sub(m);
            }
            let kept_free = set.iter().filter(|&&j| !p.kept_free[j].is_empty());
            delta[term::KEPT_FREE_USED] = kept_free.clone().count() as u64;
            delta[term::KEPT_FREE_CPUS] =
                kept_free.map(|&j| u64::from(p.nodes[j].cpu_count())).sum();
            let full = Load { used: 1, capacity: 1 };
            let empty_taken = set.len();
            out.push(Choice {
                set,
                delta,
                load_after: full,
                load_before: full,
                empty_taken,
                bound_delta: [0; term::COUNT],
            });
        }
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
            Shape::Shared(_) | Shape::Sharing { .. } => Vec::new(),
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
                    let crossings = set.iter().filter(|&&s| p.crosses_packages(s, j)).count();
                    // u64: a sum of u32 distances must not wrap whatever the table holds.
                    let distance: u64 = set.iter().map(|&s| u64::from(p.distance[s][j])).sum();
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
}

/// Raises the lowest loads (ascending, all of one capacity) with `water` single CPUs, one at
/// a time to the least loaded node: the lowest sorted load vector any placement of that many
/// CPUs can reach, since every instance brings at least one whole CPU.
fn pour_units(open: &mut [Load], water: u32) {
    let capacity = open[0].capacity;
    let mut left = u64::from(water);
    let mut level = u64::from(open[0].used);
    let mut below = 1;
    loop {
        while below < open.len() && u64::from(open[below].used) <= level {
            below += 1;
        }
        let next = open.get(below).map_or(u64::MAX, |l| u64::from(l.used));
        let raise = (next - level).min(left / below as u64);
        level += raise;
        left -= raise * below as u64;
        if level < next {
            break;
        }
    }
    // Fewer units are left than nodes at the level: one more on that many of them.
    for (k, load) in open.iter_mut().take(below).enumerate() {
        let used = level + u64::from((k as u64) < left);
        *load = Load { used: used as u32, capacity };
    }
}

/// Raises the lowest loads (ascending) to one common fraction holding `water` more CPUs:
/// fractional water-filling, the lowest sorted load vector of any fractional distribution.
fn pour_fraction(open: &mut [Load], water: u32) {
    let (mut sum_used, mut sum_capacity, mut filled) = (0u32, 0u32, 0usize);
    for (k, load) in open.iter().enumerate() {
        sum_used += load.used;
        sum_capacity += load.capacity;
        filled = k + 1;
        let level = Load { used: sum_used + water, capacity: sum_capacity };
        if open.get(k + 1).is_none_or(|next| level <= *next) {
            break;
        }
    }
    for load in &mut open[..filled] {
        *load = Load { used: sum_used + water, capacity: sum_capacity };
    }
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
    fn water_fills_the_lowest_loads_first() {
        let load = |used| Load { used, capacity: 16 };
        let mut open = vec![load(0), load(2), load(9)];
        pour_units(&mut open, 8);
        let used: Vec<u32> = open.iter().map(|l| l.used).collect();
        assert_eq!(used.iter().sum::<u32>(), 19);
        let mut sorted = used.clone();
        sorted.sort();
        assert_eq!(sorted, [5, 5, 9]);
        let mut open = vec![load(0), load(0)];
        pour_units(&mut open, 3);
        let mut used: Vec<u32> = open.iter().map(|l| l.used).collect();
        used.sort();
        assert_eq!(used, [1, 2]);
        let mut open = vec![Load { used: 0, capacity: 1 }, Load { used: 0, capacity: 3 }];
        pour_fraction(&mut open, 1);
        assert_eq!(open[0], Load { used: 1, capacity: 4 });
        assert_eq!(open[1], Load { used: 1, capacity: 4 });
    }

    #[test]
    fn combinations_and_binomials_agree() {
        assert_eq!(combinations(&[1, 3, 5, 7], 2).len() as u64, binomial(4, 2));
        assert_eq!(combinations(&[1, 3, 5], 2), vec![vec![1, 3], vec![1, 5], vec![3, 5]]);
        assert_eq!(binomial(8, 0), 1);
        assert_eq!(binomial(3, 5), 0);
        assert_eq!(binomial(256, 4), u64::MAX, "too many to enumerate");
    }
}
