//! One instance's lifecycle as a pure state machine: [`step`] takes the instance, an event and
//! the time, changes the instance's state and returns what the runtime must do. No clock is
//! read here and nothing random happens here: `now` and the jitter come in with the call, so
//! every decision is a function of (state, event, now) and is tested with a fake clock.
//!
//! States are named as systemd names them: `activating`, `active`, `deactivating`, `failed`,
//! `auto-restart`, `inactive`.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use pinctl_launch::ExitStatus;
use serde::{Deserialize, Serialize};

/// A point in time: how long after an arbitrary origin (the runtime's start). Monotonic.
pub type Time = Duration;

/// A process id.
pub type Pid = i32;

/// When an instance is started again after it exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Restart {
    Always,
    OnFailure,
    Never,
}

/// How an instance is supervised: the lifecycle keys of its service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub restart: Restart,
    /// The first restart delay; each quick failure doubles it.
    pub restart_delay: Duration,
    /// The largest restart delay. An instance that ran at least this long before it exited
    /// starts over at `restart_delay`.
    pub restart_max_delay: Duration,
    /// At most `burst` starts within `interval`; one more makes the instance `failed`.
    pub start_limit: Option<StartLimit>,
    /// Signal number that asks the instance to stop.
    pub stop_signal: i32,
    /// How long after `stop_signal` the whole instance gets `KILL`.
    pub stop_timeout: Duration,
}

impl Default for Policy {
    /// A service file's defaults (pinctl-config holds them; this only translates).
    fn default() -> Policy {
        let limit = pinctl_config::DEFAULT_START_LIMIT;
        Policy {
            restart: Restart::OnFailure,
            restart_delay: pinctl_config::DEFAULT_RESTART_DELAY,
            restart_max_delay: pinctl_config::DEFAULT_RESTART_MAX_DELAY,
            start_limit: Some(StartLimit { burst: limit.burst, interval: limit.interval }),
            stop_signal: SIGTERM,
            stop_timeout: pinctl_config::DEFAULT_STOP_TIMEOUT,
        }
    }
}

/// `start-limit = "5/10s"`: at most 5 starts within 10 seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartLimit {
    pub burst: u32,
    pub interval: Duration,
}

/// SIGTERM's number (the same on every Linux architecture).
pub const SIGTERM: i32 = 15;
/// SIGKILL's number (the same on every Linux architecture).
pub const SIGKILL: i32 = 9;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exit {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Ended, status unknown: an adopted process is reaped by init, not by the supervisor.
    Unknown,
}

impl Exit {
    /// A clean exit: status 0.
    pub fn is_success(self) -> bool {
        self == Exit::Code(0)
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit status {c}"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
            Exit::Unknown => f.write_str("exited (status unknown: adopted process)"),
        }
    }
}

/// What happens once a stopping instance has exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterStop {
    /// Stay stopped (`inactive`).
    Stay,
    /// Start again at once (a restart by hand, or a changed spec on reload).
    Start,
    /// Become `failed` with this reason (a start whose placement did not verify).
    Fail(String),
}

/// The lifecycle state of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Not running and not scheduled to run.
    Inactive,
    /// A spawn was asked for; the runtime has not reported how it went.
    Activating,
    /// Running as `pid` since `since`.
    Active { pid: Pid, since: Time },
    /// `stop-signal` was sent at `signalled`; at `kill_at` the whole instance gets `KILL`
    /// (`killed` once it has).
    Deactivating { pid: Pid, since: Time, kill_at: Time, killed: bool, then: AfterStop },
    /// Exited; starts again at `at`.
    AutoRestart { at: Time },
    /// Will not start again until started by hand.
    Failed { reason: String },
}

impl State {
    /// systemd's name for the state.
    pub fn name(&self) -> &'static str {
        match self {
            State::Inactive => "inactive",
            State::Activating => "activating",
            State::Active { .. } => "active",
            State::Deactivating { .. } => "deactivating",
            State::AutoRestart { .. } => "auto-restart",
            State::Failed { .. } => "failed",
        }
    }

    /// The running process, if any.
    pub fn pid(&self) -> Option<Pid> {
        match self {
            State::Active { pid, .. } | State::Deactivating { pid, .. } => Some(*pid),
            _ => None,
        }
    }

    /// Whether the state is on its way somewhere (a request waiting for it is not done yet).
    pub fn is_transient(&self) -> bool {
        matches!(self, State::Activating | State::Deactivating { .. })
    }
}

/// Something that happened to an instance.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Start it (at supervisor start, by hand, or for a new instance on reload). Clears
    /// `failed` and the start history.
    Start,
    /// Stop it and leave it stopped.
    Stop,
    /// Stop it if it runs, then start it.
    Restart,
    /// The spawn asked for by [`Action::Spawn`] succeeded and the placement was verified.
    Started { pid: Pid },
    /// The spawn failed or the placement did not verify. `pid` is the process when one was
    /// created (it must be killed); `code` is the exit status the failure stands for (127 for
    /// a missing program, 215/242 for placement), which decides whether to retry.
    StartFailed { pid: Option<Pid>, reason: String, code: i32, jitter: f64 },
    /// The process `pid` ended. `jitter` is a random value in `[0, 1)` drawn by the runtime.
    Exited { pid: Pid, exit: Exit, jitter: f64 },
    /// A timer set with [`Action::SetTimer`] (or any earlier one) fired.
    Timer,
}

/// What the runtime must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Spawn the instance, then report [`Event::Started`] or [`Event::StartFailed`].
    Spawn,
    /// Send `signal` to the whole instance (its cgroup or process group) of process `pid`.
    Kill { pid: Pid, signal: i32 },
    /// Send [`Event::Timer`] at `at` (or soon after). Earlier timers may still fire; the state
    /// machine ignores those that come early.
    SetTimer { at: Time },
    /// A line for the supervisor's log.
    Log(String),
}

/// One supervised instance: its state and the history the rules need.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub policy: Policy,
    pub state: State,
    /// Automatic restarts so far (not starts by hand).
    pub restarts: u32,
    /// Quick failures in a row: the exponent of the next restart delay.
    pub attempt: u32,
    /// Start times within the start-limit interval (oldest first).
    pub starts: VecDeque<Time>,
    pub last_exit: Option<Exit>,
}

impl Unit {
    /// A stopped instance with this policy.
    pub fn new(policy: Policy) -> Unit {
        Unit {
            policy,
            state: State::Inactive,
            restarts: 0,
            attempt: 0,
            starts: VecDeque::new(),
            last_exit: None,
        }
    }

    /// An instance found running (adopted from an earlier supervisor).
    pub fn adopted(policy: Policy, pid: Pid, now: Time) -> Unit {
        Unit { state: State::Active { pid, since: now }, ..Unit::new(policy) }
    }
}

/// The restart delay before jitter: `restart_delay * 2^attempt`, at most `restart_max_delay`.
pub fn backoff(policy: &Policy, attempt: u32) -> Duration {
    let base = policy.restart_delay.max(Duration::from_millis(1));
    let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
    base.checked_mul(factor).unwrap_or(Duration::MAX).min(policy.restart_max_delay.max(base))
}

/// The delay actually waited: uniformly within `[d/2, d]` of the backoff `d` (`jitter` in
/// `[0, 1)`; values outside are clamped), so instances that failed together do not all come
/// back at the same instant.
pub fn jittered(delay: Duration, jitter: f64) -> Duration {
    let j = if jitter.is_finite() { jitter.clamp(0.0, 1.0) } else { 0.0 };
    delay.mul_f64(0.5 + 0.5 * j)
}

/// Whether a process that ended with `exit` is started again under `restart`.
pub fn should_restart(restart: Restart, exit: Exit) -> bool {
    if let Exit::Code(c) = exit {
        if ExitStatus::is_permanent(c) {
            return false;
        }
    }
    match restart {
        Restart::Always => true,
        Restart::OnFailure => !exit.is_success(),
        Restart::Never => false,
    }
}

/// Applies `event` at `now` to `unit`; returns what the runtime must do, in order. Every
/// transition into `failed` comes with a log line that says why (systemd's "Failed at step
/// CHDIR", "Start request repeated too quickly"): `pinctl status` is not the only place it
/// shows.
pub fn step(unit: &mut Unit, event: Event, now: Time) -> Vec<Action> {
    let was_failed = matches!(unit.state, State::Failed { .. });
    let mut out = transition(unit, event, now);
    if let (false, State::Failed { reason }) = (was_failed, &unit.state) {
        out.push(Action::Log(format!("failed: {reason}")));
    }
    out
}

/// The state table: one row per state and event, and the state that follows. It stays one
/// `match` so that the table reads whole; rows whose step takes more than a few lines call it
/// by name (`fails_for_good`, `exited`, `AfterStop::follow`).
fn transition(unit: &mut Unit, event: Event, now: Time) -> Vec<Action> {
    let mut out = Vec::new();
    let state = std::mem::replace(&mut unit.state, State::Inactive);
    unit.state = match (state, event) {
        // Starting.
        (State::Inactive | State::Failed { .. }, Event::Start | Event::Restart) => {
            unit.starts.clear();
            unit.attempt = 0;
            begin_start(unit, now, &mut out)
        }
        (State::AutoRestart { .. }, Event::Start | Event::Restart) => {
            begin_start(unit, now, &mut out)
        }
        (State::AutoRestart { at }, Event::Timer) if now >= at => {
            unit.restarts += 1;
            begin_start(unit, now, &mut out)
        }
        (State::Activating, Event::Started { pid }) => State::Active { pid, since: now },
        (State::Activating, Event::StartFailed { pid: Some(pid), reason, .. }) => {
            out.push(Action::Log(format!("start failed: {reason}")));
            begin_stop(unit, pid, now, now, SIGKILL, AfterStop::Fail(reason), &mut out)
        }
        (State::Activating, Event::StartFailed { pid: None, reason, code, jitter }) => {
            unit.last_exit = Some(Exit::Code(code));
            match fails_for_good(&unit.policy, &reason, code) {
                Some(reason) => State::Failed { reason },
                None => {
                    out.push(Action::Log(format!("start failed: {reason}")));
                    schedule_restart(unit, now, jitter, &mut out)
                }
            }
        }
        // Running.
        (State::Active { pid, since }, Event::Exited { pid: p, exit, jitter }) if p == pid => {
            exited(unit, since, exit, now, jitter, &mut out)
        }
        (State::Active { pid, since }, Event::Stop) => {
            let signal = unit.policy.stop_signal;
            begin_stop(unit, pid, since, now, signal, AfterStop::Stay, &mut out)
        }
        (State::Active { pid, since }, Event::Restart) => {
            let signal = unit.policy.stop_signal;
            begin_stop(unit, pid, since, now, signal, AfterStop::Start, &mut out)
        }
        // Stopping.
        (State::Deactivating { pid, kill_at, killed: false, since, then }, Event::Timer)
            if now >= kill_at =>
        {
            out.push(Action::Log(format!(
                "did not stop within {:?}: sending KILL to the whole instance",
                unit.policy.stop_timeout
            )));
            out.push(Action::Kill { pid, signal: SIGKILL });
            State::Deactivating { pid, since, kill_at, killed: true, then }
        }
        (State::Deactivating { pid, then, .. }, Event::Exited { pid: p, exit, .. }) if p == pid => {
            then.follow(unit, exit, now, &mut out)
        }
        (
            State::Deactivating { pid, since, kill_at, killed, .. },
            Event::Restart | Event::Start,
        ) => State::Deactivating { pid, since, kill_at, killed, then: AfterStop::Start },
        (State::Deactivating { pid, since, kill_at, killed, then }, Event::Stop) => {
            let then = if matches!(then, AfterStop::Fail(_)) { then } else { AfterStop::Stay };
            State::Deactivating { pid, since, kill_at, killed, then }
        }
        (State::AutoRestart { .. } | State::Failed { .. }, Event::Stop) => State::Inactive,
        // Everything else changes nothing: a stale timer, an exit of an old PID, a start of a
        // running instance.
        (state, _) => state,
    };
    out
}

/// Why a start that failed before its program ran (`code` says at which step) fails for good,
/// if it does: every start would fail the same way, or restarts are off.
fn fails_for_good(policy: &Policy, reason: &str, code: i32) -> Option<String> {
    if !ExitStatus::fails_every_start(code) && policy.restart != Restart::Never {
        return None;
    }
    Some(match ExitStatus::of_code(code).and_then(ExitStatus::start_step) {
        Some(step) => format!("{reason} (at step {step}, exit status {code})"),
        None => format!("{reason} (exit status {code})"),
    })
}

/// A running instance's process ended on its own (active `since`): restarted if the policy
/// says so (the backoff starts over after a long enough run), else inactive or failed.
fn exited(
    unit: &mut Unit,
    since: Time,
    exit: Exit,
    now: Time,
    jitter: f64,
    out: &mut Vec<Action>,
) -> State {
    unit.last_exit = Some(exit);
    if now.saturating_sub(since) >= unit.policy.restart_max_delay {
        unit.attempt = 0;
    }
    if should_restart(unit.policy.restart, exit) {
        out.push(Action::Log(format!("{exit}")));
        schedule_restart(unit, now, jitter, out)
    } else if exit.is_success() {
        out.push(Action::Log(format!("{exit}")));
        State::Inactive
    } else {
        let why = if unit.policy.restart == Restart::Never {
            "restart = \"never\""
        } else {
            "a restart would fail the same way"
        };
        State::Failed { reason: format!("{exit} ({why})") }
    }
}

impl AfterStop {
    /// What follows once the process of a stop ended with `exit`: the instance stays
    /// stopped, fails, or starts again, as the stop was asked for.
    fn follow(self, unit: &mut Unit, exit: Exit, now: Time, out: &mut Vec<Action>) -> State {
        unit.last_exit = Some(exit);
        match self {
            AfterStop::Stay => {
                // One line per instance that a stop ended (`pinctl stop`, SIGTERM to pinctl).
                out.push(Action::Log(format!("stopped ({exit})")));
                State::Inactive
            }
            AfterStop::Fail(reason) => State::Failed { reason },
            AfterStop::Start => {
                unit.starts.clear();
                unit.attempt = 0;
                begin_start(unit, now, out)
            }
        }
    }
}

fn begin_start(unit: &mut Unit, now: Time, out: &mut Vec<Action>) -> State {
    if let Some(limit) = unit.policy.start_limit {
        while unit.starts.front().is_some_and(|&t| now.saturating_sub(t) >= limit.interval) {
            unit.starts.pop_front();
        }
        if unit.starts.len() >= limit.burst as usize {
            return State::Failed {
                reason: format!(
                    "start request repeated too quickly ({} starts within {:?}, the \
                     start-limit): not started again until started by hand",
                    unit.starts.len(),
                    limit.interval
                ),
            };
        }
        unit.starts.push_back(now);
    }
    out.push(Action::Spawn);
    State::Activating
}

fn schedule_restart(unit: &mut Unit, now: Time, jitter: f64, out: &mut Vec<Action>) -> State {
    let delay = jittered(backoff(&unit.policy, unit.attempt), jitter);
    unit.attempt = unit.attempt.saturating_add(1);
    let at = now + delay;
    out.push(Action::Log(format!("restarting in {delay:?}")));
    out.push(Action::SetTimer { at });
    State::AutoRestart { at }
}

fn begin_stop(
    unit: &Unit,
    pid: Pid,
    since: Time,
    now: Time,
    signal: i32,
    then: AfterStop,
    out: &mut Vec<Action>,
) -> State {
    out.push(Action::Kill { pid, signal });
    let killed = signal == SIGKILL;
    let kill_at = now + unit.policy.stop_timeout;
    if !killed {
        out.push(Action::SetTimer { at: kill_at });
    }
    State::Deactivating { pid, since, kill_at, killed, then }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn policy() -> Policy {
        Policy {
            restart: Restart::Always,
            restart_delay: ms(100),
            restart_max_delay: ms(1600),
            start_limit: None,
            stop_signal: SIGTERM,
            stop_timeout: ms(5000),
        }
    }

    /// Starts `unit` at `now` as `pid`.
    fn run(unit: &mut Unit, pid: Pid, now: Time) {
        assert_eq!(step(unit, Event::Start, now), vec![Action::Spawn]);
        assert!(step(unit, Event::Started { pid }, now).is_empty());
        assert_eq!(unit.state, State::Active { pid, since: now });
    }

    fn timer_of(actions: &[Action]) -> Option<Time> {
        actions.iter().find_map(|a| match a {
            Action::SetTimer { at } => Some(*at),
            _ => None,
        })
    }

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let p = policy();
        let seq: Vec<u64> = (0..8).map(|n| backoff(&p, n).as_millis() as u64).collect();
        assert_eq!(seq, [100, 200, 400, 800, 1600, 1600, 1600, 1600]);
        assert_eq!(backoff(&p, u32::MAX), ms(1600));
        // A maximum below the first delay never shortens it.
        let p = Policy { restart_max_delay: ms(10), ..policy() };
        assert_eq!(backoff(&p, 3), ms(100));
    }

    #[test]
    fn jitter_stays_within_half_and_whole_delay() {
        for i in 0..=100 {
            let j = f64::from(i) / 100.0;
            let d = jittered(ms(1000), j);
            assert!(d >= ms(500) && d <= ms(1000), "{j} -> {d:?}");
        }
        assert_eq!(jittered(ms(1000), 0.0), ms(500));
        assert_eq!(jittered(ms(1000), -3.0), ms(500));
        assert_eq!(jittered(ms(1000), 7.0), ms(1000));
        assert_eq!(jittered(ms(1000), f64::NAN), ms(500));
    }

    #[test]
    fn crash_loop_backs_off_exponentially_with_jitter() {
        let mut u = Unit::new(policy());
        let mut now = ms(0);
        run(&mut u, 1, now);
        let mut delays = Vec::new();
        for pid in 2..9 {
            now += ms(10);
            let a = step(
                &mut u,
                Event::Exited { pid: pid - 1, exit: Exit::Signal(9), jitter: 0.999 },
                now,
            );
            let at = timer_of(&a).expect("a restart timer");
            assert_eq!(u.state, State::AutoRestart { at });
            delays.push((at - now).as_millis());
            // A timer that fires early changes nothing.
            assert!(step(&mut u, Event::Timer, at - ms(1)).is_empty());
            now = at;
            assert_eq!(step(&mut u, Event::Timer, now), vec![Action::Spawn]);
            step(&mut u, Event::Started { pid }, now);
        }
        // jitter 0.999 -> just under the whole delay.
        assert_eq!(delays, [99, 199, 399, 799, 1599, 1599, 1599]);
        assert_eq!(u.restarts, 7);
    }

    #[test]
    fn delay_resets_after_a_long_enough_run() {
        let mut u = Unit::new(policy());
        run(&mut u, 1, ms(0));
        let a = step(&mut u, Event::Exited { pid: 1, exit: Exit::Code(1), jitter: 0.0 }, ms(5));
        assert_eq!(timer_of(&a), Some(ms(55)));
        step(&mut u, Event::Timer, ms(55));
        step(&mut u, Event::Started { pid: 2 }, ms(55));
        let a = step(&mut u, Event::Exited { pid: 2, exit: Exit::Code(1), jitter: 0.0 }, ms(60));
        assert_eq!(timer_of(&a), Some(ms(160)), "second delay doubled: 200ms * 0.5");
        step(&mut u, Event::Timer, ms(160));
        step(&mut u, Event::Started { pid: 3 }, ms(160));
        // Ran 1600ms (restart-max-delay): the next delay starts over.
        let a = step(&mut u, Event::Exited { pid: 3, exit: Exit::Code(1), jitter: 0.0 }, ms(1760));
        assert_eq!(timer_of(&a), Some(ms(1810)));
    }

    #[test]
    fn restart_policies() {
        for (restart, exit, restarts) in [
            (Restart::Always, Exit::Code(0), true),
            (Restart::Always, Exit::Code(3), true),
            (Restart::Always, Exit::Signal(9), true),
            (Restart::OnFailure, Exit::Code(0), false),
            (Restart::OnFailure, Exit::Code(3), true),
            (Restart::OnFailure, Exit::Signal(11), true),
            (Restart::Never, Exit::Code(3), false),
            (Restart::Never, Exit::Code(0), false),
        ] {
            assert_eq!(should_restart(restart, exit), restarts, "{restart:?} {exit:?}");
            let mut u = Unit::new(Policy { restart, ..policy() });
            run(&mut u, 7, ms(0));
            step(&mut u, Event::Exited { pid: 7, exit, jitter: 0.5 }, ms(1));
            let expected = if restarts {
                "auto-restart"
            } else if exit.is_success() {
                "inactive"
            } else {
                "failed"
            };
            assert_eq!(u.state.name(), expected, "{restart:?} {exit:?}");
        }
    }

    #[test]
    fn statuses_that_never_restart() {
        for code in [200, 203, 209, 216, 217] {
            let mut u = Unit::new(policy());
            step(&mut u, Event::Start, ms(0));
            let e = Event::StartFailed { pid: None, reason: "x".into(), code, jitter: 0.0 };
            step(&mut u, e, ms(0));
            assert_eq!(u.state.name(), "failed", "{code}");
        }
        for code in [215, 242, 126, 127] {
            let mut u = Unit::new(policy());
            run(&mut u, 7, ms(0));
            let a =
                step(&mut u, Event::Exited { pid: 7, exit: Exit::Code(code), jitter: 0.5 }, ms(1));
            assert!(a.iter().all(|a| !matches!(a, Action::SetTimer { .. })));
            assert_eq!(u.state.name(), "failed", "{code}");
            let mut u = Unit::new(policy());
            step(&mut u, Event::Start, ms(0));
            let e = Event::StartFailed { pid: None, reason: "x".into(), code, jitter: 0.0 };
            step(&mut u, e, ms(0));
            let State::Failed { reason } = &u.state else { panic!("{:?}", u.state) };
            assert!(reason.starts_with("x (at step "), "{reason}");
            assert!(reason.ends_with(&format!("exit status {code})")), "{reason}");
        }
        // A transient spawn failure (fork: EAGAIN, code 1) is retried.
        let mut u = Unit::new(policy());
        step(&mut u, Event::Start, ms(0));
        let e = Event::StartFailed { pid: None, reason: "fork".into(), code: 1, jitter: 0.0 };
        step(&mut u, e, ms(0));
        assert_eq!(u.state, State::AutoRestart { at: ms(50) });
    }

    #[test]
    fn every_transition_to_failed_is_said_once_with_its_reason() {
        let failed_line = |actions: &[Action]| {
            actions.iter().find_map(|a| match a {
                Action::Log(l) if l.starts_with("failed: ") => Some(l.clone()),
                _ => None,
            })
        };
        // A start that cannot run the program: the step, as systemd names it.
        for (code, step_name) in
            [(127, "EXEC"), (200, "CHDIR"), (209, "STDOUT"), (216, "GROUP"), (217, "USER")]
        {
            let mut u = Unit::new(policy());
            step(&mut u, Event::Start, ms(0));
            let e = Event::StartFailed { pid: None, reason: "why".into(), code, jitter: 0.0 };
            let line = failed_line(&step(&mut u, e, ms(0))).expect("a failed line");
            assert_eq!(line, format!("failed: why (at step {step_name}, exit status {code})"));
        }
        // A failing exit that is not restarted.
        let mut u = Unit::new(Policy { restart: Restart::Never, ..policy() });
        run(&mut u, 5, ms(0));
        let a = step(&mut u, Event::Exited { pid: 5, exit: Exit::Code(3), jitter: 0.0 }, ms(1));
        assert_eq!(failed_line(&a).as_deref(), Some("failed: exit status 3 (restart = \"never\")"));
        // Already failed: nothing more is said by later events.
        assert!(step(&mut u, Event::Timer, ms(50)).is_empty());
        // A start whose placement did not verify: said when the process is gone.
        let mut u = Unit::new(policy());
        step(&mut u, Event::Start, ms(0));
        let e = Event::StartFailed {
            pid: Some(9),
            reason: "on CPUs 0-3".into(),
            code: 215,
            jitter: 0.0,
        };
        step(&mut u, e, ms(0));
        let a = step(&mut u, Event::Exited { pid: 9, exit: Exit::Signal(9), jitter: 0.0 }, ms(1));
        assert_eq!(failed_line(&a).as_deref(), Some("failed: on CPUs 0-3"));
    }

    #[test]
    fn start_limit_fails_the_instance_until_started_by_hand() {
        let limit = StartLimit { burst: 3, interval: ms(10_000) };
        let mut u = Unit::new(Policy { start_limit: Some(limit), ..policy() });
        let mut now = ms(0);
        run(&mut u, 1, now);
        for pid in 2..=3 {
            now += ms(100);
            step(&mut u, Event::Exited { pid: pid - 1, exit: Exit::Code(1), jitter: 0.0 }, now);
            let State::AutoRestart { at } = u.state else { panic!("{:?}", u.state) };
            now = at;
            assert_eq!(step(&mut u, Event::Timer, now), vec![Action::Spawn]);
            step(&mut u, Event::Started { pid }, now);
        }
        // The fourth start within 10s is refused.
        now += ms(100);
        step(&mut u, Event::Exited { pid: 3, exit: Exit::Code(1), jitter: 0.0 }, now);
        let State::AutoRestart { at } = u.state else { panic!() };
        let said = step(&mut u, Event::Timer, at);
        assert!(matches!(&u.state, State::Failed { reason } if reason.contains("start-limit")));
        assert!(
            matches!(&said[..], [Action::Log(l)] if l.starts_with("failed: start request repeated too quickly (3 starts")),
            "{said:?}"
        );
        // Timers and exits change nothing now; a start by hand does.
        assert!(step(&mut u, Event::Timer, at + ms(100_000)).is_empty());
        assert_eq!(step(&mut u, Event::Start, at + ms(1)), vec![Action::Spawn]);
        assert_eq!(u.state, State::Activating);
    }

    #[test]
    fn starts_outside_the_interval_do_not_count() {
        let limit = StartLimit { burst: 2, interval: ms(1000) };
        let mut u = Unit::new(Policy { start_limit: Some(limit), ..policy() });
        run(&mut u, 1, ms(0));
        let mut now = ms(0);
        for pid in 2..20 {
            now += ms(600); // each run lasts 600ms: at most 2 starts in any 1s window
            step(&mut u, Event::Exited { pid: pid - 1, exit: Exit::Code(1), jitter: 0.0 }, now);
            let State::AutoRestart { at } = u.state else { panic!("{:?}", u.state) };
            now = at;
            step(&mut u, Event::Timer, now);
            assert_eq!(u.state, State::Activating, "start {pid}");
            step(&mut u, Event::Started { pid }, now);
        }
    }

    #[test]
    fn stop_signals_then_kills_after_the_timeout() {
        let mut u = Unit::new(policy());
        run(&mut u, 42, ms(0));
        let a = step(&mut u, Event::Stop, ms(1000));
        assert_eq!(
            a,
            vec![Action::Kill { pid: 42, signal: SIGTERM }, Action::SetTimer { at: ms(6000) }]
        );
        assert_eq!(u.state.name(), "deactivating");
        assert!(step(&mut u, Event::Timer, ms(5999)).is_empty());
        let a = step(&mut u, Event::Timer, ms(6000));
        assert!(a.contains(&Action::Kill { pid: 42, signal: SIGKILL }), "{a:?}");
        // KILL is sent once.
        assert!(step(&mut u, Event::Timer, ms(7000)).is_empty());
        // An exit of another PID is not ours.
        assert!(
            step(&mut u, Event::Exited { pid: 41, exit: Exit::Signal(9), jitter: 0.0 }, ms(7001))
                .is_empty()
        );
        assert_eq!(u.state.name(), "deactivating");
        step(&mut u, Event::Exited { pid: 42, exit: Exit::Signal(9), jitter: 0.0 }, ms(7002));
        assert_eq!(u.state, State::Inactive);
        assert_eq!(u.last_exit, Some(Exit::Signal(9)));
        assert_eq!(u.restarts, 0, "a stop is not a restart");
    }

    #[test]
    fn stop_that_finishes_in_time_sends_no_kill() {
        let mut u = Unit::new(Policy { stop_signal: 2, ..policy() });
        run(&mut u, 42, ms(0));
        assert_eq!(step(&mut u, Event::Stop, ms(10))[0], Action::Kill { pid: 42, signal: 2 });
        step(&mut u, Event::Exited { pid: 42, exit: Exit::Code(0), jitter: 0.0 }, ms(20));
        assert_eq!(u.state, State::Inactive);
        assert!(step(&mut u, Event::Timer, ms(5010)).is_empty(), "the stale kill timer");
    }

    #[test]
    fn restart_by_hand_stops_then_starts() {
        let mut u = Unit::new(policy());
        run(&mut u, 42, ms(0));
        step(&mut u, Event::Restart, ms(10));
        assert_eq!(u.state.name(), "deactivating");
        let a =
            step(&mut u, Event::Exited { pid: 42, exit: Exit::Signal(15), jitter: 0.0 }, ms(20));
        assert_eq!(a, vec![Action::Spawn]);
        assert_eq!(u.state, State::Activating);
        // From auto-restart or failed, it starts at once.
        let mut u = Unit::new(policy());
        run(&mut u, 1, ms(0));
        step(&mut u, Event::Exited { pid: 1, exit: Exit::Code(1), jitter: 0.0 }, ms(1));
        assert_eq!(step(&mut u, Event::Restart, ms(2)), vec![Action::Spawn]);
    }

    #[test]
    fn stop_of_a_waiting_instance_cancels_the_restart() {
        let mut u = Unit::new(policy());
        run(&mut u, 1, ms(0));
        step(&mut u, Event::Exited { pid: 1, exit: Exit::Code(1), jitter: 0.0 }, ms(1));
        assert!(step(&mut u, Event::Stop, ms(2)).is_empty());
        assert_eq!(u.state, State::Inactive);
        assert!(step(&mut u, Event::Timer, ms(10_000)).is_empty());
        assert_eq!(u.state, State::Inactive);
    }

    #[test]
    fn a_placement_that_does_not_verify_is_killed_and_fails() {
        let mut u = Unit::new(policy());
        step(&mut u, Event::Start, ms(0));
        let e = Event::StartFailed {
            pid: Some(9),
            reason: "runs on CPUs 0-3, planned 4-7".into(),
            code: 215,
            jitter: 0.0,
        };
        let a = step(&mut u, e, ms(1));
        assert!(a.contains(&Action::Kill { pid: 9, signal: SIGKILL }), "{a:?}");
        step(&mut u, Event::Exited { pid: 9, exit: Exit::Signal(9), jitter: 0.0 }, ms(2));
        assert!(matches!(&u.state, State::Failed { reason } if reason.contains("planned")));
    }

    #[test]
    fn adopted_instances_are_stopped_like_own_ones() {
        let mut u = Unit::adopted(policy(), 77, ms(0));
        assert_eq!(step(&mut u, Event::Stop, ms(1))[0], Action::Kill { pid: 77, signal: SIGTERM });
    }

    #[test]
    fn a_stop_says_stopped_once_when_the_process_is_gone() {
        let mut u = Unit::adopted(policy(), 77, ms(0));
        let mut said: Vec<String> = Vec::new();
        let mut log = |actions: Vec<Action>| {
            said.extend(actions.into_iter().filter_map(|a| match a {
                Action::Log(l) => Some(l),
                _ => None,
            }));
        };
        log(step(&mut u, Event::Stop, ms(1)));
        log(step(&mut u, Event::Stop, ms(2)));
        let exit = Event::Exited { pid: 77, exit: Exit::Signal(15), jitter: 0.0 };
        log(step(&mut u, exit, ms(3)));
        assert_eq!(u.state, State::Inactive);
        let stopped: Vec<&String> = said.iter().filter(|l| l.starts_with("stopped")).collect();
        assert_eq!(stopped.len(), 1, "{said:?}");
        assert!(stopped[0].contains("signal 15"), "{said:?}");
    }
}
