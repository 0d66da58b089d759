//! `cgroup.controllers`: the controllers a cgroup's children may enable.

use crate::error::DiscoveryError;
use crate::fsroot::KernelFiles;

/// Whether `controller` is among those of a `cgroup.controllers` text.
pub fn has(text: &str, controller: &str) -> bool {
    text.split_whitespace().any(|c| c == controller)
}

/// Whether the cgroup at `folder` (relative to the root of `files`) offers `controller`; a
/// missing file (no v2 hierarchy there) offers none.
pub fn read_has(
    files: &mut dyn KernelFiles,
    folder: &str,
    controller: &str,
) -> Result<bool, DiscoveryError> {
    Ok(files.text(&format!("{folder}/cgroup.controllers"))?.is_some_and(|t| has(t, controller)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn controllers() {
        assert!(super::has("cpuset cpu io memory pids\n", "memory"));
        assert!(!super::has("cpuset cpu io memory_x pids\n", "memory"));
    }
}
