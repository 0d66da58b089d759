//! Last-level caches: which CPUs share one. Inside a NUMA node the CPUs are not all alike: on
//! an AMD EPYC a node holds several CCDs (or CCXs), each with its own L3, and an instance whose
//! CPUs straddle two of them loses much of what local memory buys (../shared/DOMAIN.md, "Caches
//! inside a node"). Discovery fills [`crate::Topology::caches`]; the planner packs instances
//! into as few of them as it can.

use serde::{Deserialize, Serialize};

use crate::{CpuId, CpuSet};

/// One last-level cache and the CPUs that share it: an L3 on x86 servers (an EPYC's CCX), the
/// L2 where that is the last level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Cache {
    /// Its level: 3 for an L3.
    pub level: u8,
    /// The online CPUs that share it.
    pub cpus: CpuSet,
    /// Its size in bytes, when the source says.
    #[serde(default)]
    pub size_bytes: Option<u64>,
}

/// The caches in the model's order: ascending by their lowest CPU (an empty one last).
pub fn sort_caches(caches: &mut [Cache]) {
    caches.sort_by_key(|c| (c.cpus.first().unwrap_or(CpuId::MAX), c.level));
}

/// The last-level caches among `caches` (every data or unified cache of a source, any level):
/// each CPU in the highest-level one that holds it, and a cache listed with the CPUs for which
/// it is the last level. What the hwloc readers keep of hwloc's cache objects.
pub fn last_level_caches(mut caches: Vec<Cache>) -> Vec<Cache> {
    caches.sort_by_key(|c| std::cmp::Reverse(c.level));
    let mut covered = CpuSet::new();
    let mut out = Vec::new();
    for cache in caches {
        let cpus = cache.cpus.difference(&covered);
        if cpus.is_empty() {
            continue;
        }
        covered = covered.union(&cpus);
        out.push(Cache { cpus, ..cache });
    }
    sort_caches(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(level: u8, cpus: &str) -> Cache {
        Cache { level, cpus: cpus.parse().unwrap(), size_bytes: None }
    }

    #[test]
    fn each_cpu_keeps_its_highest_level_cache() {
        let all = vec![
            cache(1, "0"),
            cache(2, "0-1"),
            cache(3, "4-7"),
            cache(2, "2-3"),
            cache(3, "0-3"),
            cache(2, "8-9"),
            cache(3, "0"),
        ];
        let llc = last_level_caches(all);
        // CPUs 8-9 have no L3: their L2 is their last level.
        assert_eq!(llc, vec![cache(3, "0-3"), cache(3, "4-7"), cache(2, "8-9")]);
    }
}
