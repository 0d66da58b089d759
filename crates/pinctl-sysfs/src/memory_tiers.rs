//! The kernel's memory tiers (Linux 6.1+): `sys/devices/virtual/memory_tiering/memory_tierN/
//! nodelist` lists the nodes whose memory the kernel ranks alike, N growing with the memory's
//! abstract distance (ordinary DRAM in tier 4, slower CXL or PMEM memory above). The kernel
//! ranks by what HMAT says where the firmware has one; demotion (`numa/demotion_enabled`)
//! moves cold pages down the tiers.

use pinctl_topology::MemoryTier;

use crate::error::DiscoveryError;
use crate::fsroot::{Fact, FsRoot};
use crate::parse;

const TIERS_DIR: &str = "sys/devices/virtual/memory_tiering";

/// The N of a `memory_tierN` folder name.
pub fn tier_of_folder(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("memory_tier")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Every tier with its nodes, lowest (fastest) first; none without the folder. A broken
/// `nodelist` costs its tier, with a warning.
pub(crate) fn read_memory_tiers(fs: &mut FsRoot) -> Result<Vec<MemoryTier>, DiscoveryError> {
    let Some(names) = fs.list(TIERS_DIR)? else {
        return Ok(Vec::new());
    };
    let mut tiers = Vec::new();
    for tier in names.iter().filter_map(|n| tier_of_folder(n)) {
        let rel = format!("{TIERS_DIR}/memory_tier{tier}/nodelist");
        let fact = fs.fact(&rel, parse::node_list, || format!("memory tier {tier} is unknown"))?;
        if let Fact::Value(nodes) = fact {
            tiers.push(MemoryTier { tier, nodes });
        }
    }
    tiers.sort_by_key(|t| t.tier);
    Ok(tiers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_folders_are_numbered() {
        assert_eq!(tier_of_folder("memory_tier4"), Some(4));
        assert_eq!(tier_of_folder("memory_tier22"), Some(22));
        assert_eq!(tier_of_folder("memory_tier"), None);
        assert_eq!(tier_of_folder("memory_tier4x"), None);
        assert_eq!(tier_of_folder("power"), None);
        assert_eq!(tier_of_folder("memory_tier99999999999"), None);
    }
}
