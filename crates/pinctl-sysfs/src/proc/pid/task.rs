//! `/proc/PID/task`: the threads of a process.

use crate::error::DiscoveryError;
use crate::fsroot::KernelFiles;

/// The ids among the names of a `task` folder (or of `/proc`), sorted.
pub fn parse(names: &[String]) -> Vec<u32> {
    let mut tids: Vec<u32> = names.iter().filter_map(|n| n.parse().ok()).collect();
    tids.sort_unstable();
    tids
}

/// The threads of process `pid` under the root of `files`, sorted; `None` when it is gone.
pub fn read(files: &mut dyn KernelFiles, pid: u32) -> Result<Option<Vec<u32>>, DiscoveryError> {
    Ok(files.names(&format!("proc/{pid}/task"))?.map(|names| parse(&names)))
}

/// Whether process `pid` exists under the root of `files` (a zombie does, until it is reaped).
pub fn exists(files: &mut dyn KernelFiles, pid: u32) -> bool {
    files.is_dir(&format!("proc/{pid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_of_this_process() {
        assert_eq!(parse(&["12".into(), "3".into(), ".".into()]), [3, 12]);
        let mut fs = crate::FsRoot::new("/".as_ref());
        let me = std::process::id();
        assert!(read(&mut fs, me).unwrap().unwrap().contains(&me));
        assert!(exists(&mut fs, me));
        assert_eq!(read(&mut fs, u32::MAX).unwrap(), None);
        assert!(!exists(&mut fs, u32::MAX));
    }
}
