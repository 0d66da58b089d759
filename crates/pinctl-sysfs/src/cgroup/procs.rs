//! `cgroup.procs`: the processes in a cgroup.

use crate::error::DiscoveryError;
use crate::fsroot::KernelFiles;

/// The PIDs of a `cgroup.procs` (one per line), in the file's order; lines that are not a PID
/// are left out.
pub fn parse(text: &str) -> Vec<u32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).filter(|&p| p > 0).collect()
}

/// The processes in the cgroup at `folder`, `None` when it is gone.
pub fn read(files: &mut dyn KernelFiles, folder: &str) -> Result<Option<Vec<u32>>, DiscoveryError> {
    Ok(files.text(&format!("{folder}/cgroup.procs"))?.map(parse))
}

#[cfg(test)]
mod tests {
    #[test]
    fn pids_and_garbage() {
        assert_eq!(super::parse("12\n13\n\nx\n-1\n0\n"), [12, 13]);
        assert!(super::parse("").is_empty());
    }
}
