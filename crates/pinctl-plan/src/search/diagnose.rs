//! Why an instance has no option in a partial plan: the message of `PlanError` when the search
//! finds no plan at all, naming what each kind of instance needed and who holds it.

use super::Search;
use crate::problem::{InstanceInfo, Shape};

impl Search<'_> {
    /// Why instance `i` has no option in the current partial plan.
    pub(super) fn diagnose(&self, i: usize) -> String {
        let p = self.p;
        let inst = &p.instances[i];
        let total = p.nodes.len();
        let candidates = inst.candidates.len();
        let taken_by = self.taken_by(inst);
        let excluded = total - candidates;
        let excluded_note = if excluded > 0 {
            format!(", {excluded} not available to it (only-nodes, cpuset, memory-only)")
        } else {
            String::new()
        };
        match inst.shape {
            Shape::Whole(k) => {
                let free = inst.candidates.iter().filter(|&&j| self.tally.occupied[j] == 0).count();
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
                let free: Vec<usize> = inst
                    .candidates
                    .iter()
                    .copied()
                    .filter(|&j| self.tally.occupied[j] == 0)
                    .collect();
                let cpus: u32 = free.iter().map(|&j| p.nodes[j].cpu_count()).sum();
                format!(
                    "needs {c} CPUs on whole nodes (more than any node has): {} free node{} with {cpus} CPUs{}{excluded_note}",
                    free.len(),
                    crate::plural(free.len()),
                    list_names(&taken_by),
                )
            }
            Shape::Sharing { .. } => self.why_no_node_to_share(inst, &taken_by, &excluded_note),
            Shape::Shared(c) => self.why_no_cpus(inst, c, &taken_by),
        }
    }

    /// The instances placed on any node `inst` may use, in plan order.
    fn taken_by(&self, inst: &InstanceInfo) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .assignment
            .iter()
            .enumerate()
            .filter_map(|(k, s)| s.as_ref().map(|s| (k, s)))
            .filter(|(_, s)| s.iter().any(|j| inst.is_candidate[*j]))
            .map(|(k, _)| self.p.instances[k].name.as_str())
            .collect();
        names.dedup();
        names
    }

    /// Why a sharing instance found no node: owned by whole-node instances, or without a CPU
    /// (or, under bind, memory) left.
    fn why_no_node_to_share(
        &self,
        inst: &InstanceInfo,
        taken_by: &[&str],
        excluded_note: &str,
    ) -> String {
        let candidates = inst.candidates.len();
        let owned = inst.candidates.iter().filter(|&&j| self.tally.owner[j]).count();
        let full = candidates - owned;
        format!(
            "needs a node to share: {owned} of its {candidates} node{} owned by whole-node instances{}{}{excluded_note}",
            crate::plural(candidates),
            list_names(taken_by),
            match (full, inst.binds()) {
                (0, _) => String::new(),
                (_, false) => {
                    format!(", the other {full} without a CPU that no `cpus = N` instance holds")
                }
                (_, true) => format!(
                    ", the other {full} without a CPU that no `cpus = N` instance holds or without room for {} under bind",
                    crate::format_bytes(inst.memory)
                ),
            }
        )
    }

    /// Why a `cpus = N` instance found no node with `c` CPUs free: the most any node has, the
    /// owners and sharers in the way, and whether overcommit would help.
    fn why_no_cpus(&self, inst: &InstanceInfo, c: u32, taken_by: &[&str]) -> String {
        let p = self.p;
        let candidates = inst.candidates.len();
        let most = inst
            .candidates
            .iter()
            .filter(|&&j| !self.tally.owner[j])
            .map(|&j| p.cpu_limit(j, self.tally.sharers[j]).saturating_sub(self.tally.used[j]))
            .max()
            .unwrap_or(0);
        let owned = inst.candidates.iter().filter(|&&j| self.tally.owner[j]).count();
        let owns =
            |name: &&str| p.instances.iter().any(|o| o.name == *name && o.shape.owns_nodes());
        let owners: Vec<&str> = taken_by.iter().copied().filter(owns).collect();
        let sharers: Vec<&str> =
            taken_by.iter().copied().filter(|name| !owners.contains(name)).collect();
        let shared_by = if sharers.is_empty() {
            String::new()
        } else {
            format!("; the rest is shared{}", list_names(&sharers))
        };
        let overcommit = if p.overcommit == pinctl_config::Overcommit::NONE {
            "; `cpu-overcommit` in `[host]` would let `cpus = N` instances share CPUs"
        } else {
            ""
        };
        format!(
            "needs {c} CPU{} on one node: the most free on a node it may use is {most}; {owned} of its {candidates} node{} owned by whole-node instances{}{shared_by}{overcommit}",
            crate::plural(c as usize),
            crate::plural(candidates),
            list_names(&owners),
        )
    }
}

/// ` (by a, b)`: who holds what an instance needed, the first five named.
fn list_names(names: &[&str]) -> String {
    const SHOWN: usize = 5;
    match names.len() {
        0 => String::new(),
        n if n <= SHOWN => format!(" (by {})", names.join(", ")),
        n => format!(" (by {} and {} more)", names[..SHOWN].join(", "), n - SHOWN),
    }
}
