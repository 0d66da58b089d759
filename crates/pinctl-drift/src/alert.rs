//! Alert commands: started without a shell, the facts in their environment, never waited
//! for. A command that cannot start, fails or outlives its time limit is reported by
//! [`AlertRunner::reap`] on a later cycle; watching goes on meanwhile.
//!
//! Each command leads a process group of its own, and the whole group is killed when the
//! command outlives its limit or ends (so a hung alert's children, or what a finished one
//! left in the background, do not live on re-parented to init). A child that leaves the group
//! (`setsid`, `setpgid`) escapes it: a process group is what an unprivileged watcher, and a
//! host without a writable cgroup v2 subtree, can hold on to.

use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};

/// Variables of the watcher's own environment an alert command does not get: systemd's
/// notification socket and watchdog (an alert must not be able to say `READY=1`, `STOPPING=1`
/// or `MAINPID=` for the supervisor, or keep its watchdog fed) and socket activation's file
/// descriptors, which were meant for pinctl alone.
pub const WITHHELD_ENV: [&str; 6] = [
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
];

/// Alert commands in flight.
#[derive(Debug)]
pub struct AlertRunner {
    running: Vec<(Child, Instant, String)>,
    /// A command still running after this long is killed, with its process group.
    pub timeout: Duration,
}

impl Default for AlertRunner {
    fn default() -> Self {
        AlertRunner { running: Vec::new(), timeout: Duration::from_secs(60) }
    }
}

/// The command that runs `argv` with `env` added to the watcher's environment, less
/// [`WITHHELD_ENV`], in a new process group it leads.
fn command(argv: &[String], env: &[(String, String)]) -> io::Result<Command> {
    let (program, args) =
        argv.split_first().ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut command = Command::new(program);
    command.args(args);
    for name in WITHHELD_ENV {
        command.env_remove(name);
    }
    command
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0);
    Ok(command)
}

/// The process group a command leads (its id is the command's PID).
fn group_of(child: &Child) -> Option<Pid> {
    Pid::from_raw(i32::try_from(child.id()).ok()?)
}

/// Whether the command has ended, asked without reaping it: until it is reaped its PID, which
/// is its group's id, cannot be given to another process, so the group can still be killed
/// by that id without reaching anyone else.
fn has_ended(child: &Child) -> io::Result<bool> {
    let Some(pid) = group_of(child) else { return Ok(true) };
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    Ok(waitid(WaitId::Pid(pid), options)?.is_some())
}

/// Kills every process of the command's group (ESRCH, an empty group, is no error: there is
/// nothing to kill). The command must not be reaped yet (see [`has_ended`]).
fn kill_group(child: &Child) {
    if let Some(group) = group_of(child) {
        let _ = kill_process_group(group, Signal::KILL);
    }
}

impl AlertRunner {
    /// Starts `argv` with `env` added to the watcher's environment (less [`WITHHELD_ENV`]), in
    /// a process group of its own; `what` names it in reports. Returns without waiting.
    pub fn start(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        what: &str,
    ) -> io::Result<()> {
        let child = command(argv, env)?.spawn()?;
        self.running.push((child, Instant::now(), what.to_string()));
        Ok(())
    }

    /// Collects commands that ended and kills those past the time limit, each with whatever
    /// is left in its process group: one message per command that did not succeed.
    pub fn reap(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        let timeout = self.timeout;
        self.running.retain_mut(|(child, started, what)| {
            let ended = match has_ended(child) {
                Ok(ended) => ended,
                Err(e) => {
                    problems.push(format!("alert command for {what}: cannot wait for it: {e}"));
                    kill_group(child);
                    let _ = child.wait();
                    return false;
                }
            };
            if !ended && started.elapsed() <= timeout {
                return true;
            }
            // The command is not reaped yet, so its group id still names its group alone.
            kill_group(child);
            let status = child.wait();
            if !ended {
                problems.push(format!(
                    "alert command for {what} still ran after {}s and was killed, with its \
                     process group",
                    timeout.as_secs()
                ));
                return false;
            }
            match status {
                Ok(status) if !status.success() => {
                    problems.push(format!("alert command for {what} failed: {status}"));
                }
                Ok(_) => {}
                Err(e) => {
                    problems.push(format!("alert command for {what}: cannot wait for it: {e}"));
                }
            }
            false
        });
        problems
    }

    /// Commands still running.
    pub fn in_flight(&self) -> usize {
        self.running.len()
    }
}

impl Drop for AlertRunner {
    fn drop(&mut self) {
        for (child, _, _) in &mut self.running {
            kill_group(child);
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_all(r: &mut AlertRunner) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..500 {
            out.extend(r.reap());
            if r.in_flight() == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        out
    }

    #[test]
    fn runs_with_the_facts_in_the_environment_and_reports_failures() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let argv: Vec<String> =
            ["sh", "-c", "echo \"$PINCTL_INSTANCE $PINCTL_DRIFT_KIND\" > \"$1\"", "sh"]
                .iter()
                .map(|s| s.to_string())
                .chain([out.display().to_string()])
                .collect();
        let env = vec![
            ("PINCTL_INSTANCE".to_string(), "db-0".to_string()),
            ("PINCTL_DRIFT_KIND".to_string(), "cpu".to_string()),
        ];
        let mut r = AlertRunner::default();
        r.start(&argv, &env, "db-0 cpu").unwrap();
        assert!(wait_all(&mut r).is_empty());
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "db-0 cpu\n");

        r.start(&["false".to_string()], &[], "db-1 locality").unwrap();
        let problems = wait_all(&mut r);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("alert command for db-1 locality failed"), "{problems:?}");

        let e = r.start(&["/nonexistent/pager".to_string()], &[], "x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    /// Whether `pid` is gone: no such process, or a zombie (killed, waiting for whoever
    /// reaps orphans).
    fn gone(pid: i32) -> bool {
        let mut fs = pinctl_sysfs::FsRoot::new(std::path::Path::new("/"));
        match pinctl_sysfs::proc::pid::stat::read(&mut fs, pid as u32) {
            Ok(Some(stat)) => stat.state == 'Z',
            _ => true,
        }
    }

    /// Kills the listed PIDs when dropped, so a failing test leaves nothing behind.
    struct KillOnDrop(Vec<i32>);

    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            for &pid in &self.0 {
                if let Some(pid) = Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, Signal::KILL);
                }
            }
        }
    }

    #[test]
    fn a_hung_command_is_killed_with_the_children_it_forked() {
        let dir = tempfile::tempdir().unwrap();
        let child_file = dir.path().join("child");
        // Forks a long-lived child, says its PID, and hangs.
        let script = "sleep 300 & echo $! > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; sleep 300";
        let argv: Vec<String> = ["sh", "-c", script, &child_file.display().to_string()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut r = AlertRunner::default();
        r.timeout = Duration::from_millis(300);
        r.start(&argv, &[], "db-0 cpu").unwrap();
        let leader = r.running[0].0.id() as i32;
        let mut cleanup = KillOnDrop(vec![leader]);
        let deadline = Instant::now() + Duration::from_secs(30);
        let forked: i32 = loop {
            if let Ok(text) = std::fs::read_to_string(&child_file) {
                break text.trim().parse().unwrap();
            }
            assert!(Instant::now() < deadline, "the alert never forked its child");
            std::thread::sleep(Duration::from_millis(10));
        };
        cleanup.0.push(forked);
        let problems = wait_all(&mut r);
        assert_eq!(r.in_flight(), 0);
        assert!(problems.iter().any(|p| p.contains("was killed")), "{problems:?}");
        // The leader was reaped by the runner; the child it forked, killed, is reaped by
        // whoever adopts orphans here.
        while !(gone(leader) && gone(forked)) {
            assert!(
                Instant::now() < deadline,
                "still running after the timeout: alert {leader} ({}), its child {forked} ({})",
                gone(leader),
                gone(forked)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn the_watchers_notification_socket_and_watchdog_are_withheld() {
        let env = [("PINCTL_INSTANCE".to_string(), "db-0".to_string())];
        let cmd = command(&["true".to_string()], &env).unwrap();
        let set: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                (k.to_string_lossy().into_owned(), v.map(|v| v.to_string_lossy().into_owned()))
            })
            .collect();
        for name in WITHHELD_ENV {
            assert!(set.contains(&(name.to_string(), None)), "{name} is not removed: {set:?}");
        }
        assert!(set.contains(&("PINCTL_INSTANCE".into(), Some("db-0".into()))), "{set:?}");
    }

    #[test]
    fn a_hanging_command_is_killed_after_the_limit() {
        let mut r = AlertRunner::default();
        r.timeout = Duration::ZERO;
        r.start(&["sleep".to_string(), "30".to_string()], &[], "db-0 cpu").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let problems = wait_all(&mut r);
        assert_eq!(r.in_flight(), 0);
        assert!(problems[0].contains("was killed"), "{problems:?}");
    }
}
