//! The tokio side: a dispatcher that `select!`s over signals, child exits, timers and
//! control-socket requests, turns each into an [`Event`] for [`lifecycle::step`], and carries
//! out the [`Action`]s it returns. No lifecycle decision is made here.
//!
//! Exits of the supervisor's own children come from tokio (pidfd or SIGCHLD, then `waitpid`,
//! so no zombie outlives a reap). An adopted process is not our child (init reaps it, and its
//! exit status is lost): its exit is seen through a pidfd (`pidfd_open`, Linux 5.3+) that
//! turns readable when it exits, so an idle supervisor has no periodic wake-up. Where the
//! kernel has no `pidfd_open`, `/proc/PID/stat` (PID and start time) is polled every 500 ms
//! instead, only while adopted processes exist, and the log says so once.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid as NixPid;
use pinctl_plan::CurrentPlacement;
use rand::{Rng as _, SeedableRng as _};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::adopt::{self, Adoption, Recorded};
use crate::cgroup::Subtree;
use crate::launch;
use crate::lifecycle::{self, Action, Event, Exit, Pid, State, Time, Unit};
use crate::notify::Notifier;
use crate::observe::{Observed, Observer};
use crate::protocol::{InstanceStatus, Request, Response};
use crate::spec::{Change, InstanceSpec, diff};
use crate::statefile::{self, Entry, StateFile};

/// Where the supervisor listens and records.
#[derive(Debug, Clone)]
pub struct Options {
    pub socket: PathBuf,
    pub state_file: PathBuf,
    /// Start instances without applying or checking their placement. Only for testing the
    /// supervisor against a topology larger than the machine it runs on.
    pub unpinned: bool,
}

/// Re-reads and re-plans the service file on reload, given where the running instances are
/// (so the plan keeps them there when it can): the new specs, or why the file cannot be used
/// (rendered diagnostics).
pub type Planner =
    Box<dyn FnMut(&BTreeMap<String, CurrentPlacement>) -> Result<Vec<InstanceSpec>, String>>;

/// How the supervisor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every instance was stopped; `clean` unless one needed `KILL` after its stop-timeout.
    Stopped { clean: bool },
    /// Asked to leave the instances running (`pinctl detach`, `SIGUSR2`).
    Detached,
}

/// Why the supervisor could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "another `pinctl run` is serving `{}`: stop it first (or give this one another `--socket`)",
        path.display()
    )]
    SocketInUse { path: PathBuf },
    #[error("cannot listen on `{}`: {source}", path.display())]
    Socket {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start the supervisor's runtime: {0}")]
    Runtime(#[source] io::Error),
}

/// Binds the control socket (refusing a live one, replacing a stale one), then runs the
/// supervisor until it is stopped or detached.
pub fn run(
    options: Options,
    initial: Vec<InstanceSpec>,
    planner: Planner,
) -> Result<Outcome, RunError> {
    run_observed(options, initial, planner, None)
}

/// [`run`], telling `observer` of the instances after every change (the drift watcher).
pub fn run_observed(
    options: Options,
    initial: Vec<InstanceSpec>,
    planner: Planner,
    observer: Option<Box<dyn Observer>>,
) -> Result<Outcome, RunError> {
    let listener = bind(&options.socket)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let socket = options.socket.clone();
    let result = runtime.block_on(async move {
        let listener = tokio::net::UnixListener::from_std(listener)
            .map_err(|source| RunError::Socket { path: options.socket.clone(), source })?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(serve(listener, tx.clone()));
        // Signals are caught from here on: a SIGTERM while instances start stops them.
        let signals = Signals::new();
        let mut sup = Supervisor::new(options.clone(), tx, planner);
        sup.observer = observer;
        sup.start(initial);
        Ok(sup.main_loop(rx, signals).await)
    });
    let _ = std::fs::remove_file(&socket);
    // Detached: leave the instances to the next supervisor; tasks reading their output end
    // with the runtime.
    runtime.shutdown_background();
    result
}

fn bind(path: &Path) -> Result<std::os::unix::net::UnixListener, RunError> {
    let err = |source| RunError::Socket { path: path.to_path_buf(), source };
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(RunError::SocketInUse { path: path.to_path_buf() });
        }
        // Nobody answers: a supervisor died without removing it.
        std::fs::remove_file(path).map_err(err)?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = std::os::unix::net::UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = bound.map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    listener.set_nonblocking(true).map_err(err)?;
    Ok(listener)
}

/// Inputs from tasks to the dispatcher.
#[derive(Debug)]
enum Msg {
    Exited { name: String, pid: Pid, exit: Exit },
    Control { request: Request, reply: oneshot::Sender<Response> },
}

async fn serve(listener: tokio::net::UnixListener, tx: mpsc::UnboundedSender<Msg>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let tx = tx.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut lines = tokio::io::BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim().is_empty() {
                    continue;
                }
                let response = match serde_json::from_str::<Request>(&line) {
                    Err(e) => Response::error(format!("bad request: {e}")),
                    Ok(Request::Detach) => {
                        // Answered before the supervisor is told: it exits at once after.
                        let _ = write.write_all(b"{\"ok\":true}\n").await;
                        let _ = write.flush().await;
                        let (reply, _) = oneshot::channel();
                        let _ = tx.send(Msg::Control { request: Request::Detach, reply });
                        return;
                    }
                    Ok(request) => {
                        let (reply, answer) = oneshot::channel();
                        if tx.send(Msg::Control { request, reply }).is_err() {
                            return;
                        }
                        match answer.await {
                            Ok(r) => r,
                            Err(_) => Response::error("the supervisor is exiting"),
                        }
                    }
                };
                let mut text = serde_json::to_string(&response).unwrap_or_default();
                text.push('\n');
                if write.write_all(text.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// One supervised instance with what the runtime knows about its process.
#[derive(Debug)]
struct Inst {
    spec: InstanceSpec,
    unit: Unit,
    adopted: bool,
    /// Identity of the running process (start time, command line), for the state file and
    /// for checking before every signal that the PID is still ours.
    start_time: Option<u64>,
    cmdline: Vec<String>,
    started: Option<Instant>,
    timer: Option<Time>,
    /// Removed from the file: dropped once stopped.
    removing: bool,
    /// Its own cgroup (v2 path), when it has one.
    cgroup: Option<String>,
}

impl Inst {
    fn new(spec: InstanceSpec) -> Inst {
        let unit = Unit::new(spec.policy.clone());
        Inst {
            spec,
            unit,
            adopted: false,
            start_time: None,
            cmdline: Vec::new(),
            started: None,
            timer: None,
            removing: false,
            cgroup: None,
        }
    }
}

struct Waiter {
    names: Vec<String>,
    reply: oneshot::Sender<Response>,
}

struct Supervisor {
    options: Options,
    order: Vec<String>,
    insts: HashMap<String, Inst>,
    origin: Instant,
    tx: mpsc::UnboundedSender<Msg>,
    rng: rand::rngs::StdRng,
    waiters: Vec<Waiter>,
    notifier: Notifier,
    planner: Planner,
    shutting_down: bool,
    unclean: bool,
    recorded: Vec<(String, Pid)>,
    status_line: String,
    cgroups: Option<Subtree>,
    /// Whether the log said that adopted processes are polled (no pidfds here).
    said_polling: bool,
    observer: Option<Box<dyn Observer>>,
    observed: Vec<Observed>,
}

fn log(name: &str, message: &str) {
    let _ = writeln!(io::stderr().lock(), "pinctl: {name}: {message}");
}

impl Supervisor {
    fn new(options: Options, tx: mpsc::UnboundedSender<Msg>, planner: Planner) -> Supervisor {
        Supervisor {
            options,
            order: Vec::new(),
            insts: HashMap::new(),
            origin: Instant::now(),
            tx,
            rng: rand::rngs::StdRng::from_os_rng(),
            waiters: Vec::new(),
            notifier: Notifier::from_env(),
            planner,
            shutting_down: false,
            unclean: false,
            recorded: Vec::new(),
            status_line: String::new(),
            cgroups: None,
            said_polling: false,
            observer: None,
            observed: Vec::new(),
        }
    }

    fn now(&self) -> Time {
        self.origin.elapsed()
    }

    /// Adopts what the state file names and `/proc` confirms, starts the rest.
    fn start(&mut self, specs: Vec<InstanceSpec>) {
        match Subtree::setup(&launch::own_cgroup().unwrap_or_else(|| "/".into())) {
            Ok(subtree) => {
                log(
                    "supervisor",
                    &format!("one cgroup per instance under `{}`", subtree.path_of("")),
                );
                self.cgroups = Some(subtree);
            }
            Err(why) => {
                log(
                    "supervisor",
                    &format!("{why}: stopping instances through their process groups"),
                );
                if let Some(s) = specs.iter().find(|s| s.enforce_cgroup) {
                    log(
                        "warning",
                        &format!(
                            "`enforce = \"cgroup\"` of `{}` cannot be applied without a cgroup \
                             subtree: the placement set at exec holds",
                            s.service
                        ),
                    );
                }
            }
        }
        let recorded = match statefile::read(&self.options.state_file) {
            Ok(Some(state)) => state.instances,
            Ok(None) => Vec::new(),
            Err(e) => {
                log("warning", &e.to_string());
                Vec::new()
            }
        };
        let mut adoptable: BTreeMap<String, Entry> = BTreeMap::new();
        for entry in recorded {
            match adopt::decide(&entry.process, launch::observe(entry.process.pid).as_ref()) {
                Adoption::Adopt => {
                    adoptable.insert(entry.name.clone(), entry);
                }
                Adoption::Ignore(why) => log(&entry.name, &format!("not adopted: {why}")),
            }
        }
        for spec in specs {
            let name = spec.name.clone();
            self.order.push(name.clone());
            match adoptable.remove(&name) {
                Some(entry) => {
                    let changed = entry.spec.changed(&spec);
                    self.adopt(entry, spec.policy.clone(), false);
                    if !changed.is_empty() {
                        let inst = self.insts.get_mut(&name).expect("just adopted");
                        inst.spec = spec;
                        let fields: Vec<&str> = changed.iter().map(|f| f.name()).collect();
                        log(&name, &format!("restarting: {} changed", fields.join(", ")));
                        self.dispatch(&name, Event::Restart);
                    }
                }
                None => {
                    self.insts.insert(name.clone(), Inst::new(spec));
                    self.dispatch(&name, Event::Start);
                }
            }
        }
        // Running instances the file no longer names: adopted to be stopped.
        for (name, entry) in adoptable {
            self.order.push(name.clone());
            let policy = entry.spec.policy.clone();
            self.adopt(entry, policy, true);
            self.dispatch(&name, Event::Stop);
        }
        self.after_change();
        let (running, total) = self.counts();
        self.notifier.send(&format!("READY=1\nSTATUS={running}/{total} running"));
    }

    fn adopt(&mut self, entry: Entry, policy: lifecycle::Policy, removing: bool) {
        let pid = entry.process.pid;
        let mut unit = Unit::adopted(policy, pid, self.now());
        unit.restarts = entry.restarts;
        let age = launch::process_age(entry.process.start_time).unwrap_or_default();
        let inst = Inst {
            spec: entry.spec,
            unit,
            adopted: true,
            start_time: Some(entry.process.start_time),
            cmdline: entry.process.cmdline.clone(),
            started: Instant::now().checked_sub(age).or(Some(Instant::now())),
            timer: None,
            removing,
            cgroup: entry.process.cgroup.clone(),
        };
        self.insts.insert(entry.name.clone(), inst);
        match launch::pidfd_open(pid) {
            Ok(pidfd) => {
                log(
                    &entry.name,
                    &format!("adopted running process {pid}, watched through a pidfd"),
                );
                if let Err(e) =
                    watch_pidfd(entry.name.clone(), entry.process.clone(), pidfd, self.tx.clone())
                {
                    log(&entry.name, &format!("polling /proc: cannot start its watcher: {e}"));
                    tokio::spawn(poll_adopted(entry.name, entry.process, self.tx.clone()));
                }
            }
            Err(e) => {
                log(&entry.name, &format!("adopted running process {pid}"));
                // ESRCH: it exited since the adoption check; the first poll reports it.
                if e.raw_os_error() != Some(nix::errno::Errno::ESRCH as i32) && !self.said_polling {
                    self.said_polling = true;
                    log(
                        "supervisor",
                        &format!(
                            "cannot watch adopted processes through pidfds ({e}; pidfd_open \
                             needs Linux 5.3): polling /proc every {} ms instead",
                            POLL.as_millis()
                        ),
                    );
                }
                tokio::spawn(poll_adopted(entry.name, entry.process, self.tx.clone()));
            }
        }
    }

    async fn main_loop(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        signals: Signals,
    ) -> Outcome {
        let Signals { mut term, mut int, mut hup, mut usr2 } = signals;
        let mut watchdog = self.notifier.watchdog_interval().map(tokio::time::interval);
        loop {
            if self.shutting_down && self.insts.values().all(|i| i.unit.state.pid().is_none()) {
                let _ = std::fs::remove_file(&self.options.state_file);
                if let Some(cgroups) = &self.cgroups {
                    for name in &self.order {
                        cgroups.remove(name);
                    }
                }
                return Outcome::Stopped { clean: !self.unclean };
            }
            let next_timer = self.insts.values().filter_map(|i| i.timer).min();
            let sleep = async {
                match next_timer {
                    Some(at) => tokio::time::sleep_until(self.origin + at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(()) = recv_signal(&mut term) => self.shutdown("SIGTERM"),
                Some(()) = recv_signal(&mut int) => self.shutdown("SIGINT"),
                Some(()) = recv_signal(&mut hup) => {
                    let r = self.reload(false);
                    if let Some(e) = r.error {
                        log("reload", &e);
                    }
                }
                Some(()) = recv_signal(&mut usr2) => {
                    self.detach();
                    return Outcome::Detached;
                }
                _ = tick(&mut watchdog) => self.notifier.send("WATCHDOG=1"),
                () = sleep => self.fire_timers(),
                Some(msg) = rx.recv() => match msg {
                    Msg::Exited { name, pid, exit } => self.exited(&name, pid, exit),
                    Msg::Control { request: Request::Detach, .. } => {
                        self.detach();
                        return Outcome::Detached;
                    }
                    Msg::Control { request, reply } => self.control(request, reply),
                },
            }
            self.after_change();
        }
    }

    fn detach(&mut self) {
        log("detach", "exiting and leaving every instance running for the next supervisor");
        self.write_state();
    }

    fn shutdown(&mut self, why: &str) {
        if self.shutting_down {
            return;
        }
        log("supervisor", &format!("{why}: stopping every instance"));
        self.notifier.send("STOPPING=1");
        self.shutting_down = true;
        for name in self.order.clone() {
            self.dispatch(&name, Event::Stop);
        }
    }

    fn fire_timers(&mut self) {
        let now = self.now();
        let due: Vec<String> = self
            .order
            .iter()
            .filter(|n| self.insts.get(*n).and_then(|i| i.timer).is_some_and(|t| t <= now))
            .cloned()
            .collect();
        for name in due {
            if let Some(inst) = self.insts.get_mut(&name) {
                inst.timer = None;
            }
            self.dispatch(&name, Event::Timer);
        }
    }

    fn exited(&mut self, name: &str, pid: Pid, exit: Exit) {
        let Some(inst) = self.insts.get(name) else { return };
        if inst.unit.state.pid() == Some(pid) {
            if !inst.adopted {
                // Helpers the instance forked die with it (its process group): the group
                // still holds the PID, so it cannot belong to anyone else yet. (An adopted
                // process was reaped by init: its PID may be free, so no group kill.)
                let _ = killpg(NixPid::from_raw(pid), Signal::SIGKILL);
            }
            if let (Some(cgroups), Some(_)) = (&self.cgroups, &inst.cgroup) {
                cgroups.kill(name);
                cgroups.remove(name);
            }
        }
        let jitter = self.rng.random::<f64>();
        self.dispatch(name, Event::Exited { pid, exit, jitter });
    }

    fn dispatch(&mut self, name: &str, event: Event) {
        let now = self.now();
        let Some(inst) = self.insts.get_mut(name) else { return };
        if self.shutting_down && matches!(event, Event::Start | Event::Restart) {
            return;
        }
        let actions = lifecycle::step(&mut inst.unit, event, now);
        if self.shutting_down {
            // Nothing restarts while the supervisor stops.
            if let State::AutoRestart { .. } = inst.unit.state {
                inst.unit.state = State::Inactive;
            }
        }
        for action in actions {
            self.execute(name, action);
        }
    }

    fn execute(&mut self, name: &str, action: Action) {
        match action {
            Action::Log(message) => log(name, &message),
            Action::SetTimer { at } => {
                if let Some(inst) = self.insts.get_mut(name) {
                    inst.timer = Some(at);
                }
            }
            Action::Kill { pid, signal } => self.signal(name, pid, signal),
            Action::Spawn => {
                if self.shutting_down {
                    return;
                }
                self.spawn(name);
            }
        }
    }

    fn signal(&mut self, name: &str, pid: Pid, signal: i32) {
        let Some(inst) = self.insts.get(name) else { return };
        // Never signal a recycled PID: the process must still be the one we started.
        let now = launch::observe(pid);
        if now.as_ref().map(|o| o.start_time) != inst.start_time {
            log(name, &format!("process {pid} is gone or was replaced: not signalled"));
            return;
        }
        if signal == lifecycle::SIGKILL && self.shutting_down {
            self.unclean = true;
        }
        if signal == lifecycle::SIGKILL {
            if let (Some(cgroups), Some(_)) = (&self.cgroups, &inst.cgroup) {
                cgroups.kill(name);
            }
        }
        let Ok(sig) = Signal::try_from(signal) else { return };
        let result = if launch::process_group(pid) == Some(pid) {
            killpg(NixPid::from_raw(pid), sig)
        } else {
            kill(NixPid::from_raw(pid), sig)
        };
        if let Err(e) = result {
            log(name, &format!("cannot send {sig} to {pid}: {e}"));
        }
    }

    fn spawn(&mut self, name: &str) {
        let Some(inst) = self.insts.get_mut(name) else { return };
        let jitter = self.rng.random::<f64>();
        inst.cgroup = None;
        let mut cgroup = None;
        if let Some(cgroups) = &self.cgroups {
            let enforce = inst.spec.enforce_cgroup.then_some(&inst.spec.placement);
            match cgroups.prepare(name, enforce).and_then(|()| cgroups.procs(name)) {
                Ok(procs) => cgroup = Some((cgroups.path_of(name), procs)),
                Err(reason) if enforce.is_some() => {
                    let code = launch::status(pinctl_launch::ExitStatus::CpuAffinity);
                    let e = Event::StartFailed { pid: None, reason, code, jitter };
                    return self.dispatch(name, e);
                }
                Err(reason) => log(name, &format!("no cgroup of its own: {reason}")),
            }
        }
        let (cgroup_path, procs) = cgroup.unzip();
        let mut child = match launch::spawn(&inst.spec, !self.options.unpinned, procs) {
            Ok(child) => child,
            Err(f) => {
                let e = Event::StartFailed { pid: None, reason: f.reason, code: f.code, jitter };
                return self.dispatch(name, e);
            }
        };
        let Some(pid) = child.id().map(|p| p as Pid) else { return };
        // It joined its cgroup itself, before exec (a failure there failed the spawn).
        inst.cgroup = cgroup_path;
        let observed = launch::observe(pid);
        inst.start_time = observed.as_ref().map(|o| o.start_time);
        inst.cmdline = observed.map(|o| o.cmdline).unwrap_or_default();
        inst.started = Some(Instant::now());
        inst.adopted = false;
        if let Some(out) = child.stdout.take() {
            tokio::spawn(pump(name.to_string(), out));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(pump(name.to_string(), err));
        }
        let tx = self.tx.clone();
        let task_name = name.to_string();
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => match (status.code(), status.signal()) {
                    (Some(c), _) => Exit::Code(c),
                    (None, Some(s)) => Exit::Signal(s),
                    _ => Exit::Unknown,
                },
                Err(_) => Exit::Unknown,
            };
            let _ = tx.send(Msg::Exited { name: task_name, pid, exit });
        });
        let verified =
            if self.options.unpinned { Ok(()) } else { launch::verify(pid, &inst.spec.placement) };
        let event = match verified {
            Ok(()) => {
                let p = &inst.spec.placement;
                log(
                    name,
                    &format!(
                        "started as {pid} on CPUs {} (nodes {}), memory {} {}",
                        p.cpus, p.nodes, p.memory_policy, p.memory_nodes
                    ),
                );
                Event::Started { pid }
            }
            Err((reason, code)) => Event::StartFailed { pid: Some(pid), reason, code, jitter },
        };
        self.dispatch(name, event);
    }

    fn counts(&self) -> (usize, usize) {
        let live = self.insts.values().filter(|i| !i.removing);
        let running = live.clone().filter(|i| matches!(i.unit.state, State::Active { .. })).count();
        (running, live.count())
    }

    /// Bookkeeping after every input: drop removed instances once stopped, record the running
    /// processes, answer requests that waited for a state, tell systemd.
    fn after_change(&mut self) {
        let gone: Vec<String> = self
            .insts
            .iter()
            .filter(|(_, i)| {
                i.removing && matches!(i.unit.state, State::Inactive | State::Failed { .. })
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            self.insts.remove(&name);
            self.order.retain(|n| *n != name);
        }
        let mut pids: Vec<(String, Pid)> = self
            .order
            .iter()
            .filter_map(|n| Some((n.clone(), self.insts.get(n)?.unit.state.pid()?)))
            .collect();
        pids.sort();
        // Written when a process starts (or is adopted), so a supervisor killed right after
        // can adopt it. An exit alone is not written: it would put an fsync (several ms on a
        // busy disk) between a child's exit and its replacement's start, and the entry it
        // leaves is harmless (adoption checks PID and start time, so a gone or reused PID is
        // never adopted nor signalled); the next start's write drops it.
        let started = pids.iter().any(|p| !self.recorded.contains(p));
        if started && !self.shutting_down {
            self.write_state();
            self.recorded = pids;
        }
        let waiters = std::mem::take(&mut self.waiters);
        for w in waiters {
            let settled = w
                .names
                .iter()
                .all(|n| self.insts.get(n).is_none_or(|i| !i.unit.state.is_transient()));
            if settled {
                let r = self.status(&w.names);
                let _ = w.reply.send(r);
            } else {
                self.waiters.push(w);
            }
        }
        let (running, total) = self.counts();
        let line = format!("{running}/{total} running");
        if line != self.status_line {
            self.notifier.send(&format!("STATUS={line}"));
            self.status_line = line;
        }
        self.tell_observer();
    }

    /// Tells the observer of the instances when anything it sees changed.
    fn tell_observer(&mut self) {
        let Some(observer) = self.observer.as_mut() else { return };
        let now: Vec<Observed> = self
            .order
            .iter()
            .filter_map(|n| {
                let i = self.insts.get(n)?;
                Some(Observed {
                    name: n.clone(),
                    service: i.spec.service.clone(),
                    pid: i.unit.state.pid().and_then(|p| u32::try_from(p).ok()),
                    cgroup: i.cgroup.clone(),
                    placement: i.spec.placement.clone(),
                    restarts: i.unit.restarts,
                })
            })
            .collect();
        if now != self.observed {
            observer.instances(&now);
            self.observed = now;
        }
    }

    fn write_state(&self) {
        let instances = self
            .order
            .iter()
            .filter_map(|n| {
                let inst = self.insts.get(n)?;
                let pid = inst.unit.state.pid()?;
                Some(Entry {
                    name: n.clone(),
                    process: Recorded {
                        pid,
                        start_time: inst.start_time?,
                        cgroup: inst.cgroup.clone(),
                        // As it reads now: a process may exec again after its start
                        // (`sh -c '...; exec server'`).
                        cmdline: launch::observe(pid)
                            .filter(|o| Some(o.start_time) == inst.start_time)
                            .map_or_else(|| inst.cmdline.clone(), |o| o.cmdline),
                    },
                    digest: inst.spec.digest(),
                    spec: inst.spec.clone(),
                    restarts: inst.unit.restarts,
                })
            })
            .collect();
        let state = StateFile {
            format: statefile::FORMAT.into(),
            supervisor_pid: std::process::id() as i32,
            instances,
        };
        if let Err(e) = statefile::write(&self.options.state_file, &state) {
            log("warning", &e.to_string());
        }
    }

    fn unknown(&self, names: &[String]) -> Option<Response> {
        let unknown: Vec<&str> =
            names.iter().filter(|n| !self.insts.contains_key(*n)).map(String::as_str).collect();
        if unknown.is_empty() {
            return None;
        }
        Some(Response::error(format!(
            "no instance {}: the instances are {}",
            unknown.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            self.order.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        )))
    }

    fn control(&mut self, request: Request, reply: oneshot::Sender<Response>) {
        let (names, event) = match request {
            Request::Status { names } => {
                let r = self.unknown(&names).unwrap_or_else(|| self.status(&names));
                let _ = reply.send(r);
                return;
            }
            Request::Reload { dry_run } => {
                let _ = reply.send(self.reload(dry_run));
                return;
            }
            Request::Detach => return,
            Request::Start { names } => (names, Event::Start),
            Request::Stop { names } => (names, Event::Stop),
            Request::Restart { names } => (names, Event::Restart),
        };
        if let Some(r) = self.unknown(&names) {
            let _ = reply.send(r);
            return;
        }
        if names.is_empty() {
            let _ = reply.send(Response::error("name at least one instance"));
            return;
        }
        if self.shutting_down {
            let _ = reply.send(Response::error("the supervisor is stopping"));
            return;
        }
        for name in &names {
            self.dispatch(name, event.clone());
        }
        self.waiters.push(Waiter { names, reply });
    }

    fn status(&self, names: &[String]) -> Response {
        let instances = self
            .order
            .iter()
            .filter(|n| names.is_empty() || names.contains(n))
            .filter_map(|n| {
                let inst = self.insts.get(n)?;
                let p = &inst.spec.placement;
                let pid = inst.unit.state.pid();
                let usage = pid.and_then(launch::usage);
                Some(InstanceStatus {
                    name: n.clone(),
                    service: inst.spec.service.clone(),
                    state: inst.unit.state.name().into(),
                    pid,
                    uptime_s: pid.and(inst.started).map(|s| s.elapsed().as_secs_f64()),
                    restarts: inst.unit.restarts,
                    last_exit: inst.unit.last_exit.map(|e| e.to_string()),
                    reason: match &inst.unit.state {
                        State::Failed { reason } => Some(reason.clone()),
                        _ => None,
                    },
                    adopted: inst.adopted && pid.is_some(),
                    nodes: p.nodes.to_string(),
                    cpus: p.cpus.to_string(),
                    memory_policy: p.memory_policy.to_string(),
                    memory_nodes: p.memory_nodes.to_string(),
                    cpu_s: usage.map(|(cpu, _)| cpu),
                    rss_bytes: usage.and_then(|(_, rss)| rss),
                    drift: self.observer.as_ref().and_then(|o| o.drift(n)),
                })
            })
            .collect();
        Response { ok: true, instances: Some(instances), ..Response::default() }
    }

    /// Re-plans the file and applies the difference (or only returns it with `dry_run`).
    fn reload(&mut self, dry_run: bool) -> Response {
        if !dry_run {
            self.notifier.reloading();
        }
        // Running (or starting) instances keep their nodes and CPUs where the new plan can
        // keep them; one that is stopped, failed or waiting to restart loses nothing by moving.
        let running: BTreeMap<String, CurrentPlacement> = self
            .insts
            .iter()
            .filter(|(_, i)| !i.removing)
            .filter(|(_, i)| matches!(i.unit.state, State::Active { .. } | State::Activating))
            .map(|(name, i)| (name.clone(), i.spec.current_placement()))
            .collect();
        let planned = (self.planner)(&running);
        let response = match planned {
            Err(report) => Response::error(format!(
                "the service file was not applied, nothing changed:\n{report}"
            )),
            Ok(specs) => {
                let current: Vec<InstanceSpec> = self
                    .order
                    .iter()
                    .filter_map(|n| self.insts.get(n).filter(|i| !i.removing))
                    .map(|i| i.spec.clone())
                    .collect();
                let changes = diff(&current, &specs);
                if !dry_run {
                    self.apply(&changes, specs);
                    if let Some(observer) = self.observer.as_mut() {
                        observer.reloaded();
                    }
                }
                let changes = changes
                    .iter()
                    .map(|(name, change)| {
                        let mut v = serde_json::to_value(change).unwrap_or_default();
                        v["name"] = serde_json::Value::String(name.clone());
                        v
                    })
                    .collect();
                Response { ok: true, changes: Some(changes), ..Response::default() }
            }
        };
        if !dry_run {
            self.notifier.send("READY=1");
        }
        response
    }

    fn apply(&mut self, changes: &[(String, Change)], specs: Vec<InstanceSpec>) {
        let mut by_name: HashMap<String, InstanceSpec> =
            specs.iter().map(|s| (s.name.clone(), s.clone())).collect();
        let mut order: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        for name in &self.order {
            if !by_name.contains_key(name) {
                order.push(name.clone());
            }
        }
        self.order = order;
        for (name, change) in changes {
            log(name, &format!("reload: {change}"));
            match change {
                Change::Start => {
                    let spec = by_name.remove(name).expect("new spec");
                    match self.insts.get_mut(name) {
                        // Still stopping after an earlier reload removed it: keep tracking
                        // that process, start the new spec once it has exited.
                        Some(inst) => {
                            inst.removing = false;
                            inst.unit.policy = spec.policy.clone();
                            inst.spec = spec;
                            self.dispatch(name, Event::Restart);
                        }
                        None => {
                            self.insts.insert(name.clone(), Inst::new(spec));
                            self.dispatch(name, Event::Start);
                        }
                    }
                }
                Change::Stop => {
                    if let Some(inst) = self.insts.get_mut(name) {
                        inst.removing = true;
                    }
                    self.dispatch(name, Event::Stop);
                }
                Change::Keep | Change::Restart { .. } => {
                    let spec = by_name.remove(name).expect("new spec");
                    if let Some(inst) = self.insts.get_mut(name) {
                        inst.unit.policy = spec.policy.clone();
                        inst.spec = spec;
                        if matches!(change, Change::Restart { .. }) {
                            self.dispatch(name, Event::Restart);
                        }
                    }
                }
            }
        }
    }
}

/// The signals the supervisor handles (`None` where one cannot be caught).
struct Signals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
    usr2: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        Signals {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
            usr2: signal(SignalKind::user_defined2()).ok(),
        }
    }
}

async fn recv_signal(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Copies a child's output to pinctl's stdout, each line prefixed with the instance's name.
async fn pump(name: String, pipe: impl tokio::io::AsyncRead + Unpin) {
    let mut reader = tokio::io::BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                let mut out = io::stdout().lock();
                let _ = out.write_all(name.as_bytes());
                let _ = out.write_all(b": ");
                let _ = out.write_all(&line);
                let _ = out.flush();
            }
        }
    }
}

/// How often an adopted process is polled where pidfds are missing.
const POLL: Duration = Duration::from_millis(500);

/// Whether the recorded process still runs (same PID and start time, not a zombie).
fn still_runs(process: &Recorded) -> bool {
    launch::observe(process.pid)
        .is_some_and(|o| o.start_time == process.start_time && o.state != 'Z' && o.state != 'X')
}

/// Waits for an adopted process's pidfd to turn readable (it exited), on a thread of its own
/// that sleeps in poll(2) until then. Not tokio's `AsyncFd`: registering a descriptor with it
/// is `unsafe` (or deprecated) since tokio 1.5x, and only pinctl-sys may hold `unsafe`. A
/// blocked thread costs a small stack and no wake-ups. `Err`: no thread could be started.
fn watch_pidfd(
    name: String,
    process: Recorded,
    pidfd: std::os::fd::OwnedFd,
    tx: mpsc::UnboundedSender<Msg>,
) -> io::Result<()> {
    std::thread::Builder::new().name("pinctl-adopted".into()).stack_size(64 * 1024).spawn(
        move || {
            // The PID could have been reused between the adoption check and pidfd_open; the
            // pidfd now pins whichever process holds it, so one more check settles that it
            // is ours. A poll that fails (never seen) falls back to polling /proc.
            if still_runs(&process) && launch::wait_pidfd(&pidfd).is_err() {
                while still_runs(&process) {
                    std::thread::sleep(POLL);
                }
            }
            let _ = tx.send(Msg::Exited { name, pid: process.pid, exit: Exit::Unknown });
        },
    )?;
    Ok(())
}

/// Polls an adopted process until it is gone (kernels without `pidfd_open`).
async fn poll_adopted(name: String, process: Recorded, tx: mpsc::UnboundedSender<Msg>) {
    while still_runs(&process) {
        tokio::time::sleep(POLL).await;
    }
    let _ = tx.send(Msg::Exited { name, pid: process.pid, exit: Exit::Unknown });
}
