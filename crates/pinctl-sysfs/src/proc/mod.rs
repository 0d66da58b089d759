//! The files of `/proc` pinctl reads for what runs (a process's, the kernel's counters), one
//! module per file as procfs-core lays them out: each has a parser of the file's text, tested
//! on strings, and a bounded read through [`KernelFiles`] under a
//! root, so a captured tree stands in for the machine. (`/proc/meminfo` has the format of a
//! node's `meminfo`: [`crate::node::meminfo`].)

pub mod interrupts;
pub mod pid;
pub mod pinned;
pub mod uptime;
pub mod vmstat;

use crate::error::DiscoveryError;
use crate::fsroot::KernelFiles;

/// The processes under the root of `files` (the numeric folders of `/proc`), ascending.
pub fn pids(files: &mut dyn KernelFiles) -> Result<Vec<u32>, DiscoveryError> {
    Ok(pid::task::parse(&files.names("proc")?.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_one_of_the_machines() {
        let pids = super::pids(&mut crate::FsRoot::new("/".as_ref())).unwrap();
        assert!(pids.contains(&std::process::id()) && pids.is_sorted(), "{pids:?}");
    }
}
