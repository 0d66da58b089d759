//! Alert commands: started without a shell, the facts in their environment, never waited
//! for. A command that cannot start, fails or outlives its time limit is reported by
//! [`AlertRunner::reap`] on a later cycle; watching goes on meanwhile.

use std::io;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Alert commands in flight.
#[derive(Debug)]
pub struct AlertRunner {
    running: Vec<(Child, Instant, String)>,
    /// A command still running after this long is killed.
    pub timeout: Duration,
}

impl Default for AlertRunner {
    fn default() -> Self {
        AlertRunner { running: Vec::new(), timeout: Duration::from_secs(60) }
    }
}

impl AlertRunner {
    /// Starts `argv` with `env` added to the watcher's environment; `what` names it in
    /// reports. Returns without waiting.
    pub fn start(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
        what: &str,
    ) -> io::Result<()> {
        let (program, args) =
            argv.split_first().ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()?;
        self.running.push((child, Instant::now(), what.to_string()));
        Ok(())
    }

    /// Collects commands that ended and kills those past the time limit: one message per
    /// command that did not succeed.
    pub fn reap(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        let timeout = self.timeout;
        self.running.retain_mut(|(child, started, what)| match child.try_wait() {
            Ok(Some(status)) if status.success() => false,
            Ok(Some(status)) => {
                problems.push(format!("alert command for {what} failed: {status}"));
                false
            }
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                problems.push(format!(
                    "alert command for {what} still ran after {}s and was killed",
                    timeout.as_secs()
                ));
                false
            }
            Ok(None) => true,
            Err(e) => {
                problems.push(format!("alert command for {what}: cannot wait for it: {e}"));
                false
            }
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
            let _ = child.kill();
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
