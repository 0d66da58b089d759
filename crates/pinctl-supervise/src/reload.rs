//! A reload being applied, as a pure state machine beside [`lifecycle::step`]: [`step`] takes
//! the reload, an event, what the instances' lifecycles say now and the time, and returns what
//! the runtime must do. No clock is read here: `now` comes in with the call.
//!
//! A reload goes through two phases. *Clearing*: every instance it touches (removes, restarts
//! or starts) is stopped and waited for, so nothing of the old file runs beside what replaces
//! it (one data directory, one port). *Starting*: once none of them has a process, the ones it
//! starts take up their new spec and start; once each survived [`START_GRACE`] or failed, the
//! reload is answered. Stops are asked for again whenever an instance it clears is found
//! running or about to run (a restart timer, a request by hand that came before), so nothing
//! that happens meanwhile can keep a reload from answering.
//!
//! Requests by hand interleave in the order they arrive, the later word winning: a start or
//! restart of an instance the reload is clearing joins the reload (it starts with the reload's
//! spec when the clearing is over); a stop of an instance the reload would start takes it out
//! of the reload (it keeps the reload's spec for its next start); a restart or stop of one
//! the reload is starting hands it to that request. So a reload waits at most for the
//! stop-timeouts of what it clears, then [`START_GRACE`].

use std::collections::BTreeSet;
use std::time::Duration;

use crate::lifecycle::{self, AfterStop, State, Time, Unit};

/// How long a started instance must run before it counts as started (for a reload and for a
/// `start` or `restart` by hand): a program that dies at once has not started.
pub const START_GRACE: Duration = Duration::from_secs(1);

/// What the reload sees of one instance.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub unit: &'a Unit,
    /// When its current process started (`None` when none runs).
    pub started: Option<Time>,
    /// When the process that exited last had started.
    pub exited_start: Option<Time>,
}

/// A request by hand for one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Start,
    Stop,
    Restart,
}

impl Request {
    /// The lifecycle event the request stands for.
    pub fn event(self) -> lifecycle::Event {
        match self {
            Request::Start => lifecycle::Event::Start,
            Request::Stop => lifecycle::Event::Stop,
            Request::Restart => lifecycle::Event::Restart,
        }
    }
}

/// Something that happened while the reload is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Anything changed (an exit, a start, a timer, a wake-up): look at the instances again.
    Look,
    /// A start, stop or restart of `name` by hand.
    Request { name: String, request: Request },
}

/// What the runtime must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Give this event to the instance's lifecycle ([`lifecycle::step`]).
    Dispatch { name: String, event: lifecycle::Event },
    /// The instance starts now with the spec this reload gave it: it takes it up first.
    TakeSpec { name: String },
    /// A stop by hand took the instance out of the reload: it keeps the reload's spec for
    /// whenever it next starts.
    SpecForNextStart { name: String },
    /// Look again at `at` (a start's grace ends).
    WakeAt { at: Time },
    /// The reload is over: answer whoever asked. `failed`: the instances it started that did
    /// not survive their start, each with why.
    Answer { failed: Vec<(String, String)> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Clearing,
    Starting { since: Time },
    Answered,
}

/// A reload being applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reload {
    /// When it was applied.
    pub applied: Time,
    phase: Phase,
    /// Every instance it removes, restarts or starts.
    touched: BTreeSet<String>,
    /// Those of `touched` that may still have a process (or be about to have one): none may
    /// when its starts begin.
    clearing: BTreeSet<String>,
    /// What it starts once the clearing is over, in order.
    starting: Vec<String>,
}

impl Reload {
    /// A reload that removes `removed` and starts `starts` (new instances and restarted
    /// ones), applied at `now`. Give it [`Event::Look`] to begin.
    pub fn new(removed: Vec<String>, starts: Vec<String>, now: Time) -> Reload {
        let mut clearing: BTreeSet<String> = removed.into_iter().collect();
        clearing.extend(starts.iter().cloned());
        let touched = clearing.clone();
        Reload { applied: now, phase: Phase::Clearing, touched, clearing, starting: starts }
    }

    /// Whether a start of `name` waits for this reload: it is to start once the clearing is
    /// over. A request waiting for it is not answered before.
    pub fn holds(&self, name: &str) -> bool {
        self.phase == Phase::Clearing && self.starting.iter().any(|n| n == name)
    }

    /// The instances it starts (those a request by hand took out of it are not).
    pub fn starts(&self) -> &[String] {
        &self.starting
    }

    /// Whether the reload was answered.
    pub fn is_answered(&self) -> bool {
        self.phase == Phase::Answered
    }
}

/// Applies `event` at `now` to `reload`, seeing each instance through `seen` (`None`: no such
/// instance any more); returns what the runtime must do, in order. After carrying out a
/// [`Action::Dispatch`], the runtime looks again ([`Event::Look`]): the lifecycle may have
/// moved on.
pub fn step<'a>(
    reload: &mut Reload,
    event: Event,
    seen: impl Fn(&str) -> Option<Seen<'a>>,
    now: Time,
) -> Vec<Action> {
    let mut out = Vec::new();
    if reload.phase == Phase::Answered {
        if let Event::Request { name, request } = event {
            out.push(Action::Dispatch { name, event: request.event() });
        }
        return out;
    }
    if let Event::Request { name, request } = event {
        requested(reload, name, request, &mut out);
    }
    if reload.phase == Phase::Clearing {
        clear(reload, &seen, now, &mut out);
        // Nothing to start: nothing to wait for. (Starts just asked for are looked at once
        // the runtime carried them out.)
        if !reload.starting.is_empty() {
            return out;
        }
    }
    if let Phase::Starting { since } = reload.phase {
        settle(reload, &seen, since, now, &mut out);
    }
    out
}

/// A request by hand, in the order it came: it joins, leaves or passes the reload.
fn requested(reload: &mut Reload, name: String, request: Request, out: &mut Vec<Action>) {
    let clearing = reload.phase == Phase::Clearing;
    let starts_it = reload.starting.contains(&name);
    match request {
        // Started by the reload with its new spec once the clearing is over.
        Request::Start | Request::Restart if clearing && reload.touched.contains(&name) => {
            if !starts_it {
                reload.starting.push(name);
            }
        }
        Request::Stop if starts_it => {
            reload.starting.retain(|n| *n != name);
            if clearing {
                out.push(Action::SpecForNextStart { name: name.clone() });
            }
            out.push(Action::Dispatch { name, event: lifecycle::Event::Stop });
        }
        Request::Restart if starts_it => {
            reload.starting.retain(|n| *n != name);
            out.push(Action::Dispatch { name, event: lifecycle::Event::Restart });
        }
        _ => out.push(Action::Dispatch { name, event: request.event() }),
    }
}

/// Clearing: stops what still runs or is about to; once nothing does, begins the starts.
fn clear<'a>(
    reload: &mut Reload,
    seen: &impl Fn(&str) -> Option<Seen<'a>>,
    now: Time,
    out: &mut Vec<Action>,
) {
    let mut left = BTreeSet::new();
    for name in &reload.clearing {
        let Some(state) = seen(name).map(|s| &s.unit.state) else { continue };
        if will_run(state) {
            out.push(Action::Dispatch { name: name.clone(), event: lifecycle::Event::Stop });
            left.insert(name.clone());
        } else if state.pid().is_some() || *state == State::Activating {
            left.insert(name.clone());
        }
    }
    reload.clearing = left;
    if !reload.clearing.is_empty() {
        return;
    }
    reload.phase = Phase::Starting { since: now };
    for name in &reload.starting {
        out.push(Action::TakeSpec { name: name.clone() });
        out.push(Action::Dispatch { name: name.clone(), event: lifecycle::Event::Start });
    }
}

/// Whether an instance runs, or will run without anyone asking: a stop must be asked for.
fn will_run(state: &State) -> bool {
    matches!(
        state,
        State::Active { .. }
            | State::AutoRestart { .. }
            | State::Deactivating { then: AfterStop::Start, .. }
    )
}

/// Starting: answers once every start survived its grace or failed.
fn settle<'a>(
    reload: &mut Reload,
    seen: &impl Fn(&str) -> Option<Seen<'a>>,
    since: Time,
    now: Time,
    out: &mut Vec<Action>,
) {
    let mut failed = Vec::new();
    let mut wake: Option<Time> = None;
    for name in &reload.starting {
        let Some(s) = seen(name) else { continue };
        match start_outcome(s, since, now) {
            Outcome::Started => {}
            Outcome::Failed(why) => failed.push((name.clone(), why)),
            // Its lifecycle moves on by itself (a spawn, a KILL): looked at again then.
            Outcome::Pending { wake: None } => return,
            Outcome::Pending { wake: Some(at) } => {
                wake = Some(wake.map_or(at, |w| w.min(at)));
            }
        }
    }
    if let Some(at) = wake {
        out.push(Action::WakeAt { at });
        return;
    }
    reload.phase = Phase::Answered;
    out.push(Action::Answer { failed });
}

/// How a start asked for at `asked` went, by `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Running past its grace.
    Started,
    /// Did not start, with why.
    Failed(String),
    /// Not known yet; known by `wake` at the latest when it is `Some` (the grace's end),
    /// else once its lifecycle moves on.
    Pending { wake: Option<Time> },
}

/// How the start of an instance asked for at `asked` went by `now`: a process started since
/// then that exited failed it; one that ran [`START_GRACE`] started it. The rule for a reload
/// and for a start or restart by hand alike.
pub fn start_outcome(seen: Seen<'_>, asked: Time, now: Time) -> Outcome {
    let state = &seen.unit.state;
    let exited = seen.exited_start.is_some_and(|s| s >= asked);
    if state.is_transient() && !exited {
        return Outcome::Pending { wake: None };
    }
    if let (State::Active { .. }, false) = (state, exited) {
        let grace_end = seen.started.unwrap_or(asked) + START_GRACE;
        return if grace_end <= now {
            Outcome::Started
        } else {
            Outcome::Pending { wake: Some(grace_end) }
        };
    }
    if state.is_transient() {
        return Outcome::Pending { wake: None };
    }
    Outcome::Failed(match (state, seen.unit.last_exit) {
        (State::Failed { reason }, _) => reason.clone(),
        (_, Some(exit)) => format!("{exit} within {START_GRACE:?} of its start"),
        (state, _) => format!("it is {}", state.name()),
    })
}

#[cfg(test)]
mod tests {
    //! A simulated supervisor: the real [`lifecycle::step`] and [`step`], wired as the runtime
    //! wires them, over simulated processes and a fake clock. Each instance's processes react
    //! to `TERM` in their own way (`a` exits at once, `b` after 300 ms, `c` only to `KILL`).

    use std::collections::{BTreeMap, VecDeque};

    use proptest::prelude::*;

    use super::*;
    use crate::lifecycle::{Exit, Pid, Policy, Restart, SIGKILL};

    const NAMES: [&str; 3] = ["a", "b", "c"];
    const STOP_TIMEOUT: Duration = Duration::from_millis(1000);
    const SLOW_EXIT: Duration = Duration::from_millis(300);

    fn policy() -> Policy {
        Policy {
            restart: Restart::OnFailure,
            restart_delay: Duration::from_millis(100),
            restart_max_delay: Duration::from_millis(400),
            start_limit: None,
            stop_signal: lifecycle::SIGTERM,
            stop_timeout: STOP_TIMEOUT,
        }
    }

    /// One instance as the runtime holds it; its spec is a version number.
    struct Inst {
        unit: Unit,
        spec: u32,
        next_spec: Option<u32>,
        removing: bool,
        timer: Option<Time>,
        started: Option<Time>,
        exited_start: Option<Time>,
    }

    struct Process {
        pid: Pid,
        name: String,
        spec: u32,
        exit_at: Option<Time>,
    }

    struct Applying {
        reload: Reload,
        specs: BTreeMap<String, u32>,
        deadline: Time,
        wake: Option<Time>,
    }

    #[derive(Default)]
    struct World {
        now: Time,
        insts: BTreeMap<String, Inst>,
        procs: Vec<Process>,
        /// Instances whose spawn was asked for: their process appears at the next tick.
        spawning: Vec<String>,
        exits: VecDeque<(Pid, Exit)>,
        applying: Option<Applying>,
        /// Reloads asked for while one is applied.
        queued: usize,
        /// The service file: each instance's version; absent when removed.
        file: BTreeMap<String, u32>,
        next_pid: Pid,
        answered: usize,
        violations: Vec<String>,
    }

    #[derive(Debug, Clone)]
    enum Op {
        Request(usize, Request),
        /// Changes the versions of the instances in the first mask, removes or adds back
        /// those in the second, then reloads.
        Reload(u8, u8),
        Kill(usize),
        Exit(usize, i32),
        Advance(u64),
    }

    impl World {
        fn new() -> World {
            let mut w = World { next_pid: 100, ..World::default() };
            for n in NAMES {
                w.file.insert(n.into(), 1);
                w.insts.insert(n.into(), Inst::new(1));
                w.dispatch(n, lifecycle::Event::Start);
            }
            w.settle_spawns();
            w
        }

        fn seen(&self, name: &str) -> Option<Seen<'_>> {
            let i = self.insts.get(name)?;
            Some(Seen {
                unit: &i.unit,
                started: i.started.filter(|_| i.unit.state.pid().is_some()),
                exited_start: i.exited_start,
            })
        }

        fn apply_op(&mut self, op: Op) {
            match op {
                Op::Request(i, request) => self.request(NAMES[i], request),
                Op::Reload(changed, toggled) => {
                    for (i, n) in NAMES.iter().enumerate() {
                        let bit = 1 << i;
                        if toggled & bit != 0 {
                            match self.file.remove(*n) {
                                Some(_) => {}
                                None => {
                                    self.file.insert(n.to_string(), 1);
                                }
                            }
                        }
                        if changed & bit != 0 {
                            if let Some(v) = self.file.get_mut(*n) {
                                *v += 1;
                            }
                        }
                    }
                    self.queued += 1;
                    self.next_reload();
                }
                Op::Kill(i) => self.exit_of(NAMES[i], Exit::Signal(SIGKILL)),
                Op::Exit(i, code) => self.exit_of(NAMES[i], Exit::Code(code)),
                Op::Advance(ms) => self.advance(Duration::from_millis(ms)),
            }
            self.after_change();
        }

        /// `pinctl start|stop|restart NAME`, as the runtime's control handler takes it.
        fn request(&mut self, name: &str, request: Request) {
            let Some(inst) = self.insts.get(name) else { return };
            if inst.removing && request != Request::Stop {
                return;
            }
            match self.applying.is_some() {
                true => self.progress(Event::Request { name: name.into(), request }),
                false => self.dispatch(name, request.event()),
            }
        }

        /// Applies the file as it reads now, when no reload is being applied.
        fn next_reload(&mut self) {
            if self.applying.is_some() || self.queued == 0 {
                return;
            }
            self.queued -= 1;
            let (mut removed, mut starts, mut specs) = (Vec::new(), Vec::new(), BTreeMap::new());
            for (name, &v) in &self.file.clone() {
                match self.insts.get_mut(name) {
                    Some(i) if !i.removing && i.next_spec.unwrap_or(i.spec) == v => {
                        if i.next_spec.is_some() {
                            i.next_spec = Some(v);
                        }
                    }
                    Some(i) => {
                        i.removing = false;
                        specs.insert(name.clone(), v);
                        starts.push(name.clone());
                    }
                    None => {
                        self.insts.insert(name.clone(), Inst::new(v));
                        specs.insert(name.clone(), v);
                        starts.push(name.clone());
                    }
                }
            }
            for (name, i) in &mut self.insts {
                if !self.file.contains_key(name) && !i.removing {
                    i.removing = true;
                    removed.push(name.clone());
                }
            }
            let reload = Reload::new(removed, starts, self.now);
            let deadline = self.now + STOP_TIMEOUT + START_GRACE;
            self.applying = Some(Applying { reload, specs, deadline, wake: None });
            self.progress(Event::Look);
        }

        /// The runtime's `progress_reload`.
        fn progress(&mut self, event: Event) {
            let mut event = Some(event);
            for _ in 0..4 {
                let Some(mut a) = self.applying.take() else { return };
                let e = event.take().unwrap_or(Event::Look);
                a.wake = None;
                let actions = step(&mut a.reload, e, |n| self.seen(n), self.now);
                let moved = actions.iter().any(|x| matches!(x, Action::Dispatch { .. }));
                let mut answered = false;
                for action in actions {
                    match action {
                        Action::Dispatch { name, event } => {
                            if matches!(event, lifecycle::Event::Start | lifecycle::Event::Restart)
                                && a.reload.holds(&name)
                            {
                                self.violations.push(format!("{name} started while held"));
                            }
                            self.dispatch(&name, event);
                        }
                        Action::TakeSpec { name } => {
                            let i = self.insts.get_mut(&name).unwrap();
                            let next = a.specs.remove(&name).or(i.next_spec.take());
                            i.next_spec = None;
                            if let Some(v) = next {
                                i.spec = v;
                            }
                        }
                        Action::SpecForNextStart { name } => {
                            if let Some(v) = a.specs.remove(&name) {
                                self.insts.get_mut(&name).unwrap().next_spec = Some(v);
                            }
                        }
                        Action::WakeAt { at } => {
                            assert!(at > self.now, "a wake in the past");
                            a.wake = Some(at);
                        }
                        Action::Answer { .. } => answered = true,
                    }
                }
                if answered {
                    for (name, v) in std::mem::take(&mut a.specs) {
                        if let Some(i) = self.insts.get_mut(&name) {
                            i.next_spec = Some(v);
                        }
                    }
                    self.answered += 1;
                    return self.next_reload();
                }
                self.applying = Some(a);
                if !moved {
                    return;
                }
            }
        }

        fn dispatch(&mut self, name: &str, event: lifecycle::Event) {
            let now = self.now;
            let Some(inst) = self.insts.get_mut(name) else { return };
            for action in lifecycle::step(&mut inst.unit, event, now) {
                match action {
                    lifecycle::Action::Spawn => {
                        let inst = self.insts.get_mut(name).unwrap();
                        if let Some(next) = inst.next_spec.take() {
                            inst.spec = next;
                        }
                        if self.applying.as_ref().is_some_and(|a| a.reload.holds(name)) {
                            self.violations.push(format!("{name} spawned while held"));
                        }
                        self.spawning.push(name.into());
                    }
                    lifecycle::Action::Kill { pid, signal } => self.signal(pid, signal),
                    lifecycle::Action::SetTimer { at } => {
                        self.insts.get_mut(name).unwrap().timer = Some(at);
                    }
                    lifecycle::Action::Log(_) => {}
                }
            }
        }

        fn signal(&mut self, pid: Pid, signal: i32) {
            let now = self.now;
            let Some(p) = self.procs.iter_mut().find(|p| p.pid == pid) else { return };
            match (signal, p.name.as_str()) {
                (SIGKILL, _) | (_, "a") => self.exits.push_back((pid, Exit::Signal(signal))),
                (_, "b") => p.exit_at = Some(p.exit_at.map_or(now + SLOW_EXIT, |t| t)),
                _ => {}
            }
        }

        fn exit_of(&mut self, name: &str, exit: Exit) {
            if let Some(p) = self.procs.iter().find(|p| p.name == name) {
                self.exits.push_back((p.pid, exit));
            }
        }

        /// Spawns complete, exits are delivered, the reload looks again: until nothing moves.
        fn after_change(&mut self) {
            loop {
                self.settle_spawns();
                let Some((pid, exit)) = self.exits.pop_front() else {
                    self.look();
                    if self.spawning.is_empty() && self.exits.is_empty() {
                        return;
                    }
                    continue;
                };
                let Some(at) = self.procs.iter().position(|p| p.pid == pid) else { continue };
                let p = self.procs.remove(at);
                if let Some(i) = self.insts.get_mut(&p.name) {
                    if i.unit.state.pid() == Some(pid) {
                        i.exited_start = i.started;
                    }
                }
                self.dispatch(&p.name, lifecycle::Event::Exited { pid, exit, jitter: 0.5 });
                self.look();
            }
        }

        fn look(&mut self) {
            let gone: Vec<String> = self
                .insts
                .iter()
                .filter(|(_, i)| {
                    i.removing && matches!(i.unit.state, State::Inactive | State::Failed { .. })
                })
                .map(|(n, _)| n.clone())
                .collect();
            for n in gone {
                self.insts.remove(&n);
            }
            self.progress(Event::Look);
        }

        fn settle_spawns(&mut self) {
            while let Some(name) = self.spawning.pop() {
                let Some(inst) = self.insts.get(&name) else { continue };
                if inst.unit.state != State::Activating {
                    continue;
                }
                if let Some(p) = self.procs.iter().find(|p| p.name == name) {
                    self.violations.push(format!("{name} spawned beside its process {}", p.pid));
                }
                let pid = self.next_pid;
                self.next_pid += 1;
                let spec = inst.spec;
                self.procs.push(Process { pid, name: name.clone(), spec, exit_at: None });
                self.insts.get_mut(&name).unwrap().started = Some(self.now);
                self.dispatch(&name, lifecycle::Event::Started { pid });
                self.look();
            }
        }

        /// Moves the clock by `by`, firing every timer, slow exit and wake-up on the way.
        fn advance(&mut self, by: Duration) {
            let end = self.now + by;
            loop {
                self.after_change();
                let timers = self.insts.values().filter_map(|i| i.timer);
                let exits = self.procs.iter().filter_map(|p| p.exit_at);
                let wake = self.applying.as_ref().and_then(|a| a.wake);
                let next = timers.chain(exits).chain(wake).filter(|&t| t <= end).min();
                let Some(at) = next else { break };
                self.now = self.now.max(at);
                self.check_deadline();
                let due: Vec<Pid> = self
                    .procs
                    .iter()
                    .filter(|p| p.exit_at.is_some_and(|t| t <= self.now))
                    .map(|p| p.pid)
                    .collect();
                for pid in due {
                    self.procs.iter_mut().find(|p| p.pid == pid).unwrap().exit_at = None;
                    self.exits.push_back((pid, Exit::Signal(lifecycle::SIGTERM)));
                }
                let names: Vec<String> = self.insts.keys().cloned().collect();
                for n in names {
                    let i = self.insts.get_mut(&n).unwrap();
                    if i.timer.is_some_and(|t| t <= self.now) {
                        i.timer = None;
                        self.dispatch(&n, lifecycle::Event::Timer);
                    }
                }
            }
            self.now = end;
            self.check_deadline();
        }

        fn check_deadline(&mut self) {
            if let Some(a) = &self.applying {
                if self.now > a.deadline {
                    self.violations.push(format!(
                        "the reload applied at {:?} is not answered at {:?}",
                        a.reload.applied, self.now
                    ));
                }
            }
        }

        /// Runs until nothing is left to do: no reload applied nor asked for, nothing waiting.
        fn quiesce(&mut self) {
            for _ in 0..100 {
                self.advance(Duration::from_millis(500));
                if self.applying.is_none() && self.queued == 0 && self.spawning.is_empty() {
                    return;
                }
            }
            self.violations.push("never quiesced".into());
        }

        /// What runs is the last file's: each process the version the file gives its instance.
        fn check_last_file_wins(&mut self) {
            for p in &self.procs {
                match self.file.get(&p.name) {
                    Some(&v) if v == p.spec => {}
                    v => self
                        .violations
                        .push(format!("{} runs version {}, the file says {v:?}", p.name, p.spec)),
                }
                if !self.insts.contains_key(&p.name) {
                    self.violations.push(format!("{} runs, forgotten (an orphan)", p.name));
                }
            }
        }
    }

    impl Inst {
        fn new(spec: u32) -> Inst {
            Inst {
                unit: Unit::new(policy()),
                spec,
                next_spec: None,
                removing: false,
                timer: None,
                started: None,
                exited_start: None,
            }
        }
    }

    /// Runs `ops`, then lets everything settle and starts every instance by hand: returns
    /// what broke a rule.
    fn play(ops: Vec<Op>) -> Vec<String> {
        let mut w = World::new();
        for op in ops {
            w.apply_op(op);
        }
        w.quiesce();
        w.check_last_file_wins();
        let names: Vec<String> = w.insts.keys().cloned().collect();
        for n in names {
            w.apply_op(Op::Request(NAMES.iter().position(|x| *x == n).unwrap(), Request::Start));
        }
        w.quiesce();
        w.check_last_file_wins();
        let running: Vec<&str> = w.procs.iter().map(|p| p.name.as_str()).collect();
        for n in w.file.keys() {
            if !running.contains(&n.as_str()) {
                w.violations.push(format!("{n} does not run after a start by hand"));
            }
        }
        w.violations
    }

    fn op() -> impl Strategy<Value = Op> {
        let request =
            prop_oneof![Just(Request::Start), Just(Request::Stop), Just(Request::Restart)];
        prop_oneof![
            3 => (0..3usize, request).prop_map(|(i, r)| Op::Request(i, r)),
            2 => (0..8u8, prop_oneof![3 => Just(0u8), 1 => 0..8u8])
                .prop_map(|(c, t)| Op::Reload(c, t)),
            1 => (0..3usize).prop_map(Op::Kill),
            1 => (0..3usize, prop_oneof![Just(0), Just(1)]).prop_map(|(i, c)| Op::Exit(i, c)),
            3 => prop_oneof![Just(0u64), Just(10), Just(299), Just(300), Just(999), Just(1000),
                             Just(1001), Just(2500)]
                .prop_map(Op::Advance),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every interleaving of requests by hand, reloads that change, remove and add back
        /// instances, SIGKILLs and exits: never two copies of an instance, nothing the reload
        /// starts begins while what it clears runs, every reload answered within the
        /// stop-timeout and the start grace, and what runs at the end is the last file's.
        #[test]
        fn reloads_interleaved_with_everything_answer_and_the_last_file_wins(
            ops in proptest::collection::vec(op(), 1..40)
        ) {
            let violations = play(ops);
            prop_assert!(violations.is_empty(), "{violations:#?}");
        }
    }

    /// The defect of issue 26: `stop c` (which ignores TERM), a reload that changes `c`,
    /// then `start c` while `c` still stops. The start ran `c`'s old settings and the reload
    /// waited for ever for a process that had been started outside it.
    #[test]
    fn stop_then_a_reload_that_changes_it_then_start_runs_the_new_settings_and_answers() {
        let mut w = World::new();
        w.apply_op(Op::Request(2, Request::Stop));
        assert_eq!(w.insts["c"].unit.state.name(), "deactivating");
        w.apply_op(Op::Reload(0b100, 0));
        w.apply_op(Op::Request(2, Request::Start));
        assert!(w.applying.as_ref().unwrap().reload.holds("c"), "the start joins the reload");
        w.apply_op(Op::Advance(STOP_TIMEOUT.as_millis() as u64));
        let p = w.procs.iter().find(|p| p.name == "c").expect("c runs again");
        assert_eq!(p.spec, 2, "with the reload's settings");
        w.apply_op(Op::Advance(START_GRACE.as_millis() as u64));
        assert_eq!(w.answered, 1, "the reload answered");
        // A later reload (SIGHUP) is applied and answered too.
        w.apply_op(Op::Reload(0b001, 0));
        w.quiesce();
        assert_eq!(w.answered, 2);
        assert!(w.violations.is_empty(), "{:?}", w.violations);
    }

    /// An instance whose spawn is under way when the reload comes: it is stopped once it
    /// runs, then started with the reload's spec (the lifecycle ignores a stop while
    /// activating, so the reload asks again).
    #[test]
    fn an_instance_being_spawned_is_cleared_once_it_runs() {
        let mut w = World::new();
        w.apply_op(Op::Exit(0, 1));
        // `a` waits to restart; its restart timer fires and its spawn is asked for.
        let State::AutoRestart { at } = w.insts["a"].unit.state else { panic!() };
        w.now = at;
        w.dispatch("a", lifecycle::Event::Timer);
        assert_eq!(w.insts["a"].unit.state, State::Activating);
        w.apply_op(Op::Reload(0b001, 0));
        w.quiesce();
        assert_eq!(w.procs.iter().find(|p| p.name == "a").map(|p| p.spec), Some(2));
        assert_eq!(w.answered, 1);
        assert!(w.violations.is_empty(), "{:?}", w.violations);
    }

    /// A stop by hand while a reload clears the instance takes it out of the reload: the
    /// reload answers without it, and its next start runs the reload's spec.
    #[test]
    fn a_stop_during_the_reload_keeps_it_stopped_with_the_new_spec_for_later() {
        let mut w = World::new();
        w.apply_op(Op::Reload(0b100, 0));
        w.apply_op(Op::Request(2, Request::Stop));
        w.quiesce();
        assert_eq!(w.answered, 1);
        assert!(w.procs.iter().all(|p| p.name != "c"), "c stays stopped");
        assert_eq!(w.insts["c"].next_spec, Some(2));
        w.apply_op(Op::Request(2, Request::Start));
        w.quiesce();
        assert_eq!(w.procs.iter().find(|p| p.name == "c").map(|p| p.spec), Some(2));
        assert!(w.violations.is_empty(), "{:?}", w.violations);
    }

    #[test]
    fn a_start_that_dies_within_its_grace_failed() {
        let mut unit = Unit::new(policy());
        unit.state = State::AutoRestart { at: Duration::from_secs(9) };
        unit.last_exit = Some(Exit::Code(3));
        let ms = Duration::from_millis;
        let seen = Seen { unit: &unit, started: None, exited_start: Some(ms(20)) };
        let Outcome::Failed(why) = start_outcome(seen, ms(10), ms(30)) else { panic!() };
        assert_eq!(why, "exit status 3 within 1s of its start");
        unit.state = State::Active { pid: 5, since: ms(40) };
        let seen = Seen { unit: &unit, started: Some(ms(40)), exited_start: Some(ms(5)) };
        assert_eq!(start_outcome(seen, ms(10), ms(50)), Outcome::Pending { wake: Some(ms(1040)) });
        assert_eq!(start_outcome(seen, ms(10), ms(1040)), Outcome::Started);
    }
}
