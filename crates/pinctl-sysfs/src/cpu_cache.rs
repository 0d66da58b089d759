//! A CPU's caches: `sys/devices/system/cpu/cpuN/cache/indexK/{level,type,size}`. pinctl reads
//! the size of the largest one (the last-level cache), which `pinctl probe` must measure well
//! past.

use std::path::Path;

use pinctl_topology::CpuId;

use crate::error::DiscoveryError;
use crate::fsroot::{FsRoot, parsed};

/// A cache `size` file: `32768K` (the kernel writes KiB with a `K`), or a plain byte count; the
/// one parser discovery's last-level caches use too.
pub use crate::parse::cache_size;

/// The size of CPU `cpu`'s largest data or unified cache (its last-level cache), bytes;
/// `None` when the tree under `root` has no cache folders for it. Instruction caches are left
/// out.
pub fn read_last_level_cache(root: &Path, cpu: CpuId) -> Result<Option<u64>, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    let dir = format!("sys/devices/system/cpu/cpu{cpu}/cache");
    let mut largest: Option<u64> = None;
    for index in crate::discover::numbered_folders(&mut fs, &dir, "index", u32::MAX)? {
        let here = format!("{dir}/index{index}");
        if fs.read(&format!("{here}/type"))?.is_some_and(|t| t.trim() == "Instruction") {
            continue;
        }
        if let Some(size) = parsed(&mut fs, &format!("{here}/size"), cache_size)? {
            largest = Some(largest.map_or(size, |l| l.max(size)));
        }
    }
    Ok(largest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_kib_with_a_k() {
        assert_eq!(cache_size("32768K\n"), Ok(32 << 20));
        assert_eq!(cache_size("1M"), Ok(1 << 20));
        assert_eq!(cache_size("512"), Ok(512));
        assert!(cache_size("big").is_err());
        assert!(cache_size("99999999999999999999K").is_err());
    }

    #[test]
    fn the_largest_data_cache_of_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("sys/devices/system/cpu/cpu0/cache");
        for (k, ty, size) in
            [(0, "Data", "48K"), (1, "Instruction", "99999K"), (3, "Unified", "32768K")]
        {
            let d = c.join(format!("index{k}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("type"), format!("{ty}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        }
        assert_eq!(read_last_level_cache(dir.path(), 0).unwrap(), Some(32 << 20));
        assert_eq!(read_last_level_cache(dir.path(), 1).unwrap(), None);
    }
}
