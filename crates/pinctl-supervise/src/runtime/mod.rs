//! The tokio side: a dispatcher that `select!`s over signals, child exits, timers and
//! control-socket requests, turns each into an [`Event`] for [`lifecycle::step`] (or, while a
//! reload is applied, for [`reload::step`], which orders the reload's stops and starts around
//! requests by hand), and carries out the actions they return. No lifecycle or reload
//! decision is made here.
//!
//! Exits of the supervisor's own children come from tokio (pidfd or SIGCHLD, then `waitpid`,
//! so no zombie outlives a reap). An adopted process is not our child (init reaps it, and its
//! exit status is lost): its exit is seen through a pidfd (`pidfd_open`, Linux 5.3+) that
//! turns readable when it exits, so an idle supervisor has no periodic wake-up. Where the
//! kernel has no `pidfd_open`, `/proc/PID/stat` (PID and start time) is polled every 500 ms
//! instead, only while adopted processes exist, and the log says so once.
//!
//! Nothing outside may stall the loop: pinctl's own output goes through [`relay`]'s bounded
//! queue and writer thread, an instance's output file is opened and written by a thread of its
//! own ([`OutputFile`]), the control socket is served within [`socket`]'s bounds, and a reload
//! plans the file on a blocking thread while the loop goes on.
//!
//! One file per role, as nextest splits its runner: this one holds the types the roles share
//! and how a supervisor claims what it needs; `events` the loop and what follows every
//! input, `startup` adoption of what an earlier supervisor left, `spawn` starting a
//! process, `outputs` the instances' output as the loop sees it, `control` the socket's
//! requests and `reloading` applying a reload.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pinctl_topology::Placement;
use rand::{Rng as _, SeedableRng as _};
use rustix::io::Errno;
use rustix::process::{Pid as ProcessId, Signal, kill_process, kill_process_group};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::adopt::{self, Adoption, Recorded};
use crate::cgroup::{self, Subtree};
use crate::launch;
use crate::lifecycle::{self, Action, Event, Exit, Pid, State, Time, Unit};
use crate::notify::Notifier;
use crate::observe::{Observed, Observer};
use crate::output::{Fifos, OutputFile};
use crate::protocol::{InstanceStatus, ReopenedOutput, Request, Response, StartFailure};
use crate::relay;
use crate::reload::{self, Reload, START_GRACE, Seen};
use crate::socket::{self, SocketError};
use crate::spec::{Change, InstanceSpec, diff};
use crate::statefile::{self, Entry, StateError, StateFile, StateLock};

mod control;
mod events;
mod outputs;
mod reloading;
mod spawn;
mod startup;

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
    let lock = StateLock::acquire(&options.state_file)?;
    run_observed(lock, options, initial, planner, None)
}

/// [`run`] with the state file's lock already taken (`lock`, of `options.state_file`: taken
/// before anything else a second supervisor would collide on, a metrics port say, so that it
/// is the lock that refuses, naming its holder), telling `observer` of the instances after
/// every change (the drift watcher).
pub fn run_observed(
    lock: StateLock,
    options: Options,
    initial: Vec<InstanceSpec>,
    planner: Planner,
    observer: Option<Box<dyn Observer>>,
) -> Result<Outcome, RunError> {
    // One supervisor per state file: the lock is held until this process ends. (Its path is
    // absolute; the state file's may be relative: only the names are compared.)
    debug_assert_eq!(lock.path().file_name(), StateLock::path_for(&options.state_file).file_name());
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
    /// The output file of the start `token` of instance `name` was opened (its spawn goes on)
    /// or could not be (its start fails).
    OutputOpened {
        name: String,
        token: u64,
        result: Result<(), String>,
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
    /// The spec a reload gave it that it did not start with (a stop by hand took it out of
    /// the reload), taken up when it next spawns: until then `spec` is what runs (so `status`
    /// never shows an old process with a new placement).
    next_spec: Option<InstanceSpec>,
    /// When the process that exited last had started: a start is said to have failed when a
    /// process started after it was asked has exited.
    last_exited_start: Option<Instant>,
    /// A start waiting for its output file to be opened, with the number that start was given.
    prepared: Option<(u64, Prepared)>,
}

/// What a start made ready before its process is spawned.
#[derive(Debug)]
struct Prepared {
    /// The instance's cgroup and its `cgroup.procs`, when it has one.
    cgroup: Option<String>,
    procs: Option<std::fs::File>,
    /// The end of its FIFO the instance writes into.
    output: OwnedFd,
}

impl Instance {
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
            prepared: None,
        }
    }
}

/// A request by hand waiting for its instances to settle, then answered.
struct Waiter {
    names: Vec<String>,
    /// For a start or restart: when it was asked. A process started since then must run
    /// [`START_GRACE`] to count as started; one that exits sooner failed to start.
    starting: Option<Time>,
    reply: oneshot::Sender<Response>,
}

/// A reload being applied: [`reload::step`] decides; this holds what it carries.
struct Applying {
    reload: Reload,
    /// The specs it gives the instances it starts, until each takes its own up.
    specs: HashMap<String, InstanceSpec>,
    /// The answer so far, sent once the starts have settled.
    response: Response,
    reply: Option<oneshot::Sender<Response>>,
    /// When it asked to look again (a start's grace ends).
    wake: Option<Time>,
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
    /// The instances' `output` files, by instance.
    outputs: HashMap<String, Arc<OutputFile>>,
    /// The tasks relaying the instances' FIFOs to stdout (finished ones are dropped as new
    /// ones start).
    pumps: Vec<tokio::task::JoinHandle<()>>,
    /// The number of the last start that waited for its output file.
    starts: u64,
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
            starts: 0,
        }
    }

    fn now(&self) -> Time {
        self.origin.elapsed()
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

/// How long a stopping supervisor waits for the instances' FIFOs to be written out.
const DRAIN_PATIENCE: Duration = Duration::from_secs(5);

/// How often an adopted process is polled where pidfds are missing.
const POLL: Duration = Duration::from_millis(500);
