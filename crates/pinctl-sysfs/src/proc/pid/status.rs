//! `/proc/PID/status` (and a thread's `task/TID/status`): what a process may use, who it runs
//! as, and its resident memory.

use pinctl_topology::{CpuSet, NodeSet};

use super::Pid;
use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::{ParseError, id_list};

/// The lines of `status` that pinctl reads; each is `None` where the file has no such line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// `Cpus_allowed_list`.
    pub cpus: Option<CpuSet>,
    /// `Mems_allowed_list`.
    pub nodes: Option<NodeSet>,
    /// `Uid:`.
    pub uids: Option<Uids>,
    /// `VmRSS` in bytes (a zombie has none).
    pub rss_bytes: Option<u64>,
}

/// The user ids of a process, from the `Uid:` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uids {
    pub real: u32,
    pub effective: u32,
    pub saved: u32,
    pub filesystem: u32,
}

/// Parses `status`.
pub fn parse(text: &str) -> Result<Status, ParseError> {
    let mut out = Status::default();
    for (i, line) in text.lines().enumerate() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let at_line = |e| ParseError { line: i + 1, ..e };
        match key {
            "Cpus_allowed_list" => out.cpus = Some(id_list(value).map_err(at_line)?),
            "Mems_allowed_list" => out.nodes = Some(id_list(value).map_err(at_line)?),
            "Uid" => {
                let bad = || ParseError::new(i + 1, line, "`Uid:` and four user ids");
                let ids: Vec<u32> = value
                    .split_whitespace()
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .map_err(|_| bad())?;
                let [real, effective, saved, filesystem] = ids[..] else { return Err(bad()) };
                out.uids = Some(Uids { real, effective, saved, filesystem });
            }
            "VmRSS" => {
                let kib =
                    value.trim().strip_suffix("kB").and_then(|k| k.trim().parse::<u64>().ok());
                let kib =
                    kib.ok_or_else(|| ParseError::new(i + 1, line, "`VmRSS:` and a size in kB"))?;
                out.rss_bytes = Some(kib * 1024);
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The `status` of `pid` under the root of `files`, `None` when it is gone.
pub fn read(
    files: &mut dyn KernelFiles,
    pid: impl Into<Pid>,
) -> Result<Option<Status>, DiscoveryError> {
    parsed(files, &pid.into().file("status"), parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_sets_uids_and_rss() {
        let text = "Name:\tcat\nUmask:\t0022\nUid:\t999\t998\t997\t996\nGid:\t1\t1\t1\t1\n\
                    VmHWM:\t  9000 kB\nVmRSS:\t  8192 kB\nCpus_allowed:\tff\n\
                    Cpus_allowed_list:\t0-7\nMems_allowed:\t00000000,00000003\n\
                    Mems_allowed_list:\t0-1\n";
        let s = parse(text).unwrap();
        assert_eq!(s.cpus.unwrap().to_string(), "0-7");
        assert_eq!(s.nodes.unwrap().to_string(), "0-1");
        let u = s.uids.unwrap();
        assert_eq!((u.real, u.effective, u.saved, u.filesystem), (999, 998, 997, 996));
        assert_eq!(s.rss_bytes, Some(8192 * 1024));
        // A zombie: no memory, no sets.
        assert_eq!(parse("Name:\tzombie\nState:\tZ (zombie)\n").unwrap(), Status::default());
        assert_eq!(parse("Name:\tx\nCpus_allowed_list:\t7-3\n").unwrap_err().line, 2);
        assert_eq!(parse("Name:\tx\nVmRSS:\tlots\n").unwrap_err().line, 2);
        assert!(parse("Uid:\t1\t2\n").is_err());
        assert!(parse("Uid:\t1\tx\t2\t3\n").is_err());
    }

    #[test]
    fn reads_the_live_process() {
        let s = read(&mut crate::FsRoot::new("/".as_ref()), Pid::Current).unwrap().unwrap();
        assert!(s.cpus.is_some() && s.nodes.is_some() && s.uids.is_some());
        assert!(s.rss_bytes.unwrap() > 0);
    }
}
