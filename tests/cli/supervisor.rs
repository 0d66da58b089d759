//! The harness of the tests that run `pinctl run` with real processes (`run`, `trust`): a
//! supervisor in a temporary folder, its control socket, and every process it was seen running,
//! killed by the guard's Drop so that a failing test leaves nothing behind. Every wait is
//! bounded. What `/proc` says is read with pinctl-sysfs's readers (tested on strings there).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pinctl_sysfs::FsRoot;
use pinctl_sysfs::proc::pid::{self as process, stat::Stat, status::Status};
use rustix::process::Signal;
use serde_json::Value;

use crate::support::PINCTL as BIN;

/// The bundled EPYC snapshot by absolute path: supervisors run from temporary folders.
pub(crate) const EPYC: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/configs/topologies/epyc-nps4.json");
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// The live `/proc`.
pub(crate) fn proc() -> FsRoot<'static> {
    FsRoot::new(Path::new("/"))
}

/// `/proc/PID/stat`, or None when the process is gone.
pub(crate) fn stat(pid: i32) -> Option<Stat> {
    process::stat::read(&mut proc(), u32::try_from(pid).ok()?).ok().flatten()
}

/// `/proc/PID/status`, or None when the process is gone.
pub(crate) fn status(pid: i32) -> Option<Status> {
    process::status::read(&mut proc(), u32::try_from(pid).ok()?).ok().flatten()
}

/// The CPUs process `pid` may run on, as the kernel lists them.
pub(crate) fn allowed_cpus(pid: i32) -> String {
    status(pid).and_then(|s| s.cpus).map(|c| c.to_string()).unwrap_or_default()
}

/// `/proc/PID/cgroup`'s v2 path.
pub(crate) fn cgroup_of(pid: i32) -> Option<String> {
    process::cgroup::read_v2(&mut proc(), u32::try_from(pid).ok()?).ok().flatten()
}

/// Whether `pid` runs (is there, and no zombie).
pub(crate) fn running(pid: i32) -> bool {
    stat(pid).is_some_and(|s| s.state != 'Z')
}

/// The running processes whose arguments `is` picks.
pub(crate) fn processes(is: impl Fn(&[String]) -> bool) -> Vec<i32> {
    let mut fs = proc();
    let pids = pinctl_sysfs::proc::pids(&mut fs).unwrap();
    let args = |fs: &mut FsRoot, p| process::cmdline::read(fs, p).ok().flatten();
    let picked = pids.into_iter().filter(|&p| args(&mut fs, p).is_some_and(|a| is(&a)));
    picked.map(|p| p as i32).filter(|&p| running(p)).collect()
}

/// Sends `sig` to process `pid`.
pub(crate) fn signal(pid: i32, sig: Signal) -> std::io::Result<()> {
    let pid = rustix::process::Pid::from_raw(pid).ok_or(rustix::io::Errno::SRCH)?;
    Ok(rustix::process::kill_process(pid, sig)?)
}

pub(crate) fn alive(pid: i32, start: u64) -> bool {
    stat(pid).is_some_and(|s| s.start_time == start && s.state != 'Z')
}

/// Runs `cmd` to its end, its stdout and stderr captured, for at most `WAIT`: a command that
/// should have refused or answered but runs on (an old build serving a socket it should have
/// refused) is killed and the test fails instead of hanging.
pub(crate) fn bounded_output(cmd: &mut Command) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    cmd.stdin(Stdio::null());
    cmd.stdout(std::fs::File::create(&out).unwrap());
    cmd.stderr(std::fs::File::create(&err).unwrap());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} did not exit within {WAIT:?}: {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output { status, stdout: std::fs::read(&out).unwrap(), stderr: std::fs::read(&err).unwrap() }
}

/// Polls `f` until it returns Some, at most `WAIT`.
pub(crate) fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A `pinctl run` in a temporary directory, and every process it was seen running.
pub(crate) struct Run {
    pub(crate) dir: tempfile::TempDir,
    /// The service file's name: one of its own per test, since a supervisor is named after
    /// its file and tests run at once, each a supervisor of its own (its cgroup subtree too).
    pub(crate) name: String,
    pub(crate) child: Option<Child>,
    pub(crate) seen: BTreeSet<(i32, u64)>,
}

/// A supervisor name no other test of this run uses.
pub(crate) fn unique_name() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("t{}-{n}", std::process::id())
}

impl Run {
    pub(crate) fn new(config: &str) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let name = unique_name();
        std::fs::write(dir.path().join(format!("{name}.toml")), config).unwrap();
        Run { dir, name, child: None, seen: BTreeSet::new() }
    }

    /// The service file.
    pub(crate) fn config(&self) -> PathBuf {
        self.path(&format!("{}.toml", self.name))
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn socket(&self) -> PathBuf {
        self.path("pinctl.sock")
    }

    /// Starts `pinctl run` and waits until it answers with every instance settled.
    pub(crate) fn start(&mut self, extra: &[&str]) {
        let child = self.command(extra).spawn().unwrap();
        self.child = Some(child);
        self.settle();
    }

    pub(crate) fn command(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("run").arg("-c").arg(self.config());
        cmd.arg("--socket").arg(self.socket()).arg("--state-file").arg(self.path("state.json"));
        cmd.args(extra);
        cmd.stdin(Stdio::null());
        cmd.stdout(std::fs::File::create(self.path("stdout")).unwrap());
        cmd.stderr(std::fs::File::create(self.path("stderr")).unwrap());
        cmd
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(self.path("stderr")).unwrap_or_default()
    }

    /// pinctl's log once it has said `text` `times` times (bounded wait). Its log lines reach
    /// stderr through the relay thread, after the state they tell of may already show on the
    /// socket, so a test that has seen a state waits for the line rather than reading once.
    pub(crate) fn said_times(&self, text: &str, times: usize) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let err = self.stderr();
            if err.matches(text).count() >= times {
                return err;
            }
            assert!(Instant::now() < deadline, "pinctl never said {text:?} {times}x:\n{err}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// pinctl's log once it has said `text` (see [`Run::said_times`]).
    pub(crate) fn said(&self, text: &str) -> String {
        self.said_times(text, 1)
    }

    /// One request on the control socket.
    pub(crate) fn ask(&self, request: Value) -> Value {
        self.try_ask(&request).unwrap_or_else(|e| panic!("{e}; pinctl said:\n{}", self.stderr()))
    }

    /// One request; `Err` when the connection fails (a supervisor killed while it forked
    /// leaves its listening socket with the child until that child's exec: a connection made
    /// then is reset).
    pub(crate) fn try_ask(&self, request: &Value) -> std::io::Result<Value> {
        let mut s = UnixStream::connect(self.socket())?;
        s.set_read_timeout(Some(WAIT)).unwrap();
        writeln!(s, "{request}")?;
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line)?;
        Ok(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}")))
    }

    /// Instances by name, recording every PID seen.
    pub(crate) fn status(&mut self) -> BTreeMap<String, Value> {
        let r = self.ask(serde_json::json!({"cmd": "status"}));
        self.record(&r)
    }

    fn record(&mut self, r: &Value) -> BTreeMap<String, Value> {
        assert_eq!(r["ok"], true, "{r}");
        let mut out = BTreeMap::new();
        for i in r["instances"].as_array().unwrap() {
            if let Some(pid) = i["pid"].as_i64() {
                if let Some(s) = stat(pid as i32) {
                    self.seen.insert((pid as i32, s.start_time));
                }
            }
            out.insert(i["name"].as_str().unwrap().to_string(), i.clone());
        }
        out
    }

    /// Waits until the socket answers and no instance is activating, deactivating or waiting
    /// to restart.
    pub(crate) fn settle(&mut self) -> BTreeMap<String, Value> {
        wait_for("the supervisor to settle", || {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("pinctl run exited with {status}: {}", self.stderr());
                }
            }
            let r = self.try_ask(&serde_json::json!({"cmd": "status"})).ok()?;
            let s = self.record(&r);
            let busy = s.values().any(|i| {
                matches!(i["state"].as_str(), Some("activating" | "deactivating" | "auto-restart"))
            });
            (!busy).then_some(s)
        })
    }

    pub(crate) fn ctl(&self, args: &[&str]) -> Output {
        bounded_output(Command::new(BIN).args(args).arg("--socket").arg(self.socket()))
    }

    /// SIGTERM to pinctl and its exit status, waited for at most `WAIT`.
    pub(crate) fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        signal(child.id() as i32, Signal::TERM).unwrap();
        wait_for("pinctl run to exit", || child.try_wait().unwrap())
    }

    pub(crate) fn children_of_pinctl(&self) -> Vec<(i32, char)> {
        let me = self.pid() as u32;
        let pids = pinctl_sysfs::proc::pids(&mut proc()).unwrap();
        let children = pids.into_iter().filter_map(|p| Some((p as i32, stat(p as i32)?)));
        children.filter(|(_, s)| s.ppid == me).map(|(p, s)| (p, s.state)).collect()
    }

    pub(crate) fn leftovers(&self) -> Vec<i32> {
        self.seen.iter().filter(|(p, s)| alive(*p, *s)).map(|(p, _)| *p).collect()
    }
}

/// How long a test's leftover supervisor gets to stop its instances before it is killed.
const STOP_WAIT: Duration = Duration::from_secs(10);

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A test that failed before it stopped its supervisor may not have learnt its
            // instances' PIDs (`seen`): SIGTERM first, so the supervisor stops what it started,
            // then KILL after a bounded wait.
            if child.try_wait().ok().flatten().is_none() {
                let _ = signal(child.id() as i32, Signal::TERM);
                let deadline = Instant::now() + STOP_WAIT;
                while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        for &(pid, start) in &self.seen {
            if alive(pid, start) {
                let _ = signal(pid, Signal::KILL);
            }
        }
        // The lock of its cgroup subtree outlives a supervisor by design (host-wide, in
        // /run/pinctl/locks); a test's own goes with the test.
        let _ =
            std::fs::remove_file(format!("/run/pinctl/locks/cgroup-pinctl%2F{}.lock", self.name));
    }
}

/// A tiny deterministic generator (xorshift64*), seeded per run and printed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

pub(crate) fn unpinned() -> [&'static str; 3] {
    ["--topology", EPYC, "--unpinned"]
}

/// Runs Debian's logrotate once, forced, on the configuration `conf` (its state file beside it),
/// and asserts that it succeeded.
pub(crate) fn logrotate(conf: &std::path::Path) {
    let out = bounded_output(
        Command::new("/usr/sbin/logrotate")
            .arg("-f")
            .arg("-s")
            .arg(conf.with_extension("state"))
            .arg(conf),
    );
    assert!(out.status.success(), "logrotate: {}", String::from_utf8_lossy(&out.stderr));
}
