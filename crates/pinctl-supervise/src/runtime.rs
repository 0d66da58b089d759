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
//!
//! Nothing outside may stall the loop: pinctl's own output goes through [`relay`]'s bounded
//! queue and writer thread, the control socket is served within [`socket`]'s bounds, and a
//! reload plans the file on a blocking thread while the loop goes on.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pinctl_topology::Placement;
use rand::{Rng as _, SeedableRng as _};
use rustix::io::Errno;
use rustix::process::{Pid as ProcessId, Signal, kill_process, kill_process_group};
use tokio::io::AsyncReadExt as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::adopt::{self, Adoption, Recorded};
use crate::cgroup::{self, Subtree};
use crate::launch;
use crate::lifecycle::{self, Action, Event, Exit, Pid, State, Time, Unit};
use crate::notify::Notifier;
use crate::observe::{Observed, Observer};
use crate::output::{Fifos, FileOwner, OutputFile};
use crate::protocol::{InstanceStatus, ReopenedOutput, Request, Response, StartFailure};
use crate::relay;
use crate::socket::{self, SocketError};
use crate::spec::{Change, InstanceSpec, diff};
use crate::statefile::{self, Entry, StateError, StateFile, StateLock};

/// Where the supervisor listens and records.
#[derive(Debug, Clone)]
pub struct Options {
    /// The supervisor's name (`[host] name`, else its service file's): its cgroup subtree is
    /// `<pinctl's cgroup>/<name>`. Must be an instance-grammar name.
    pub name: String,
    pub socket: PathBuf,
    pub state_file: PathBuf,
    /// The state file of pinctl before supervisors were named (`/run/pinctl/state.json`): read
    /// once, when `state_file` does not exist yet, so an upgrade adopts what the older
    /// supervisor ran. `None` when the state file was given explicitly.
    pub legacy_state_file: Option<PathBuf>,
    /// Start instances without applying or checking their placement. Only for testing the
    /// supervisor against a topology larger than the machine it runs on.
    pub unpinned: bool,
    /// The service file it supervises, as `status` names it (`pinctl status --host`).
    pub config: Option<PathBuf>,
}

/// Re-reads and re-plans the service file on reload, given where the running instances are
/// (so the plan keeps them there when it can): the new specs with the file, or why the file
/// cannot be used (rendered diagnostics). Runs on a blocking thread (a large file takes a while
/// to plan), never on the event loop.
pub type Planner = Box<dyn FnMut(&BTreeMap<String, Placement>) -> Result<Replan, String> + Send>;

/// A reload's plan: the instances of the file as it reads now, and the file itself (whose
/// other settings, such as the drift watcher's, an observer takes up with the reload).
#[derive(Debug)]
pub struct Replan {
    pub specs: Vec<InstanceSpec>,
    /// The file as read, checked and planned on: what the observers take up on a reload.
    pub file: pinctl_launch::ServiceFile,
    /// What the plan and the file warn about, in `pinctl plan`'s words.
    pub warnings: Vec<String>,
}

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
    #[error(transparent)]
    Socket(#[from] SocketError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("{0}")]
    Cgroup(String),
    #[error("cannot start the supervisor's runtime: {0}")]
    Runtime(#[source] io::Error),
}

/// Claims the state file, the control socket and the cgroup subtree (refusing when another
/// supervisor holds any of them), then runs the supervisor until it is stopped or detached.
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
    // One supervisor per state file: the lock is held until this process ends.
    let lock = StateLock::acquire(&options.state_file)?;
    let listener = socket::bind(&options.socket)?;
    let socket_path = options.socket.clone();
    let result = claimed(options, initial, planner, observer, listener);
    if !matches!(result, Err(RunError::Socket(_))) {
        let _ = std::fs::remove_file(&socket_path);
    }
    relay::flush(Duration::from_secs(2));
    drop(lock);
    result
}

fn claimed(
    options: Options,
    initial: Vec<InstanceSpec>,
    planner: Planner,
    observer: Option<Box<dyn Observer>>,
    listener: std::os::unix::net::UnixListener,
) -> Result<Outcome, RunError> {
    let cgroups =
        match Subtree::setup(&launch::own_cgroup().unwrap_or_else(|| "/".into()), &options.name) {
            Ok(subtree) => {
                log("supervisor", &format!("one cgroup per instance under `{}`", subtree.path()));
                Some(subtree)
            }
            Err(cgroup::SetupError::Claimed(why)) => return Err(RunError::Cgroup(why)),
            Err(cgroup::SetupError::Unavailable(why)) => {
                log(
                    "supervisor",
                    &format!("{why}: stopping instances through their process groups"),
                );
                if let Some(s) = initial.iter().find(|s| s.enforce_cgroup) {
                    log(
                        "warning",
                        &format!(
                            "`enforce = \"cgroup\"` of `{}` cannot be applied without a cgroup \
                         subtree: the placement set at exec holds",
                            s.service
                        ),
                    );
                }
                None
            }
        };
    let nofile = raise_nofile_limit();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let result = runtime.block_on(async move {
        let listener = tokio::net::UnixListener::from_std(listener).map_err(|source| {
            RunError::Socket(SocketError::Bind { path: options.socket.clone(), source })
        })?;
        let (tx, rx) = mpsc::unbounded_channel();
        let control = tx.clone();
        let submit: socket::Submit = std::sync::Arc::new(move |request, reply| {
            control.send(Input::Control { request, reply }).is_ok()
        });
        tokio::spawn(socket::serve(listener, submit));
        // Signals are caught from here on: a SIGTERM while instances start stops them.
        let signals = Signals::new();
        let mut sup = Supervisor::new(options.clone(), tx, planner);
        sup.cgroups = cgroups;
        sup.nofile = nofile;
        sup.observer = observer;
        sup.start(initial);
        Ok(sup.main_loop(rx, signals).await)
    });
    // Detached: leave the instances to the next supervisor; tasks reading their output end
    // with the runtime.
    runtime.shutdown_background();
    result
}

/// Raises the soft `RLIMIT_NOFILE` to the hard one (systemd gives services 1024 soft): a
/// supervisor of many instances holds pipes, pidfds and connections. Returns the limits it
/// started with, which its instances get back.
fn raise_nofile_limit() -> Option<(u64, u64)> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let old = getrlimit(Resource::Nofile);
    let (soft, hard) = (old.current?, old.maximum);
    if hard.is_none_or(|h| h > soft) {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: hard, maximum: hard });
    }
    Some((soft, hard.unwrap_or(u64::MAX)))
}

/// Inputs from tasks to the dispatcher.
enum Input {
    Exited {
        name: String,
        pid: Pid,
        exit: Exit,
    },
    Control {
        request: Request,
        reply: oneshot::Sender<Response>,
    },
    /// The instance's cgroup emptied (`true`), or still holds processes after
    /// [`EMPTY_TIMEOUT`]: its spawn can go on, or fails.
    CgroupEmptied {
        name: String,
        emptied: bool,
    },
    /// A reload's plan, made on a blocking thread; the planner comes back with it.
    Planned {
        planner: Planner,
        result: Box<Result<Replan, String>>,
        reload: PendingReload,
    },
}

/// How long a spawn waits for the processes of an instance's previous run to leave its cgroup
/// once they were killed.
const EMPTY_TIMEOUT: Duration = Duration::from_secs(5);

/// A reload asked for (by SIGHUP when `reply` is `None`).
struct PendingReload {
    dry_run: bool,
    reply: Option<oneshot::Sender<Response>>,
}

/// One supervised instance with what the runtime knows about its process.
#[derive(Debug)]
struct Instance {
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
    /// The spec a reload gave it, taken up when it next starts: until then `spec` is what
    /// runs (so `status` never shows an old process with a new placement).
    next_spec: Option<InstanceSpec>,
    /// When the process that exited last had started: a start is said to have failed when a
    /// process started after it was asked has exited.
    last_exited_start: Option<Instant>,
}

impl Instance {
    /// Whether a process started at or after `asked` has exited.
    fn failed_since(&self, asked: Instant) -> bool {
        self.last_exited_start.is_some_and(|s| s >= asked)
    }

    fn new(spec: InstanceSpec) -> Instance {
        let unit = Unit::new(spec.policy.clone());
        Instance {
            spec,
            unit,
            adopted: false,
            start_time: None,
            cmdline: Vec::new(),
            started: None,
            timer: None,
            removing: false,
            cgroup: None,
            next_spec: None,
            last_exited_start: None,
        }
    }
}

/// How long a started instance must run before a `start` or `restart` reports it started: a
/// program that dies at once has not started.
const START_GRACE: Duration = Duration::from_secs(1);

/// A request waiting for its instances to settle.
struct Waiter {
    names: Vec<String>,
    /// For a start or restart: when it was asked. A process started since then must run
    /// [`START_GRACE`] to count as started; one that exits sooner failed to start.
    starting: Option<Instant>,
    then: Then,
}

/// What a settled waiter does.
enum Then {
    /// Answers a client with the instances' status.
    Answer(oneshot::Sender<Response>),
    /// Finishes the reload being applied.
    FinishReload,
}

/// A reload being applied: everything it stops is gone before anything it starts begins, so
/// two copies of one thing (one data directory, one port) never run at once.
struct Applying {
    /// Instances the reload stops (removed, or restarted with a changed spec), until gone.
    stopping: std::collections::BTreeSet<String>,
    /// Instances to start once `stopping` is empty: new ones, and the restarted ones.
    starting: Vec<String>,
    /// The answer so far, sent once the starts have settled.
    response: Response,
    reply: Option<oneshot::Sender<Response>>,
    /// Whether the starts were dispatched (a waiter then finishes the reload).
    started: bool,
}

struct Supervisor {
    options: Options,
    order: Vec<String>,
    instances: HashMap<String, Instance>,
    origin: Instant,
    tx: mpsc::UnboundedSender<Input>,
    rng: rand::rngs::StdRng,
    waiters: Vec<Waiter>,
    notifier: Notifier,
    /// `None` while a reload's plan is being made on its thread.
    planner: Option<Planner>,
    /// Reloads asked for while a plan was being made: made in turn.
    reloads: std::collections::VecDeque<PendingReload>,
    shutting_down: bool,
    unclean: bool,
    recorded: Vec<(String, Pid)>,
    status_line: String,
    cgroups: Option<Subtree>,
    /// Whether the log said that adopted processes are polled (no pidfds here).
    said_polling: bool,
    observer: Option<Box<dyn Observer>>,
    observed: Vec<Observed>,
    /// The `RLIMIT_NOFILE` pinctl started with, given back to instances.
    nofile: Option<(u64, u64)>,
    /// A reload being applied.
    applying: Option<Applying>,
    /// The instances' output FIFOs.
    fifos: Fifos,
    /// The writers of the instances' `output` files, by instance.
    outputs: HashMap<String, Arc<OutputFile>>,
    /// The tasks reading the instances' FIFOs (finished ones are dropped as new ones start).
    pumps: Vec<tokio::task::JoinHandle<()>>,
}

/// Whether a name in a request is a shell-style pattern: instance names never hold these.
fn is_pattern(name: &str) -> bool {
    name.contains(['*', '?', '['])
}

/// A line of pinctl's log, through the relay: never blocks the loop.
fn log(name: &str, message: &str) {
    relay::log_line(&format!("pinctl: {name}: {message}"));
}

impl Supervisor {
    fn new(options: Options, tx: mpsc::UnboundedSender<Input>, planner: Planner) -> Supervisor {
        let fifos = Fifos::beside(&options.state_file);
        Supervisor {
            options,
            order: Vec::new(),
            instances: HashMap::new(),
            origin: Instant::now(),
            tx,
            rng: rand::rngs::StdRng::from_os_rng(),
            waiters: Vec::new(),
            notifier: Notifier::from_env(),
            planner: Some(planner),
            reloads: std::collections::VecDeque::new(),
            shutting_down: false,
            unclean: false,
            recorded: Vec::new(),
            status_line: String::new(),
            cgroups: None,
            said_polling: false,
            observer: None,
            observed: Vec::new(),
            nofile: None,
            applying: None,
            fifos,
            outputs: HashMap::new(),
            pumps: Vec::new(),
        }
    }

    fn now(&self) -> Time {
        self.origin.elapsed()
    }

    /// Adopts what the state file names and `/proc` confirms, and what runs in the instances'
    /// cgroups unrecorded when it proves to be the instance; kills what else runs there;
    /// starts the rest.
    fn start(&mut self, specs: Vec<InstanceSpec>) {
        let recorded = self.recorded_entries(&specs);
        let mut adoptable: BTreeMap<String, Entry> = BTreeMap::new();
        for entry in recorded {
            match adopt::decide(&entry.process, launch::observe(entry.process.pid).as_ref()) {
                Adoption::Adopt => {
                    adoptable.insert(entry.name.clone(), entry);
                }
                Adoption::Ignore(why) => log(&entry.name, &format!("not adopted: {why}")),
            }
        }
        self.reconcile_cgroups(&specs, &mut adoptable);
        for spec in specs {
            let name = spec.name.clone();
            self.order.push(name.clone());
            match adoptable.remove(&name) {
                Some(entry) => {
                    let changed = entry.spec.changed(&spec);
                    self.adopt(entry, spec.policy.clone(), false);
                    if !changed.is_empty() {
                        let inst = self.instances.get_mut(&name).expect("just adopted");
                        inst.spec = spec;
                        let fields: Vec<&str> = changed.iter().map(|f| f.name()).collect();
                        log(&name, &format!("restarting: {} changed", fields.join(", ")));
                        self.dispatch(&name, Event::Restart);
                    }
                }
                None => {
                    self.instances.insert(name.clone(), Instance::new(spec));
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

    /// What the state file records (or, on the first start after an upgrade, the older
    /// pinctl's shared state file, for the instances this file names).
    fn recorded_entries(&self, specs: &[InstanceSpec]) -> Vec<Entry> {
        match statefile::read(&self.options.state_file) {
            Ok(Some(state)) => return state.instances,
            Ok(None) => {}
            Err(e) => {
                log("warning", &e.to_string());
                return Vec::new();
            }
        }
        let Some(legacy) = &self.options.legacy_state_file else { return Vec::new() };
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        match statefile::take_legacy(legacy, &names) {
            Ok(entries) => {
                if !entries.is_empty() {
                    log(
                        "supervisor",
                        &format!(
                            "taking {} instances over from `{}`, the state file of an older \
                             pinctl",
                            entries.len(),
                            legacy.display()
                        ),
                    );
                }
                entries
            }
            Err(e) => {
                log("warning", &e.to_string());
                Vec::new()
            }
        }
    }

    /// The cgroup is the truth: whatever runs in `<subtree>/<instance>` descends from a
    /// process this subtree's supervisor started. A recorded process found there is adopted
    /// (above); an unrecorded one is adopted when it proves to be the instance's main process
    /// (a supervisor killed between a spawn and its state write left it); anything else there,
    /// and every cgroup of an instance that no longer exists, is killed, with a log line.
    fn reconcile_cgroups(
        &mut self,
        specs: &[InstanceSpec],
        adoptable: &mut BTreeMap<String, Entry>,
    ) {
        let Some(cgroups) = &self.cgroups else { return };
        let leftovers = cgroups.clear_leaf(EMPTY_TIMEOUT);
        if leftovers > 0 {
            log(
                "supervisor",
                &format!(
                    "killed {leftovers} processes an earlier supervisor was starting when it \
                     stopped (they had not reached their instance's cgroup)"
                ),
            );
        }
        let by_name: BTreeMap<&str, &InstanceSpec> =
            specs.iter().map(|s| (s.name.as_str(), s)).collect();
        for name in cgroups.children() {
            let procs = cgroups.procs(&name);
            let path = cgroups.path_of(&name);
            // The cgroup's instance: the one of its name, or one a reload renamed while it ran
            // there (its recorded cgroup says so).
            let claims = |e: &Entry| e.name == name || e.process.cgroup.as_deref() == Some(&path);
            if let Some(entry) =
                adoptable.values_mut().find(|e| claims(e) && procs.contains(&e.process.pid))
            {
                // Recorded and found where it belongs (whatever the file said of its
                // cgroup: the kernel's word is the one kept).
                entry.process.cgroup = Some(path);
                continue;
            }
            if procs.is_empty() {
                if !adoptable.values().any(claims) {
                    cgroups.remove(&name);
                }
                continue;
            }
            let unrecorded = !adoptable.contains_key(&name);
            let pinned = !self.options.unpinned;
            let mut why_not = Vec::new();
            let proven = by_name.get(name.as_str()).filter(|_| unrecorded).and_then(|spec| {
                let leaders: Vec<Pid> = procs
                    .iter()
                    .copied()
                    .filter(|&p| match launch::proves_instance(p, spec, pinned) {
                        Ok(()) => true,
                        Err(why) => {
                            why_not.push(format!("{p}: {why}"));
                            false
                        }
                    })
                    .collect();
                match leaders[..] {
                    [pid] => Some((pid, (*spec).clone())),
                    _ => None,
                }
            });
            match proven.and_then(|(pid, spec)| {
                let observed = launch::observe(pid)?;
                Some(Entry {
                    name: name.clone(),
                    process: Recorded {
                        pid,
                        start_time: observed.start_time,
                        cgroup: observed.cgroup,
                        cmdline: observed.cmdline,
                    },
                    digest: spec.digest(),
                    spec,
                    restarts: 0,
                })
            }) {
                Some(entry) => {
                    log(
                        &name,
                        &format!(
                            "process {} runs in the instance's cgroup though the state file \
                             does not record it (a supervisor stopped before writing it): \
                             adopted",
                            entry.process.pid
                        ),
                    );
                    adoptable.insert(name, entry);
                }
                None => {
                    let pids: Vec<String> = procs.iter().map(Pid::to_string).collect();
                    let why = if why_not.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", why_not.join("; "))
                    };
                    log(
                        &name,
                        &format!(
                            "killing processes {} in `{}`: the state file does not explain \
                             them and none proves to be the instance{why}",
                            pids.join(", "),
                            cgroups.path_of(&name)
                        ),
                    );
                    cgroups.kill(&name);
                }
            }
        }
    }

    fn adopt(&mut self, entry: Entry, policy: lifecycle::Policy, removing: bool) {
        let pid = entry.process.pid;
        let mut unit = Unit::adopted(policy, pid, self.now());
        unit.restarts = entry.restarts;
        let age = launch::process_age(entry.process.start_time).unwrap_or_default();
        // Its recorded cgroup is used (to kill it whole, to read its memory) only when it is
        // one of this supervisor's: `<subtree>/<cgroup>` (its own name's, or the one it was
        // started in under an earlier name). An older pinctl's layout, or a cgroup that moved,
        // leaves it to its process group.
        let cgroup =
            entry.process.cgroup.clone().filter(|c| {
                self.cgroups.as_ref().is_some_and(|cgroups| cgroups.name_in(c).is_some())
            });
        if entry.process.cgroup.is_some() && cgroup.is_none() {
            log(
                &entry.name,
                &format!(
                    "its cgroup `{}` is not in this supervisor's subtree: stopped through its \
                     process group",
                    entry.process.cgroup.as_deref().unwrap_or("")
                ),
            );
        }
        let inst = Instance {
            spec: entry.spec,
            unit,
            adopted: true,
            start_time: Some(entry.process.start_time),
            cmdline: entry.process.cmdline.clone(),
            started: Instant::now().checked_sub(age).or(Some(Instant::now())),
            timer: None,
            removing,
            cgroup,
            next_spec: None,
            last_exited_start: None,
        };
        self.follow_output(&entry.name, &inst.spec);
        self.instances.insert(entry.name.clone(), inst);
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
                if Errno::from_io_error(&e) != Some(Errno::SRCH) && !self.said_polling {
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
        mut rx: mpsc::UnboundedReceiver<Input>,
        signals: Signals,
    ) -> Outcome {
        let Signals { mut term, mut int, mut hup, mut usr1, mut usr2 } = signals;
        let mut watchdog = self.notifier.watchdog_interval().map(tokio::time::interval);
        loop {
            if self.shutting_down && self.instances.values().all(|i| i.unit.state.pid().is_none()) {
                self.drain_fifos().await;
                self.close_outputs();
                self.fifos.remove_all();
                let _ = std::fs::remove_file(&self.options.state_file);
                if let Some(cgroups) = &self.cgroups {
                    cgroups.remove_all();
                }
                return Outcome::Stopped { clean: !self.unclean };
            }
            let next_timer = self.instances.values().filter_map(|i| i.timer).min();
            // A start waiting out its grace is answered when the grace is over.
            let grace = self
                .waiters
                .iter()
                .filter(|w| w.starting.is_some())
                .flat_map(|w| w.names.iter())
                .filter_map(|n| self.instances.get(n)?.started.map(|s| s + START_GRACE))
                .filter(|&at| at > Instant::now())
                .min();
            let wake = match (next_timer.map(|at| self.origin + at), grace) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(()) = recv_signal(&mut term) => self.shutdown("SIGTERM"),
                Some(()) = recv_signal(&mut int) => self.shutdown("SIGINT"),
                Some(()) = recv_signal(&mut hup) => {
                    self.request_reload(PendingReload { dry_run: false, reply: None });
                }
                Some(()) = recv_signal(&mut usr1) => {
                    // logrotate's `postrotate`: each writer says in the log how it went.
                    self.reopen_outputs();
                }
                Some(()) = recv_signal(&mut usr2) => {
                    self.detach();
                    return Outcome::Detached;
                }
                _ = tick(&mut watchdog) => self.notifier.send("WATCHDOG=1"),
                () = sleep => self.fire_timers(),
                Some(msg) = rx.recv() => match msg {
                    Input::Exited { name, pid, exit } => self.exited(&name, pid, exit),
                    Input::Control { request: Request::Detach, .. } => {
                        self.detach();
                        return Outcome::Detached;
                    }
                    Input::Control { request, reply } => self.control(request, reply),
                    Input::CgroupEmptied { name, emptied } => self.cgroup_emptied(&name, emptied),
                    Input::Planned { planner, result, reload } => {
                        self.planner = Some(planner);
                        self.finish_reload(*result, reload);
                        if let Some(next) = self.reloads.pop_front() {
                            self.request_reload(next);
                        }
                    }
                },
            }
            self.after_change();
        }
    }

    fn detach(&mut self) {
        log("detach", "exiting and leaving every instance running for the next supervisor");
        self.write_state();
        // Their FIFOs stay for the next supervisor; what the writers hold goes out first.
        self.close_outputs();
    }

    /// Reads the output of an adopted instance again from its FIFO, where it has one: what it
    /// wrote while no supervisor read is lost (its writes failed with EPIPE; SIGPIPE is
    /// ignored in instances), what it writes from now on goes where its spec says.
    fn follow_output(&mut self, name: &str, spec: &InstanceSpec) {
        let reader = match self.fifos.reopen(name) {
            Some(Ok(reader)) => reader,
            Some(Err(e)) => {
                return log(name, &format!("cannot read its output again: {e}: it is lost"));
            }
            None => {
                return log(
                    name,
                    "its output went through a pipe of the pinctl that started it, which is \
                     gone: what it writes is lost until it restarts (instances started by this \
                     pinctl write into a FIFO that outlives a detach)",
                );
            }
        };
        let owner = if spec.output.is_some() {
            match launch::output_owner(spec) {
                Ok(owner) => owner,
                Err(f) => {
                    return log(name, &format!("its output is not written: {}", f.reason));
                }
            }
        } else {
            None
        };
        let sink = output_sink(&mut self.outputs, name, spec.output.clone(), owner, false);
        start_pump(&mut self.pumps, name, reader, sink);
        log(
            name,
            "its output is read again from its FIFO (what it wrote while no supervisor read it \
             is lost)",
        );
    }

    /// Waits (at most 2 s) until the FIFOs of the stopped instances are read to their end: the
    /// last lines an instance wrote before it exited (a database's `Shutdown complete`) may
    /// still be in its FIFO when its exit is known.
    async fn drain_fifos(&mut self) {
        let pumps = std::mem::take(&mut self.pumps);
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            for p in pumps {
                let _ = p.await;
            }
        })
        .await;
    }

    /// Ends every output file's writer, giving them together at most 2 s to write what they
    /// hold (a file system that does not answer must not keep pinctl from exiting).
    fn close_outputs(&mut self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        for (_, file) in self.outputs.drain() {
            file.close(deadline.saturating_duration_since(std::time::Instant::now()));
        }
    }

    /// Asks every output file's writer to open its file again at its path (logrotate moved
    /// it): what to wait for, by instance.
    fn reopen_outputs(&self) -> Vec<(String, Arc<OutputFile>, u64)> {
        let mut asked: Vec<_> =
            self.outputs.iter().map(|(n, f)| (n.clone(), f.clone(), f.ask_reopen())).collect();
        asked.sort_by(|a, b| a.0.cmp(&b.0));
        asked
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
            .filter(|n| self.instances.get(*n).and_then(|i| i.timer).is_some_and(|t| t <= now))
            .cloned()
            .collect();
        for name in due {
            if let Some(inst) = self.instances.get_mut(&name) {
                inst.timer = None;
            }
            self.dispatch(&name, Event::Timer);
        }
    }

    fn exited(&mut self, name: &str, pid: Pid, exit: Exit) {
        // An instance renamed by a reload is still known to its exit watcher by its old name:
        // its PID finds it.
        let name = match self.instances.get(name) {
            Some(i) if i.unit.state.pid() == Some(pid) => name.to_string(),
            _ => self
                .instances
                .iter()
                .find(|(_, i)| i.unit.state.pid() == Some(pid))
                .map_or_else(|| name.to_string(), |(n, _)| n.clone()),
        };
        let name = name.as_str();
        let Some(inst) = self.instances.get_mut(name) else { return };
        if inst.unit.state.pid() == Some(pid) {
            inst.last_exited_start = inst.started;
            if !inst.adopted {
                // Helpers the instance forked die with it (its process group): the group
                // still holds the PID, so it cannot belong to anyone else yet. (An adopted
                // process was reaped by init: its PID may be free, so no group kill.)
                if let Some(group) = ProcessId::from_raw(pid) {
                    let _ = kill_process_group(group, Signal::KILL);
                }
            }
            if let Some((cgroups, cgroup)) = self.cgroups.as_ref().zip(inst.cgroup.as_deref()) {
                if let Some(dir) = cgroups.name_in(cgroup) {
                    cgroups.kill(dir);
                    cgroups.remove(dir);
                }
            }
        }
        let jitter = self.rng.random::<f64>();
        self.dispatch(name, Event::Exited { pid, exit, jitter });
    }

    fn dispatch(&mut self, name: &str, event: Event) {
        let now = self.now();
        let Some(inst) = self.instances.get_mut(name) else { return };
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
                if let Some(inst) = self.instances.get_mut(name) {
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
        let Some(inst) = self.instances.get(name) else { return };
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
            if let Some((cgroups, cgroup)) = self.cgroups.as_ref().zip(inst.cgroup.as_deref()) {
                if let Some(dir) = cgroups.name_in(cgroup) {
                    cgroups.kill(dir);
                }
            }
        }
        let (Some(sig), Some(id)) = (Signal::from_named_raw(signal), ProcessId::from_raw(pid))
        else {
            return;
        };
        let result = if launch::process_group(pid) == Some(pid) {
            kill_process_group(id, sig)
        } else {
            kill_process(id, sig)
        };
        if let Err(e) = result {
            log(name, &format!("cannot send signal {signal} to {pid}: {e}"));
        }
    }

    fn spawn(&mut self, name: &str) {
        // Nothing of an earlier run may be left in the instance's cgroup when its next process
        // starts: two copies of a database on one data directory is the harm this avoids.
        if let Some(cgroups) = &self.cgroups {
            match cgroups.populated(name) {
                Ok(false) => {}
                Ok(true) => {
                    let killed = cgroups.kill(name).unwrap_or(0);
                    log(
                        name,
                        &format!(
                            "{killed} processes of an earlier run are still in `{}`: killed; \
                             starting once they are gone",
                            cgroups.path_of(name)
                        ),
                    );
                    let tx = self.tx.clone();
                    let name = name.to_string();
                    let folder = cgroups.dir_of(&name);
                    tokio::spawn(async move {
                        let deadline = Instant::now() + EMPTY_TIMEOUT;
                        let mut emptied = false;
                        while Instant::now() < deadline {
                            if matches!(cgroup::populated_in(&folder), Ok(false)) {
                                emptied = true;
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        let _ = tx.send(Input::CgroupEmptied { name, emptied });
                    });
                    return;
                }
                Err(e) => {
                    let jitter = self.rng.random::<f64>();
                    let reason = format!("cannot tell whether its cgroup is empty for now: {e}");
                    return self
                        .dispatch(name, Event::StartFailed { pid: None, reason, code: 1, jitter });
                }
            }
        }
        let Some(inst) = self.instances.get_mut(name) else { return };
        let jitter = self.rng.random::<f64>();
        inst.cgroup = None;
        let mut cgroup = None;
        if let Some(cgroups) = &self.cgroups {
            // With a subtree, an instance starts in its cgroup or not at all: one started
            // outside it would be invisible to the next supervisor's look into the cgroups.
            let enforce = inst.spec.enforce_cgroup.then_some(&inst.spec.placement);
            match cgroups.prepare(name, enforce) {
                Ok(procs) => cgroup = Some((cgroups.path_of(name), procs)),
                Err(cgroup::PrepareError::NoCpuset) => {
                    let reason =
                        "`enforce = \"cgroup\"`: the cpuset controller cannot be enabled here"
                            .to_string();
                    let code = launch::status(pinctl_launch::ExitStatus::CpuAffinity);
                    let e = Event::StartFailed { pid: None, reason, code, jitter };
                    return self.dispatch(name, e);
                }
                Err(cgroup::PrepareError::Io(why)) => {
                    let reason = format!("cannot prepare its cgroup for now: {why}");
                    let e = Event::StartFailed { pid: None, reason, code: 1, jitter };
                    return self.dispatch(name, e);
                }
            }
        }
        let (cgroup_path, procs) = cgroup.unzip();
        let (reader, writer) = match self.fifos.create(name) {
            Ok(ends) => ends,
            Err(e) => {
                let reason = format!("cannot make its output FIFO: {e}");
                return self
                    .dispatch(name, Event::StartFailed { pid: None, reason, code: 1, jitter });
            }
        };
        let spawned = launch::spawn(&inst.spec, !self.options.unpinned, procs, self.nofile, writer);
        let launch::Spawned { mut child, output_owner } = match spawned {
            Ok(spawned) => spawned,
            Err(f) => {
                let e = Event::StartFailed { pid: None, reason: f.reason, code: f.code, jitter };
                return self.dispatch(name, e);
            }
        };
        let sink =
            output_sink(&mut self.outputs, name, inst.spec.output.clone(), output_owner, true);
        start_pump(&mut self.pumps, name, reader, sink);
        let Some(pid) = child.id().map(|p| p as Pid) else { return };
        // It joined its cgroup itself, before exec (a failure there failed the spawn).
        inst.cgroup = cgroup_path;
        let observed = launch::observe(pid);
        inst.start_time = observed.as_ref().map(|o| o.start_time);
        inst.cmdline = observed.map(|o| o.cmdline).unwrap_or_default();
        inst.started = Some(Instant::now());
        inst.adopted = false;
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
            let _ = tx.send(Input::Exited { name: task_name, pid, exit });
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

    /// The cgroup an instance's spawn waited on emptied (the spawn goes on), or did not.
    fn cgroup_emptied(&mut self, name: &str, emptied: bool) {
        if self.instances.get(name).is_none_or(|i| i.unit.state != State::Activating) {
            return;
        }
        if emptied {
            return self.spawn(name);
        }
        let jitter = self.rng.random::<f64>();
        let reason = format!(
            "processes of an earlier run are still in its cgroup {} s after they were killed",
            EMPTY_TIMEOUT.as_secs()
        );
        self.dispatch(name, Event::StartFailed { pid: None, reason, code: 1, jitter });
    }

    /// Whether a waiter's instances have settled: none on its way somewhere, and, for a
    /// start, each either failed (a process started since it was asked exited) or running
    /// past its grace.
    fn settled(&self, w: &Waiter) -> bool {
        w.names.iter().all(|n| {
            let Some(inst) = self.instances.get(n) else { return true };
            if inst.unit.state.is_transient() {
                return false;
            }
            let Some(asked) = w.starting else { return true };
            Instance::failed_since(inst, asked)
                || !matches!(inst.unit.state, State::Active { .. })
                || inst.started.is_some_and(|s| s + START_GRACE <= Instant::now())
        })
    }

    /// The instances a settled start waiter asked for that did not survive their start.
    fn start_failures(&self, w: &Waiter) -> Vec<StartFailure> {
        let Some(asked) = w.starting else { return Vec::new() };
        w.names
            .iter()
            .filter_map(|n| {
                let inst = self.instances.get(n)?;
                let running = matches!(inst.unit.state, State::Active { .. });
                if running && !Instance::failed_since(inst, asked) {
                    return None;
                }
                let reason = match (&inst.unit.state, inst.unit.last_exit) {
                    (State::Failed { reason }, _) => reason.clone(),
                    (_, Some(exit)) => format!("{exit} within {START_GRACE:?} of its start"),
                    (state, None) => format!("it is {}", state.name()),
                };
                Some(StartFailure { name: n.clone(), reason })
            })
            .collect()
    }

    fn counts(&self) -> (usize, usize) {
        let live = self.instances.values().filter(|i| !i.removing);
        let running = live.clone().filter(|i| matches!(i.unit.state, State::Active { .. })).count();
        (running, live.count())
    }

    /// Bookkeeping after every input: drop removed instances once stopped, record the running
    /// processes, answer requests that waited for a state, tell systemd.
    fn after_change(&mut self) {
        let gone: Vec<String> = self
            .instances
            .iter()
            .filter(|(_, i)| {
                i.removing && matches!(i.unit.state, State::Inactive | State::Failed { .. })
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            self.instances.remove(&name);
            self.order.retain(|n| *n != name);
            if let Some(file) = self.outputs.remove(&name) {
                file.close(Duration::ZERO);
            }
            self.fifos.remove(&name);
        }
        let mut pids: Vec<(String, Pid)> = self
            .order
            .iter()
            .filter_map(|n| Some((n.clone(), self.instances.get(n)?.unit.state.pid()?)))
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
        // A reload whose stops are over starts what it starts (a waiter answers it below).
        self.progress_reload();
        let waiters = std::mem::take(&mut self.waiters);
        for w in waiters {
            if !self.settled(&w) {
                self.waiters.push(w);
                continue;
            }
            let failed = self.start_failures(&w);
            let status = self.status(&w.names);
            let instances = status.instances.unwrap_or_default();
            match w.then {
                Then::Answer(reply) => {
                    let r = Response {
                        ok: true,
                        instances: Some(instances),
                        failed_to_start: failed,
                        ..Response::default()
                    };
                    let _ = reply.send(r);
                }
                Then::FinishReload => self.finish_reload_with(instances, failed),
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
                let i = self.instances.get(n)?;
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
                let inst = self.instances.get(n)?;
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
            boot_id: statefile::boot_id(),
            supervisor_pid: std::process::id() as i32,
            instances,
        };
        if let Err(e) = statefile::write(&self.options.state_file, &state) {
            log("warning", &e.to_string());
        }
    }

    /// The instances `names` address, in the supervisor's order: each an instance's name, a
    /// service's (all its instances) or a shell-style pattern over instance names (`redis-*`,
    /// `db-[01]`). `Err`: the error naming what matched nothing.
    fn resolve(&self, names: &[String]) -> Result<Vec<String>, String> {
        let mut unmatched = Vec::new();
        let mut wanted = std::collections::BTreeSet::new();
        for name in names {
            let before = wanted.len();
            if self.instances.contains_key(name) {
                wanted.insert(name.as_str());
            }
            for (n, inst) in &self.instances {
                if inst.spec.service == *name {
                    wanted.insert(n.as_str());
                }
            }
            if wanted.len() == before && is_pattern(name) {
                let pattern = glob::Pattern::new(name)
                    .map_err(|e| format!("`{name}` is not a valid pattern: {e}"))?;
                wanted.extend(
                    self.instances.keys().filter(|n| pattern.matches(n)).map(String::as_str),
                );
            }
            if wanted.len() == before && !self.instances.contains_key(name) {
                unmatched.push(format!("`{name}`"));
            }
        }
        if !unmatched.is_empty() {
            return Err(format!(
                "no instance {}: the instances are {}",
                unmatched.join(", "),
                self.order.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(self.order.iter().filter(|n| wanted.contains(n.as_str())).cloned().collect())
    }

    fn control(&mut self, request: Request, reply: oneshot::Sender<Response>) {
        let (names, event) = match request {
            Request::Status { names } => {
                let r = if names.is_empty() {
                    self.status(&self.order)
                } else {
                    self.resolve(&names).map_or_else(Response::error, |names| self.status(&names))
                };
                let _ = reply.send(r);
                return;
            }
            Request::Reload { dry_run } => {
                self.request_reload(PendingReload { dry_run, reply: Some(reply) });
                return;
            }
            Request::Detach => return,
            Request::ReopenLogs => {
                let asked = self.reopen_outputs();
                // Waited for off the loop: a file system that does not answer holds only this.
                tokio::task::spawn_blocking(move || {
                    let deadline = std::time::Instant::now() + REOPEN_PATIENCE;
                    let reopened: Vec<ReopenedOutput> = asked
                        .into_iter()
                        .map(|(name, file, asked)| {
                            let left =
                                deadline.saturating_duration_since(std::time::Instant::now());
                            let error = match file.wait_reopened(asked, left) {
                                Some(Ok(())) => None,
                                Some(Err(e)) => Some(e),
                                None => Some(format!(
                                    "not reopened within {} s (its file system does not \
                                     answer?)",
                                    REOPEN_PATIENCE.as_secs()
                                )),
                            };
                            ReopenedOutput { name, path: file.path().display().to_string(), error }
                        })
                        .collect();
                    // Each file's outcome is in the answer; the request itself was served.
                    let _ = reply.send(Response { ok: true, reopened, ..Response::default() });
                });
                return;
            }
            Request::Start { names } => (names, Event::Start),
            Request::Stop { names } => (names, Event::Stop),
            Request::Restart { names } => (names, Event::Restart),
        };
        if names.is_empty() {
            let _ = reply.send(Response::error("name at least one instance"));
            return;
        }
        let names = match self.resolve(&names) {
            Ok(names) => names,
            Err(e) => {
                let _ = reply.send(Response::error(e));
                return;
            }
        };
        if self.shutting_down {
            let _ = reply.send(Response::error("the supervisor is stopping"));
            return;
        }
        let starting = !matches!(event, Event::Stop);
        for name in &names {
            self.dispatch(name, event.clone());
        }
        self.wait_for(names, starting, Then::Answer(reply));
    }

    fn status(&self, names: &[String]) -> Response {
        let instances = self
            .order
            .iter()
            .filter(|n| names.contains(n))
            .filter_map(|n| {
                let inst = self.instances.get(n)?;
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
                    cgroup: inst.cgroup.clone().filter(|_| pid.is_some()),
                    cpu_s: usage.map(|(cpu, _)| cpu),
                    rss_bytes: usage.and_then(|(_, rss)| rss),
                    drift: self.observer.as_ref().and_then(|o| o.drift(n)),
                })
            })
            .collect();
        let supervisor = crate::protocol::SupervisorStatus {
            name: self.options.name.clone(),
            file: self.options.config.as_ref().map(|p| p.display().to_string()),
            pid: std::process::id(),
        };
        Response {
            ok: true,
            instances: Some(instances),
            supervisor: Some(supervisor),
            ..Response::default()
        }
    }

    /// Re-plans the file on a blocking thread (a large file takes a while; the loop goes on
    /// meanwhile), then [`Supervisor::finish_reload`] applies the difference. A reload asked
    /// for while one is being planned waits for it.
    fn request_reload(&mut self, reload: PendingReload) {
        if self.shutting_down {
            if let Some(reply) = reload.reply {
                let _ = reply.send(Response::error("the supervisor is stopping"));
            }
            return;
        }
        if self.applying.is_some() {
            self.reloads.push_back(reload);
            return;
        }
        let Some(mut planner) = self.planner.take() else {
            self.reloads.push_back(reload);
            return;
        };
        if !reload.dry_run {
            self.notifier.reloading();
        }
        // Running (or starting) instances keep their nodes and CPUs where the new plan can
        // keep them; one that is stopped, failed or waiting to restart loses nothing by moving.
        let running: BTreeMap<String, Placement> = self
            .instances
            .iter()
            .filter(|(_, i)| !i.removing)
            .filter(|(_, i)| matches!(i.unit.state, State::Active { .. } | State::Activating))
            .map(|(name, i)| (name.clone(), i.spec.placement.clone()))
            .collect();
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let result = planner(&running);
            let _ = tx.send(Input::Planned { planner, result: Box::new(result), reload });
        });
    }

    /// Applies a reload's plan (or only answers with the difference, for a dry run). The
    /// answer waits until the reload's starts have settled.
    fn finish_reload(&mut self, planned: Result<Replan, String>, reload: PendingReload) {
        let dry_run = reload.dry_run;
        let Replan { specs, file, warnings } = match planned {
            Ok(replan) if !self.shutting_down => replan,
            outcome => {
                let e = match outcome {
                    Err(report) => {
                        format!("the service file was not applied, nothing changed:\n{report}")
                    }
                    Ok(_) => "the supervisor is stopping".to_string(),
                };
                if !dry_run {
                    self.notifier.send("READY=1");
                }
                match reload.reply {
                    Some(reply) => {
                        let _ = reply.send(Response::error(e));
                    }
                    None => log("reload", &e),
                }
                return;
            }
        };
        let current: Vec<InstanceSpec> = self
            .order
            .iter()
            .filter_map(|n| self.instances.get(n).filter(|i| !i.removing))
            .map(|i| i.next_spec.clone().unwrap_or_else(|| i.spec.clone()))
            .collect();
        let changes = diff(&current, &specs);
        let lines = changes
            .iter()
            .map(|(name, change)| {
                let mut v = serde_json::to_value(change).unwrap_or_default();
                v["name"] = serde_json::Value::String(name.clone());
                v
            })
            .collect();
        let mut response = Response { ok: true, changes: Some(lines), ..Response::default() };
        if dry_run {
            response.warnings = warnings;
            if let Some(reply) = reload.reply {
                let _ = reply.send(response);
            }
            return;
        }
        for w in &warnings {
            log("warning", w);
        }
        response.warnings = warnings;
        if let Some(observer) = self.observer.as_mut() {
            response.not_applied = observer.reloaded(&file);
        }
        for note in &response.not_applied {
            log("reload", &format!("not applied: {note}"));
        }
        self.apply(&changes, specs, response, reload.reply);
        self.notifier.send("READY=1");
    }

    /// Applies a reload's difference: renames at once; stops of removed instances and of
    /// those restarted with a changed spec next; and the starts (new instances, the restarted
    /// ones with their new spec) only once every one of those stops is over.
    fn apply(
        &mut self,
        changes: &[(String, Change)],
        specs: Vec<InstanceSpec>,
        response: Response,
        reply: Option<oneshot::Sender<Response>>,
    ) {
        let mut by_name: HashMap<String, InstanceSpec> =
            specs.iter().map(|s| (s.name.clone(), s.clone())).collect();
        let mut applying = Applying {
            stopping: std::collections::BTreeSet::new(),
            starting: Vec::new(),
            response,
            reply,
            started: false,
        };
        for (name, change) in changes {
            log(name, &format!("reload: {change}"));
            match change {
                Change::Rename { from } => {
                    let spec = by_name.remove(name).expect("new spec");
                    if !self.rename(from, name, spec.clone()) {
                        // Nothing runs under the old name (an earlier reload took it):
                        // the new one simply starts.
                        self.instances.insert(name.clone(), Instance::new(spec));
                        applying.starting.push(name.clone());
                    }
                }
                Change::Start => {
                    let spec = by_name.remove(name).expect("new spec");
                    match self.instances.get_mut(name) {
                        // Still stopping after an earlier reload removed it: its new spec
                        // starts once that process has exited.
                        Some(inst) => {
                            inst.removing = false;
                            inst.unit.policy = spec.policy.clone();
                            inst.next_spec = Some(spec);
                        }
                        None => {
                            self.instances.insert(name.clone(), Instance::new(spec));
                        }
                    }
                    applying.starting.push(name.clone());
                }
                Change::Stop => {
                    if let Some(inst) = self.instances.get_mut(name) {
                        inst.removing = true;
                    }
                    self.stop_for_reload(name, &mut applying);
                }
                Change::Restart { .. } => {
                    let spec = by_name.remove(name).expect("new spec");
                    if let Some(inst) = self.instances.get_mut(name) {
                        inst.unit.policy = spec.policy.clone();
                        inst.next_spec = Some(spec);
                    }
                    self.stop_for_reload(name, &mut applying);
                    applying.starting.push(name.clone());
                }
                Change::Keep => {
                    let spec = by_name.remove(name).expect("new spec");
                    if let Some(inst) = self.instances.get_mut(name) {
                        inst.unit.policy = spec.policy.clone();
                        if inst.next_spec.is_some() {
                            inst.next_spec = Some(spec);
                        } else {
                            inst.spec = spec;
                        }
                    }
                }
            }
        }
        let mut order: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        for name in &self.order {
            if !order.contains(name) && self.instances.contains_key(name) {
                order.push(name.clone());
            }
        }
        self.order = order;
        self.applying = Some(applying);
    }

    /// Stops `name` for the reload being applied (when it runs) and remembers to wait for it.
    fn stop_for_reload(&mut self, name: &str, applying: &mut Applying) {
        let Some(inst) = self.instances.get(name) else { return };
        if inst.unit.state.pid().is_some() || inst.unit.state == State::Activating {
            applying.stopping.insert(name.to_string());
        }
        self.dispatch(name, Event::Stop);
    }

    /// Gives the instance `from` the name `to`, its process untouched: `false` when there is
    /// no `from`. Its process stays in the cgroup it was started in (cgroup v2 renames no
    /// cgroup) until it next starts, in `to`'s.
    fn rename(&mut self, from: &str, to: &str, spec: InstanceSpec) -> bool {
        let Some(mut inst) = self.instances.remove(from) else { return false };
        inst.unit.policy = spec.policy.clone();
        inst.spec = spec;
        self.instances.insert(to.to_string(), inst);
        // Its FIFO and output writer follow it (its lines keep the old name's prefix on
        // pinctl's stdout until it restarts).
        self.fifos.rename(from, to);
        if let Some(file) = self.outputs.remove(from) {
            self.outputs.insert(to.to_string(), file);
        }
        self.order.iter_mut().filter(|n| *n == from).for_each(|n| *n = to.to_string());
        // Its exit watchers (a task or a pidfd thread) still know it by its old name: an exit
        // is matched by PID (see `exited`).
        true
    }

    /// Moves a reload being applied on: once what it stops is gone, its starts begin; once
    /// they have settled (survived their start, or failed), whoever asked is answered.
    fn progress_reload(&mut self) {
        let Some(mut applying) = self.applying.take() else { return };
        if applying.started {
            self.applying = Some(applying);
            return;
        }
        applying.stopping.retain(|n| {
            self.instances
                .get(n)
                .is_some_and(|i| i.unit.state.pid().is_some() || i.unit.state.is_transient())
        });
        if !applying.stopping.is_empty() {
            self.applying = Some(applying);
            return;
        }
        applying.started = true;
        let starting = applying.starting.clone();
        for name in &starting {
            if let Some(inst) = self.instances.get_mut(name) {
                if let Some(next) = inst.next_spec.take() {
                    inst.spec = next;
                }
            }
            self.dispatch(name, Event::Start);
        }
        self.applying = Some(applying);
        self.wait_for(starting, true, Then::FinishReload);
    }

    /// Answers the reload being applied, its starts settled.
    fn finish_reload_with(&mut self, instances: Vec<InstanceStatus>, failed: Vec<StartFailure>) {
        let Some(mut applying) = self.applying.take() else { return };
        for f in &failed {
            log(&f.name, &format!("reload: did not start: {}", f.reason));
        }
        applying.response.instances = Some(instances);
        applying.response.failed_to_start = failed;
        if let Some(reply) = applying.reply.take() {
            let _ = reply.send(applying.response);
        }
        if let Some(next) = self.reloads.pop_front() {
            self.request_reload(next);
        }
    }

    /// Waits for `names` to settle (with `starting`, to survive [`START_GRACE`] after their
    /// start without an exit), then does `then`.
    fn wait_for(&mut self, names: Vec<String>, starting: bool, then: Then) {
        let starting = starting.then(Instant::now);
        self.waiters.push(Waiter { names, starting, then });
    }
}

/// The signals the supervisor handles (`None` where one cannot be caught).
struct Signals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
    usr1: Option<tokio::signal::unix::Signal>,
    usr2: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        Signals {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
            usr1: signal(SignalKind::user_defined1()).ok(),
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

/// How long `reopen-logs` waits for the output files to be opened again.
const REOPEN_PATIENCE: Duration = Duration::from_secs(5);

/// Where the output of instance `name` goes: its `output` file's writer (kept while the
/// path and owner stay the same, the file opened again when the instance `starts`), or
/// pinctl's stdout.
fn output_sink(
    outputs: &mut HashMap<String, Arc<OutputFile>>,
    name: &str,
    output: Option<PathBuf>,
    owner: Option<FileOwner>,
    starts: bool,
) -> Sink {
    let Some(path) = output else {
        if let Some(old) = outputs.remove(name) {
            old.close(Duration::ZERO);
        }
        return Sink::Stdout;
    };
    if let Some(file) = outputs.get(name).filter(|f| f.writes(&path, owner.as_ref())) {
        if starts {
            file.reopen_for_start();
        }
        return Sink::File(file.clone());
    }
    let file = OutputFile::start(name, &path, owner);
    if let Some(old) = outputs.insert(name.to_string(), file.clone()) {
        old.close(Duration::ZERO);
    }
    Sink::File(file)
}

/// Reads the FIFO `reader` of instance `name` into `sink` until every writer of it closed,
/// on a task kept in `pumps` (finished ones are dropped).
fn start_pump(
    pumps: &mut Vec<tokio::task::JoinHandle<()>>,
    name: &str,
    reader: tokio::net::unix::pipe::Receiver,
    sink: Sink,
) {
    pumps.retain(|p| !p.is_finished());
    pumps.push(tokio::spawn(pump(name.to_string(), reader, sink)));
}

/// Where an instance's output lines go.
enum Sink {
    /// pinctl's stdout, each line prefixed with the instance's name.
    Stdout,
    /// Its `output` file.
    File(Arc<OutputFile>),
}

impl Sink {
    fn line(&self, name: &str, line: &[u8]) {
        match self {
            Sink::Stdout => relay::instance_line(name, line),
            Sink::File(file) => file.line(line),
        }
    }
}

/// Copies what a child writes into its FIFO to `sink`, line by line: lines are cut at
/// [`relay::LINE_MAX`] and never wait for whoever reads or writes them next.
async fn pump(name: String, mut pipe: impl tokio::io::AsyncRead + Unpin, sink: Sink) {
    let mut splitter = relay::LineSplitter::default();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => splitter.feed(&chunk[..n], |line| sink.line(&name, line)),
        }
    }
    splitter.finish(|line| sink.line(&name, line));
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
    tx: mpsc::UnboundedSender<Input>,
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
            let _ = tx.send(Input::Exited { name, pid: process.pid, exit: Exit::Unknown });
        },
    )?;
    Ok(())
}

/// Polls an adopted process until it is gone (kernels without `pidfd_open`).
async fn poll_adopted(name: String, process: Recorded, tx: mpsc::UnboundedSender<Input>) {
    while still_runs(&process) {
        tokio::time::sleep(POLL).await;
    }
    let _ = tx.send(Input::Exited { name, pid: process.pid, exit: Exit::Unknown });
}
