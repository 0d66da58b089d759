//! Which CPUs of a node an instance gets: inside as few last-level caches as it fits in, whole
//! cores first, so that two instances sharing a node share neither an L3 nor a core's
//! execution units when they can avoid it; and, on an overcommitted node, CPUs given to the
//! fewest instances first.

use std::collections::BTreeMap;

use pinctl_topology::{CpuId, CpuSet, Topology};

/// The CPUs of `usable` grouped by core (package and core id as the topology reports them),
/// cores ordered by their lowest CPU id. A CPU without package or core information is a core
/// of its own.
pub(crate) fn cores(topology: &Topology, usable: &CpuSet) -> Vec<Vec<CpuId>> {
    let mut by_core: BTreeMap<(u32, u32), Vec<CpuId>> = BTreeMap::new();
    let mut alone = Vec::new();
    for id in usable.iter() {
        match topology.cpu(id).and_then(|c| Some((c.package?, c.core?))) {
            Some(key) => by_core.entry(key).or_default().push(id),
            None => alone.push(vec![id]),
        }
    }
    let mut out: Vec<Vec<CpuId>> = by_core.into_values().chain(alone).collect();
    out.sort_by_key(|core| core[0]);
    out
}

/// The last-level cache group of each of `cores` (as [`cores`] gives them): cores whose first
/// CPU shares one cache get one group, numbered in the order of the cores; cores of CPUs without
/// cache facts form one group of their own. A topology without caches has one group per node.
pub(crate) fn cache_groups(topology: &Topology, cores: &[Vec<CpuId>]) -> Vec<usize> {
    let mut numbers: Vec<Option<usize>> = Vec::new();
    cores
        .iter()
        .map(|core| {
            let cache = topology.cache_of(core[0]);
            match numbers.iter().position(|&n| n == cache) {
                Some(g) => g,
                None => {
                    numbers.push(cache);
                    numbers.len() - 1
                }
            }
        })
        .collect()
}

/// The CPUs of one node while they are handed out: how many instances each was given to, per
/// core, cores grouped by last-level cache.
#[derive(Debug, Clone)]
pub(crate) struct NodeCpus {
    cores: Vec<Vec<CpuId>>,
    /// The cache group of each core ([`cache_groups`]).
    group: Vec<usize>,
    groups: usize,
    /// How many instances each CPU of each core was given to.
    uses: Vec<Vec<u32>>,
    /// The most instances `claim` lets one CPU carry: 1, or the overcommit ratio rounded up.
    max_uses: u32,
}

impl NodeCpus {
    pub(crate) fn new(cores: &[Vec<CpuId>], group: &[usize], max_uses: u32) -> NodeCpus {
        NodeCpus {
            cores: cores.to_vec(),
            group: group.to_vec(),
            groups: group.iter().max().map_or(0, |g| g + 1),
            uses: cores.iter().map(|c| vec![0; c.len()]).collect(),
            max_uses: max_uses.max(1),
        }
    }

    /// Takes exactly `cpus` when every one of them is a CPU of this node that can carry one more
    /// instance (an instance keeping the CPUs it runs on); takes nothing otherwise.
    pub(crate) fn claim(&mut self, cpus: &CpuSet) -> bool {
        let mut found = 0;
        for (core, uses) in self.cores.iter().zip(&self.uses) {
            for (cpu, &n) in core.iter().zip(uses) {
                if cpus.contains(*cpu) {
                    if n >= self.max_uses {
                        return false;
                    }
                    found += 1;
                }
            }
        }
        if found != cpus.len() {
            return false;
        }
        for (core, uses) in self.cores.iter().zip(&mut self.uses) {
            for (cpu, n) in core.iter().zip(uses) {
                if cpus.contains(*cpu) {
                    *n += 1;
                }
            }
        }
        true
    }

    /// Takes `count` different CPUs (fewer only when the node has fewer that may carry one more
    /// instance), those given to the fewest instances first, so that an overcommitted node gives each CPU to as few instances
    /// as it can. Among CPUs given equally often: whole last-level caches that the count fills
    /// (lowest first); then the rest inside the one cache with the most such CPUs that holds
    /// it (so instances sharing a node spread over its caches), or over the fewest caches,
    /// fullest first, when none does; inside a cache, whole cores first ([`Self::take_in`]).
    pub(crate) fn take(&mut self, count: u32) -> CpuSet {
        let total: usize = self.cores.iter().map(Vec::len).sum();
        let mut want = (count as usize).min(total);
        let mut out = CpuSet::new();
        while want > 0 {
            let level = self
                .positions()
                .filter(|&(i, k)| !out.contains(self.cores[i][k]))
                .map(|(i, k)| self.uses[i][k])
                .min()
                .expect("fewer CPUs taken than the node has");
            if level >= self.max_uses {
                break;
            }
            let got = self.take_at(level, want, &out);
            want -= got.len();
            out = out.union(&got);
        }
        out
    }

    fn positions(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.cores.iter().enumerate().flat_map(|(i, c)| (0..c.len()).map(move |k| (i, k)))
    }

    /// Whether CPU `k` of core `i` is free at `level` (given to `level` instances) and not
    /// among `taken`.
    fn free(&self, i: usize, k: usize, level: u32, taken: &CpuSet) -> bool {
        self.uses[i][k] == level && !taken.contains(self.cores[i][k])
    }

    fn free_in_core(&self, i: usize, level: u32, taken: &CpuSet) -> usize {
        (0..self.cores[i].len()).filter(|&k| self.free(i, k, level, taken)).count()
    }

    /// Takes up to `want` CPUs free at `level`, by cache as [`Self::take`] says.
    fn take_at(&mut self, level: u32, want: usize, taken: &CpuSet) -> CpuSet {
        let mut free = vec![0usize; self.groups];
        let mut whole = vec![true; self.groups];
        for i in 0..self.cores.len() {
            let n = self.free_in_core(i, level, taken);
            free[self.group[i]] += n;
            whole[self.group[i]] &= n == self.cores[i].len();
        }
        let mut want = want;
        let mut out = CpuSet::new();
        for g in 0..self.groups {
            if whole[g] && free[g] > 0 && free[g] <= want {
                let got = self.take_in(g, free[g], level, taken);
                want -= got.len();
                free[g] = 0;
                out = out.union(&got);
            }
        }
        if want == 0 {
            return out;
        }
        let mut order: Vec<usize> = (0..self.groups).filter(|&g| free[g] > 0).collect();
        order.sort_by_key(|&g| (std::cmp::Reverse(free[g]), g));
        if let Some(&g) = order.iter().find(|&&g| free[g] >= want) {
            let got = self.take_in(g, want, level, &taken.union(&out));
            return out.union(&got);
        }
        for g in order {
            if want == 0 {
                break;
            }
            let got = self.take_in(g, want.min(free[g]), level, &taken.union(&out));
            want -= got.len();
            out = out.union(&got);
        }
        out
    }

    /// Takes `want` CPUs free at `level` among the cores of cache group `g`: cores free whole
    /// that fit entirely (lowest first), then the free CPUs of cores already split, then part
    /// of the lowest core free whole.
    fn take_in(&mut self, g: usize, want: usize, level: u32, taken: &CpuSet) -> CpuSet {
        let mut want = want;
        let mut out = CpuSet::new();
        let cores: Vec<usize> = (0..self.cores.len()).filter(|&i| self.group[i] == g).collect();
        let whole: Vec<bool> = cores
            .iter()
            .map(|&i| self.free_in_core(i, level, taken) == self.cores[i].len())
            .collect();
        for (&i, &is_whole) in cores.iter().zip(&whole) {
            if want > 0 && is_whole && self.cores[i].len() <= want {
                want -= self.cores[i].len();
                self.give(i, self.cores[i].len(), level, taken, &mut out);
            }
        }
        for pass_split_first in [true, false] {
            for (&i, &is_whole) in cores.iter().zip(&whole) {
                if want == 0 {
                    break;
                }
                if is_whole == pass_split_first {
                    continue;
                }
                let before = out.len();
                self.give(i, want, level, taken, &mut out);
                want -= out.len() - before;
            }
        }
        out
    }

    /// Gives up to `n` of core `i`'s CPUs free at `level` (lowest first) to the instance.
    fn give(&mut self, i: usize, n: usize, level: u32, taken: &CpuSet, out: &mut CpuSet) {
        let mut left = n;
        for k in 0..self.cores[i].len() {
            if left == 0 {
                break;
            }
            let cpu = self.cores[i][k];
            if self.uses[i][k] == level && !taken.contains(cpu) && !out.contains(cpu) {
                self.uses[i][k] += 1;
                out.insert(cpu);
                left -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smt_node() -> NodeCpus {
        // Four cores, siblings i and i+32 (the E5-2682 v4 numbering), one L3.
        NodeCpus::new(&[vec![0, 32], vec![1, 33], vec![2, 34], vec![3, 35]], &[0; 4], 1)
    }

    /// Four L3s of two cores each, siblings i and i+8 (an EPYC CCX numbering, scaled down).
    fn ccx_node(max_uses: u32) -> NodeCpus {
        let cores: Vec<Vec<CpuId>> = (0..8).map(|c| vec![c, c + 8]).collect();
        let groups: Vec<usize> = (0..8).map(|c| c / 2).collect();
        NodeCpus::new(&cores, &groups, max_uses)
    }

    #[test]
    fn whole_caches_first_then_one_cache_spreading_instances_over_them() {
        let mut node = ccx_node(1);
        assert_eq!(node.take(8).to_string(), "0-3,8-11", "two whole L3s");
        assert_eq!(node.take(2).to_string(), "4,12", "a whole core of the next L3");
        // Not the rest of that L3: the one with the most free CPUs that holds all four.
        assert_eq!(node.take(4).to_string(), "6-7,14-15");
        assert_eq!(node.take(2).to_string(), "5,13", "the only L3 with room left");
        assert_eq!(node.take(1).to_string(), "", "the node is full");
    }

    #[test]
    fn an_instance_larger_than_what_any_cache_has_left_takes_the_fewest() {
        let mut node = ccx_node(1);
        assert_eq!(node.take(3).to_string(), "0-1,8", "L3 0");
        assert_eq!(node.take(3).to_string(), "2-3,10", "L3 1: the first with the most room");
        // 6 CPUs: no L3 has 6 free. A whole one (4 CPUs), then a whole core of the next whole
        // one, not the single CPUs left in L3s 0 and 1.
        assert_eq!(node.take(6).to_string(), "4-6,12-14", "one whole L3, then a core of another");
        assert_eq!(node.take(4).to_string(), "7,9,11,15", "what is left, over three L3s");
    }

    #[test]
    fn overcommitted_cpus_are_given_to_the_fewest_instances_first() {
        // Two CPUs (one core), two instances per CPU allowed: four `cpus = 1` instances.
        let mut node = NodeCpus::new(&[vec![0, 1]], &[0], 2);
        let got: Vec<String> = (0..4).map(|_| node.take(1).to_string()).collect();
        assert_eq!(got, ["0", "1", "0", "1"]);
        let mut node = ccx_node(2);
        assert_eq!(node.take(16).len(), 16);
        assert_eq!(node.take(3).to_string(), "0-1,8", "second round, same order");
        // An instance never gets one CPU twice, even across rounds.
        let mut node = NodeCpus::new(&[vec![0, 1]], &[0], 2);
        assert_eq!(node.take(1).to_string(), "0");
        assert_eq!(node.take(2).to_string(), "0-1");
        assert!(node.claim(&"1".parse().unwrap()), "CPU 1 carries one instance, may carry two");
        assert!(!node.claim(&"0".parse().unwrap()), "CPU 0 carries two already");
    }

    #[test]
    fn whole_cores_first() {
        let mut node = smt_node();
        assert_eq!(node.take(4).to_string(), "0-1,32-33");
        assert_eq!(node.take(3).to_string(), "2-3,34", "a whole core, then half of the next");
        assert_eq!(node.take(2).to_string(), "35", "only one CPU left");
    }

    #[test]
    fn claimed_cpus_leave_their_cores_split() {
        let mut node = smt_node();
        assert!(node.claim(&"1,33".parse().unwrap()), "a whole core");
        assert!(node.claim(&"2".parse().unwrap()), "half a core");
        assert!(!node.claim(&"2-3".parse().unwrap()), "2 is taken: nothing is claimed");
        assert!(node.claim(&"3".parse().unwrap()), "3 is still free");
        assert!(!node.claim(&"3".parse().unwrap()), "3 is taken now");
        assert!(!node.claim(&"7".parse().unwrap()), "not a CPU of this node");
        // Core 0 is untouched and goes first; then 34 and 35, the rest of the split cores.
        assert_eq!(node.take(5).to_string(), "0,32,34-35");
    }

    #[test]
    fn split_cores_are_used_before_untouched_ones() {
        let mut node = smt_node();
        assert_eq!(node.take(1).to_string(), "0");
        assert_eq!(node.take(3).to_string(), "1,32-33", "a whole core, then the split one");
        assert_eq!(node.take(4).to_string(), "2-3,34-35");
    }
}
