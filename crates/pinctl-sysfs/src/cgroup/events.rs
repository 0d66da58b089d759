//! `cgroup.events`: whether a cgroup (or one below it) holds a process.

use crate::error::DiscoveryError;
use crate::fsroot::KernelFiles;

/// Whether `cgroup.events` says `populated 1`.
pub fn populated(text: &str) -> bool {
    text.lines().any(|l| l.trim() == "populated 1")
}

/// Whether the cgroup at `folder` holds a process; one that is gone holds none.
pub fn read_populated(files: &mut dyn KernelFiles, folder: &str) -> Result<bool, DiscoveryError> {
    Ok(files.text(&format!("{folder}/cgroup.events"))?.is_some_and(populated))
}

#[cfg(test)]
mod tests {
    #[test]
    fn populated_or_not() {
        assert!(super::populated("populated 1\nfrozen 0\n"));
        assert!(!super::populated("populated 0\nfrozen 0\n"));
        assert!(!super::populated(""));
    }
}
