//! `/proc/PID/cgroup`: the cgroup of a process in each hierarchy (`5:cpuset:/machine.slice`
//! for v1, `0::/user.slice` for v2).

use super::Pid;
use crate::error::DiscoveryError;
use crate::fsroot::KernelFiles;

/// The cgroup for one hierarchy: v1's that holds `controller`, or v2's for `None`.
pub fn path<'a>(text: &'a str, controller: Option<&str>) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        let hit = match controller {
            None => ctrls.is_empty(),
            Some(c) => ctrls.split(',').any(|x| x == c),
        };
        hit.then_some(path)
    })
}

/// The cgroup v2 path of `pid` (`/pinctl/db/redis-0`) under the root of `files`; `None` when
/// the process is gone or in no v2 cgroup.
pub fn read_v2(
    files: &mut dyn KernelFiles,
    pid: impl Into<Pid>,
) -> Result<Option<String>, DiscoveryError> {
    let text = files.text(&pid.into().file("cgroup"))?;
    Ok(text.and_then(|t| path(t, None)).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_paths() {
        let cg = "11:freezer:/\n9:cpuset,cpu:/dummy\n0::/user.slice/x.scope\n";
        assert_eq!(path(cg, Some("cpuset")), Some("/dummy"));
        assert_eq!(path(cg, None), Some("/user.slice/x.scope"));
        assert_eq!(path(cg, Some("memory")), None);
        let mut fs = crate::FsRoot::new("/".as_ref());
        assert!(read_v2(&mut fs, Pid::Current).unwrap().is_some_and(|p| p.starts_with('/')));
    }
}
