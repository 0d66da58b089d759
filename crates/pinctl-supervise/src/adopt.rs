//! The adoption rule, pure: is the process a state file recorded still the instance it was?
//! A PID is reused; (PID, start time) is not, and the cgroup or the command line confirms it.
//! A process that fails the test is never signalled.

use serde::{Deserialize, Serialize};

use crate::lifecycle::Pid;

/// What the state file says about a running instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    pub pid: Pid,
    /// Field 22 of `/proc/PID/stat`: clock ticks after boot.
    pub start_time: u64,
    /// The instance's own cgroup (v2 path), when it had one.
    pub cgroup: Option<String>,
    /// `/proc/PID/cmdline`, split at NULs.
    pub cmdline: Vec<String>,
}

/// What `/proc/PID` says now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub start_time: u64,
    /// The v2 cgroup path (`0::/...`), when readable.
    pub cgroup: Option<String>,
    pub cmdline: Vec<String>,
    /// State letter of `/proc/PID/stat` (`Z` for a zombie).
    pub state: char,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adoption {
    Adopt,
    /// Leave it alone: not ours (or not alive).
    Ignore(String),
}

/// Whether to adopt the recorded process, given what `/proc` shows for its PID now
/// (`None`: no such process).
pub fn decide(recorded: &Recorded, now: Option<&Observed>) -> Adoption {
    let Some(now) = now else {
        return Adoption::Ignore(format!("process {} is gone", recorded.pid));
    };
    if now.start_time != recorded.start_time {
        return Adoption::Ignore(format!(
            "PID {} was reused by another process (started at tick {}, not {})",
            recorded.pid, now.start_time, recorded.start_time
        ));
    }
    if now.state == 'Z' || now.state == 'X' {
        return Adoption::Ignore(format!("process {} has exited", recorded.pid));
    }
    let cgroup_matches = match (&recorded.cgroup, &now.cgroup) {
        (Some(a), Some(b)) => Some(a == b),
        _ => None,
    };
    let cmdline_matches = !recorded.cmdline.is_empty() && recorded.cmdline == now.cmdline;
    match cgroup_matches {
        Some(true) => Adoption::Adopt,
        Some(false) if !cmdline_matches => Adoption::Ignore(format!(
            "process {} is in cgroup `{}`, not `{}`, and runs another command",
            recorded.pid,
            now.cgroup.as_deref().unwrap_or(""),
            recorded.cgroup.as_deref().unwrap_or("")
        )),
        _ if cmdline_matches => Adoption::Adopt,
        _ => Adoption::Ignore(format!(
            "process {} runs `{}`, not `{}`",
            recorded.pid,
            now.cmdline.join(" "),
            recorded.cmdline.join(" ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(cgroup: Option<&str>) -> Recorded {
        Recorded {
            pid: 100,
            start_time: 5000,
            cgroup: cgroup.map(Into::into),
            cmdline: vec!["/usr/sbin/mysqld".into(), "--port=3306".into()],
        }
    }

    fn observed(start_time: u64, cgroup: Option<&str>, cmd: &[&str], state: char) -> Observed {
        Observed {
            start_time,
            cgroup: cgroup.map(Into::into),
            cmdline: cmd.iter().map(|s| s.to_string()).collect(),
            state,
        }
    }

    const CMD: [&str; 2] = ["/usr/sbin/mysqld", "--port=3306"];

    #[test]
    fn same_pid_start_time_and_cgroup_or_command_is_adopted() {
        let cg = Some("/pinctl/mysql-0");
        assert_eq!(decide(&recorded(cg), Some(&observed(5000, cg, &CMD, 'S'))), Adoption::Adopt);
        // cgroup matches even when the process rewrote its argv.
        assert_eq!(
            decide(&recorded(cg), Some(&observed(5000, cg, &["mysqld: idle"], 'S'))),
            Adoption::Adopt
        );
        // No cgroup recorded: the command line decides.
        assert_eq!(
            decide(&recorded(None), Some(&observed(5000, Some("/"), &CMD, 'R'))),
            Adoption::Adopt
        );
        // cgroup moved (e.g. systemd re-created the slice) but same command: still the same.
        assert_eq!(
            decide(&recorded(cg), Some(&observed(5000, Some("/other"), &CMD, 'S'))),
            Adoption::Adopt
        );
    }

    #[test]
    fn recycled_or_gone_or_foreign_processes_are_ignored() {
        let cg = Some("/pinctl/mysql-0");
        for (now, why) in [
            (None, "gone"),
            (Some(observed(5001, cg, &CMD, 'S')), "reused"),
            (Some(observed(4999, None, &CMD, 'S')), "reused"),
            (Some(observed(5000, cg, &CMD, 'Z')), "exited"),
            (Some(observed(5000, Some("/other"), &["bash"], 'S')), "cgroup"),
            (Some(observed(5000, None, &["bash"], 'S')), "runs `bash`"),
            (Some(observed(5000, None, &[], 'S')), "runs"),
        ] {
            match decide(&recorded(cg), now.as_ref()) {
                Adoption::Ignore(reason) => assert!(reason.contains(why), "{reason} / {why}"),
                Adoption::Adopt => panic!("adopted {now:?}"),
            }
        }
        // An empty recorded command line never matches an empty one.
        let mut r = recorded(None);
        r.cmdline.clear();
        assert!(matches!(decide(&r, Some(&observed(5000, None, &[], 'S'))), Adoption::Ignore(_)));
    }
}
