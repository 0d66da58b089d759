//! Which CPUs of a node an instance gets: whole cores first, so that two instances sharing a
//! node do not share a core's execution units when they can avoid it.

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

/// Free CPUs of one node while CPUs are handed out, per core.
#[derive(Debug, Clone)]
pub(crate) struct NodeCpus {
    /// Free CPUs of each core; `whole[i]` says whether core `i` is still untouched.
    free: Vec<Vec<CpuId>>,
    whole: Vec<bool>,
}

impl NodeCpus {
    pub(crate) fn new(cores: &[Vec<CpuId>]) -> NodeCpus {
        NodeCpus { free: cores.to_vec(), whole: vec![true; cores.len()] }
    }

    /// Takes exactly `cpus` when every one of them is still free here (an instance keeping the
    /// CPUs it runs on), leaving the cores it touches split; takes nothing otherwise.
    pub(crate) fn claim(&mut self, cpus: &CpuSet) -> bool {
        let free = self.free.iter().flatten().filter(|c| cpus.contains(**c)).count();
        if free != cpus.len() {
            return false;
        }
        for (core, whole) in self.free.iter_mut().zip(&mut self.whole) {
            let before = core.len();
            core.retain(|c| !cpus.contains(*c));
            if core.len() != before {
                *whole = false;
            }
        }
        true
    }

    /// Takes `count` CPUs: untouched cores that fit entirely first (lowest first), then CPUs
    /// of cores already split, then the rest of the lowest untouched core. Returns fewer than
    /// `count` only when the node has fewer free CPUs.
    pub(crate) fn take(&mut self, count: u32) -> CpuSet {
        let mut want = count as usize;
        let mut out = CpuSet::new();
        for i in 0..self.free.len() {
            if want == 0 {
                break;
            }
            if self.whole[i] && !self.free[i].is_empty() && self.free[i].len() <= want {
                want -= self.free[i].len();
                out.extend(self.free[i].drain(..));
            }
        }
        for pass_split_first in [true, false] {
            for i in 0..self.free.len() {
                if want == 0 {
                    break;
                }
                if self.whole[i] == pass_split_first || self.free[i].is_empty() {
                    continue;
                }
                let n = want.min(self.free[i].len());
                out.extend(self.free[i].drain(..n));
                self.whole[i] = false;
                want -= n;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smt_node() -> NodeCpus {
        // Four cores, siblings i and i+32 (the E5-2682 v4 numbering).
        NodeCpus::new(&[vec![0, 32], vec![1, 33], vec![2, 34], vec![3, 35]])
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
        assert!(!node.claim(&"7".parse().unwrap()), "not a CPU of this node");
        // Core 0 and 3 are untouched and go first; then 34, the rest of the split core 2.
        assert_eq!(node.take(5).to_string(), "0,3,32,34-35");
    }

    #[test]
    fn split_cores_are_used_before_untouched_ones() {
        let mut node = smt_node();
        assert_eq!(node.take(1).to_string(), "0");
        assert_eq!(node.take(3).to_string(), "1,32-33", "a whole core, then the split one");
        assert_eq!(node.take(4).to_string(), "2-3,34-35");
    }
}
