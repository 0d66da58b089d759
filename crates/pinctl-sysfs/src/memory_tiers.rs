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

/// The N of a `memory_tierN` folder name, spelled as the kernel spells it
/// ([`parse::folder_number`]).
pub fn tier_of_folder(name: &str) -> Option<u32> {
    parse::folder_number(name, "memory_tier")?.parse().ok()
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
        assert_eq!(tier_of_folder("memory_tier0"), Some(0));
    }

    /// Issue 26: `memory_tier04` beside `memory_tier4` listed tier 4 twice (both read
    /// `memory_tier4/nodelist`), and the snapshot of it failed to read back. The kernel writes
    /// no leading zero: such a folder is not a tier.
    #[test]
    fn a_tier_spelled_with_a_leading_zero_is_not_a_second_tier() {
        assert_eq!(tier_of_folder("memory_tier04"), None);
        assert_eq!(tier_of_folder("memory_tier+4"), None);
        let dir = tempfile::tempdir().unwrap();
        for name in ["memory_tier4", "memory_tier04", "memory_tier22"] {
            let folder = dir.path().join(TIERS_DIR).join(name);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("nodelist"), "0-1\n").unwrap();
        }
        let mut fs = FsRoot::new(dir.path());
        let tiers = read_memory_tiers(&mut fs).unwrap();
        let numbers: Vec<u32> = tiers.iter().map(|t| t.tier).collect();
        assert_eq!(numbers, [4, 22]);
    }
}
