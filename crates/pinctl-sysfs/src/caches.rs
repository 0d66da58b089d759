//! The last-level cache of every online CPU, from `sys/devices/system/cpu/cpuN/cache/indexK/`
//! (`level`, `type`, `shared_cpu_list`, `size`): the CPUs that share an L3 (an EPYC's CCX, a
//! Xeon's socket), which the planner keeps an instance inside.
//!
//! Every CPU of one cache names the others in `shared_cpu_list`, so one CPU answers for all of
//! them: the files of one CPU per cache are read, not of every CPU. The index that was the last
//! level of one CPU is tried first on the next (every CPU of a machine has the same cache
//! levels), so only the first CPU's cache folder is listed.

use std::collections::BTreeMap;

use pinctl_topology::{Cache, CpuId, CpuSet, sort_caches};

use crate::error::DiscoveryError;
use crate::fsroot::{Fact, FsRoot};
use crate::parse::{self, CacheType};

const CPU_DIR: &str = "sys/devices/system/cpu";

/// The last-level cache of a CPU: which `indexK` folder holds it, and its level.
struct LastLevel {
    index: String,
    level: u8,
}

/// The last-level caches of the `online` CPUs, ascending by their lowest CPU. A CPU without
/// `cache/` (old kernels, some virtual machines) is in none; broken files are warnings.
pub(crate) fn read_caches(fs: &mut FsRoot, online: &CpuSet) -> Result<Vec<Cache>, DiscoveryError> {
    let mut caches: Vec<Cache> = Vec::new();
    let mut covered = CpuSet::new();
    // CPUs grouped by the kernel's cache `id`, where neither sharing list could be read.
    let mut by_id: BTreeMap<(u8, u32), Cache> = BTreeMap::new();
    let mut last: Option<LastLevel> = None;
    for cpu in online.iter() {
        if covered.contains(cpu) {
            continue;
        }
        let dir = format!("{CPU_DIR}/cpu{cpu}/cache");
        let found = match &last {
            Some(before) => probe(fs, cpu, &dir, before)?,
            None => None,
        };
        let found = match found {
            Some(found) => found,
            None => match scan(fs, cpu, &dir)? {
                Some(found) => found,
                None => continue,
            },
        };
        let index_dir = format!("{dir}/{}", found.index);
        let unknown = || format!("CPU {cpu}'s last-level cache is unknown");
        let shared =
            match fs.fact(&format!("{index_dir}/shared_cpu_list"), parse::id_list, || {
                format!(
                    "the CPUs sharing CPU {cpu}'s last-level cache are those `shared_cpu_map` names"
                )
            })? {
                Fact::Value(set) => Some(set),
                _ => fs
                    .fact(&format!("{index_dir}/shared_cpu_map"), parse::id_mask, unknown)?
                    .value(),
            };
        let size_bytes = fs
            .fact(&format!("{index_dir}/size"), parse::cache_size, || {
                format!("the size of CPU {cpu}'s last-level cache is unknown")
            })?
            .value();
        match shared {
            Some(shared) => {
                // A CPU shares its own cache; one already placed stays in its first cache.
                let mut cpus = shared.intersection(online).difference(&covered);
                cpus.insert(cpu);
                covered = covered.union(&cpus);
                caches.push(Cache { level: found.level, cpus, size_bytes });
            }
            None => {
                if let Fact::Value(id) =
                    fs.fact(&format!("{index_dir}/id"), parse::uint, unknown)?
                {
                    let cache = by_id.entry((found.level, id)).or_insert_with(|| Cache {
                        level: found.level,
                        cpus: CpuSet::new(),
                        size_bytes,
                    });
                    cache.cpus.insert(cpu);
                    covered.insert(cpu);
                }
            }
        }
        last = Some(found);
    }
    caches.extend(by_id.into_values());
    sort_caches(&mut caches);
    Ok(caches)
}

/// Whether `cpu`'s folder `before.index` is a data or unified cache of `before.level`: the
/// last level of the CPU read before, so most likely this one's too.
fn probe(
    fs: &mut FsRoot,
    cpu: CpuId,
    dir: &str,
    before: &LastLevel,
) -> Result<Option<LastLevel>, DiscoveryError> {
    Ok(match cache_index(fs, cpu, &format!("{dir}/{}", before.index))? {
        Some(level) if level == before.level => {
            Some(LastLevel { index: before.index.clone(), level })
        }
        _ => None,
    })
}

/// The highest-level data or unified cache among `cpu`'s `indexK` folders. The kernel numbers
/// a CPU's caches by level (`index0` the L1 data cache, `index1` the L1 instruction cache, ...,
/// the last level last, on x86 from CPUID leaf 4 and on arm64 from PPTT or the device tree),
/// so the folders are read from the highest number down and the first that holds data is the
/// last level: two reads where reading every folder would take eight.
fn scan(fs: &mut FsRoot, cpu: CpuId, dir: &str) -> Result<Option<LastLevel>, DiscoveryError> {
    let Some(names) = fs.list(dir)? else { return Ok(None) };
    let mut indexes: Vec<(u32, String)> = names
        .into_iter()
        .filter_map(|name| {
            let k = name.strip_prefix("index")?.parse::<u32>().ok()?;
            Some((k, name))
        })
        .collect();
    indexes.sort_unstable_by(|a, b| b.cmp(a));
    for (_, name) in indexes {
        if let Some(level) = cache_index(fs, cpu, &format!("{dir}/{name}"))? {
            return Ok(Some(LastLevel { index: name, level }));
        }
    }
    Ok(None)
}

/// The level of the cache in `index_dir` when it holds data (unified or data only); `None`
/// for an instruction cache, or when its files are missing or broken.
fn cache_index(fs: &mut FsRoot, cpu: CpuId, index_dir: &str) -> Result<Option<u8>, DiscoveryError> {
    let skipped = || format!("`{index_dir}` is not taken for CPU {cpu}'s last-level cache");
    let level = match fs.fact(&format!("{index_dir}/level"), parse::uint, skipped)? {
        Fact::Value(level) => match u8::try_from(level) {
            Ok(level) if level > 0 => level,
            _ => {
                fs.warn(&format!("{index_dir}/level"), format!("says level `{level}`"), skipped);
                return Ok(None);
            }
        },
        _ => return Ok(None),
    };
    let kind = match fs.fact(&format!("{index_dir}/type"), parse::cache_type, skipped)? {
        Fact::Value(kind) => kind,
        // Without a type (some old dumps) a cache holds data unless it says otherwise.
        Fact::Absent => CacheType::Unified,
        Fact::Broken => return Ok(None),
    };
    Ok((kind != CacheType::Instruction).then_some(level))
}
