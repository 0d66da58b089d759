//! `/proc/PID/comm`: the name a process runs as (at most 15 bytes of its program's name).

use super::Pid;
use crate::error::DiscoveryError;
use crate::fsroot::KernelFiles;

/// The `comm` of `pid` under the root of `files`, `None` when it is gone.
pub fn read(
    files: &mut dyn KernelFiles,
    pid: impl Into<Pid>,
) -> Result<Option<String>, DiscoveryError> {
    Ok(files.text(&pid.into().file("comm"))?.map(|t| t.trim_end_matches('\n').to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_of_this_process() {
        let mut fs = crate::FsRoot::new("/".as_ref());
        let me = read(&mut fs, Pid::Current).unwrap().unwrap();
        let exe = std::env::current_exe().unwrap();
        let name = exe.file_name().unwrap().to_string_lossy();
        assert!(name.starts_with(&me), "{me} {name}");
    }
}
