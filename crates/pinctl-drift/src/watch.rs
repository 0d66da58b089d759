//! One watch cycle over the planned instances: sample each, judge it, track its episodes,
//! rebalance those whose action says so, and report everything as data for the front end to
//! log, alert on and export.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use pinctl_config::{Config, DriftSettings, OnDrift};
use pinctl_plan::Plan;
use pinctl_topology::{NodeId, NodeSet, Placement};
use serde::Serialize;

use crate::interrupts::IrqDeltas;
use crate::read::{InstanceUser, Locator, Reader, SampleError};
use crate::rebalance::{
    self, Clock, Counted, MoveLimits, MoveReport, MoveStop, NodeRoom, ProcessControl, RepinReport,
};
use crate::rules::{
    DriftKind, Edge, Finding, InstanceDrift, Thresholds, Transition, Verdicts, local_fraction, mib,
    threads_out_of_place,
};
use crate::sample::{HostSample, InstanceSample, MemorySource, NodeMemory, NodeSample};

/// Listings of `/proc/PID/task` a re-pin makes at most.
pub const REPIN_ROUNDS: u32 = 8;

/// A planned instance to watch.
#[derive(Debug, Clone)]
pub struct Target {
    pub instance: String,
    pub service: String,
    pub planned: Placement,
    pub settings: DriftSettings,
    pub locator: Locator,
}

impl Target {
    /// The rules' thresholds from the service's settings.
    pub fn thresholds(&self) -> Thresholds {
        Thresholds {
            min_locality: self.settings.min_locality,
            min_memory: self.settings.min_memory,
            hold: self.settings.drift_hold,
            alert_cooldown: self.settings.alert_cooldown,
        }
    }
}

/// Every instance of the plan, with its service's drift settings and how to find it; a
/// service's `user` is looked up with `uid_of` (the live machine's: [`system_uid`]).
pub fn targets(config: &Config, plan: &Plan, uid_of: &dyn Fn(&str) -> Option<u32>) -> Vec<Target> {
    plan.placements
        .iter()
        .map(|p| {
            let found = config.instance(&p.instance);
            let unit = found.and_then(|(_, i)| i.unit.clone());
            let user = found.and_then(|(s, _)| s.user.as_deref());
            Target {
                instance: p.instance.clone(),
                service: p.service.clone(),
                planned: p.placement.clone(),
                settings: config.watch.drift(&p.service),
                locator: Locator {
                    pid_file: config.watch.pid_files.get(&p.instance).cloned(),
                    unit,
                    supervised: None,
                    user: user.map(|name| InstanceUser::resolve(name, uid_of)),
                },
            }
        })
        .collect()
}

/// The uid of a user name on this machine (the system's name service: `/etc/passwd`, or
/// whatever NSS is set up with), `None` when it has none.
pub fn system_uid(name: &str) -> Option<u32> {
    pinctl_sys::user_by_name(name).ok().flatten().map(|u| u.uid)
}

/// The free memory a planned node must keep: a fixed watermark, or the memory reserve
/// (`memory-reserve`, else 2% of the node), as the planner counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Watermark {
    pub fixed: Option<u64>,
    pub memory_reserve: Option<u64>,
}

impl Watermark {
    /// From the file's `[host]` keys.
    pub fn of(config: &Config) -> Watermark {
        Watermark {
            fixed: config.watch.node_free_watermark,
            memory_reserve: config.host.memory_reserve,
        }
    }

    /// The watermark of one node.
    pub fn of_node(&self, _node: NodeId, s: &NodeSample) -> u64 {
        self.fixed.or(self.memory_reserve).unwrap_or(s.total_bytes / 50)
    }
}

/// An action as the file spells it (`ignore`, `alert`, `rebalance`), in JSON reports.
fn on_drift_name<S: serde::Serializer>(action: &OnDrift, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(action.name())
}

/// A drift episode that started or ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftEvent {
    pub instance: String,
    pub service: String,
    pub kind: DriftKind,
    pub edge: Edge,
    pub episode: u64,
    pub value: f64,
    pub threshold: f64,
    pub detail: String,
    /// Whether the alert command is due (a start outside the cool-down, action not
    /// `ignore`).
    pub alert: bool,
    #[serde(serialize_with = "on_drift_name")]
    pub action: OnDrift,
    /// Seconds the episode lasted (ends only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lasted_seconds: Option<f64>,
    /// The instance's local fraction at this sample, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_fraction: Option<f64>,
}

impl DriftEvent {
    /// The environment an alert command gets: `PINCTL_INSTANCE`, `PINCTL_SERVICE`,
    /// `PINCTL_DRIFT_KIND`, `PINCTL_DRIFT_EVENT` (`start`), `PINCTL_EPISODE`, `PINCTL_VALUE`,
    /// `PINCTL_THRESHOLD`, `PINCTL_DETAIL`, `PINCTL_ACTION` and, when known,
    /// `PINCTL_LOCAL_FRACTION`.
    pub fn alert_env(&self) -> Vec<(String, String)> {
        let edge = match self.edge {
            Edge::Start => "start",
            Edge::End => "end",
        };
        let mut env = vec![
            ("PINCTL_INSTANCE", self.instance.clone()),
            ("PINCTL_SERVICE", self.service.clone()),
            ("PINCTL_DRIFT_KIND", self.kind.name().to_string()),
            ("PINCTL_DRIFT_EVENT", edge.to_string()),
            ("PINCTL_EPISODE", self.episode.to_string()),
            ("PINCTL_VALUE", self.value.to_string()),
            ("PINCTL_THRESHOLD", self.threshold.to_string()),
            ("PINCTL_DETAIL", self.detail.clone()),
            ("PINCTL_ACTION", self.action.name().to_string()),
        ];
        if let Some(f) = self.local_fraction {
            env.push(("PINCTL_LOCAL_FRACTION", format!("{f:.4}")));
        }
        env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

/// One instance in a cycle.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceReport {
    pub instance: String,
    pub service: String,
    #[serde(serialize_with = "on_drift_name")]
    pub action: OnDrift,
    pub planned_cpus: String,
    pub planned_nodes: String,
    pub planned_policy: String,
    /// `None` when the instance could not be sampled (`error` says why).
    pub sample: Option<InstanceSample>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the process found could not be proven to be the instance, or its PID file could
    /// not be read safely (`error` says why): it is not sampled, re-pinned or moved.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
    /// Fraction of memory on the planned nodes (`None` under `min-memory` or unsampled).
    pub local_fraction: Option<f64>,
    /// Why a sampled instance's locality is not judged (`3.2MiB resident, under min-memory
    /// 64.0MiB`): what `pinctl status` shows for its LOCAL `-`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locality_not_judged: Option<String>,
    pub threads_out_of_place: usize,
    /// Movable interrupts per second on its CPUs since the last cycle (`None` the first
    /// cycle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupts_per_second: Option<f64>,
    /// What is wrong now (before the hold time decides whether it is an episode).
    pub findings: Vec<(DriftKind, Finding)>,
    /// Kinds with an episode going on.
    pub drifting: Vec<DriftKind>,
    /// Episodes so far, per kind.
    pub episodes: BTreeMap<DriftKind, u64>,
}

/// One rebalance.
#[derive(Debug, Clone, Serialize)]
pub struct RebalanceReport {
    pub instance: String,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<RepinReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MoveReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RebalanceReport {
    /// Whether memory could not be moved because no planned node had room (alert instead).
    pub fn blocked_by_full_node(&self) -> bool {
        matches!(self.memory.as_ref().map(|m| &m.stop), Some(MoveStop::NodeFull { .. }))
    }
}

/// Everything one cycle found and did.
#[derive(Debug, Clone, Serialize)]
pub struct CycleReport {
    pub host: HostSample,
    pub instances: Vec<InstanceReport>,
    pub events: Vec<DriftEvent>,
    pub rebalances: Vec<RebalanceReport>,
    /// Things said once (missing capability, no cgroup v2).
    pub notices: Vec<String>,
    #[serde(serialize_with = "crate::sample::seconds")]
    pub took: Duration,
}

/// What `watch --once` exits with: a check a cron job or a Nagios/Icinga service runs, so the
/// monitoring plugins' statuses (docs/drift.md): nothing wrong, drift, an instance that could
/// not be sampled, or a file or plan it could not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckStatus {
    Ok = 0,
    Drift = 1,
    NotSampled = 2,
    Unknown = 3,
}

impl CycleReport {
    /// The worst of the instances': one not sampled outweighs drift elsewhere (it may be
    /// drifting too, unseen).
    pub fn check(&self) -> CheckStatus {
        let not_sampled = self.instances.iter().any(|i| i.sample.is_none());
        let drifting = self.instances.iter().any(|i| !i.findings.is_empty());
        if not_sampled {
            CheckStatus::NotSampled
        } else if drifting {
            CheckStatus::Drift
        } else {
            CheckStatus::Ok
        }
    }
}

/// The state kept between cycles.
#[derive(Debug)]
pub struct Watcher {
    pub targets: Vec<Target>,
    reader: Reader,
    drift: BTreeMap<String, InstanceDrift>,
    watermark: Watermark,
    interval: Duration,
    last_rebalance: BTreeMap<String, Duration>,
    interrupts: crate::interrupts::InterruptCounter,
}

/// Whether an instance is due for a rebalance: its action says so, locality or CPU drift is
/// going on, and the last rebalance is at least `rebalance-cooldown` ago.
pub fn rebalance_due(
    settings: &DriftSettings,
    drift: &InstanceDrift,
    last: Option<Duration>,
    now: Duration,
) -> bool {
    settings.on_drift == OnDrift::Rebalance
        && (drift.tracker(DriftKind::Locality).is_active()
            || drift.tracker(DriftKind::Cpu).is_active())
        && last.is_none_or(|t| now.saturating_sub(t) >= settings.rebalance_cooldown)
}

impl Watcher {
    /// Whether kernel files are kept open between cycles (see [`pinctl_sysfs::held`]; on by default
    /// on the live machine). The benchmark compares both.
    pub fn hold_files(&mut self, on: bool) {
        self.reader.hold_files(on);
    }

    /// How often it samples (`watch-interval`).
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Samples every `interval` from now on (a reload changed `watch-interval`).
    pub fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
        self.reader.scheduler.interval = interval;
    }

    /// Judges node pressure by `watermark` from now on (a reload changed it).
    pub fn set_watermark(&mut self, watermark: Watermark) {
        self.watermark = watermark;
    }

    /// A watcher of `targets` on the machine under `root`.
    pub fn new(
        root: &Path,
        targets: Vec<Target>,
        interval: Duration,
        watermark: Watermark,
    ) -> Watcher {
        Watcher {
            targets,
            reader: Reader::new(root, interval),
            drift: BTreeMap::new(),
            watermark,
            interval,
            last_rebalance: BTreeMap::new(),
            interrupts: Default::default(),
        }
    }

    /// Forgets what was read of an instance's process (a supervisor restarted it: the last
    /// numa_maps walk belongs to the old process).
    pub fn forget(&mut self, instance: &str) {
        self.reader.forget(instance);
    }

    /// One cycle at `now` (the watcher's monotonic time). With `control`, instances whose
    /// action is `rebalance` are moved back; without, nothing is changed.
    pub fn cycle(
        &mut self,
        now: Duration,
        control: Option<(&mut dyn ProcessControl, &mut dyn Clock)>,
    ) -> CycleReport {
        self.cycle_with_events(now, control, &mut |_, _| {})
    }

    /// [`Watcher::cycle`], handing each drift event (with its target) to `on_event` as soon as
    /// it is known, before the instance is rebalanced: a rebalance can take seconds, and the
    /// drift's log line and alert must not wait for it. The report still carries every event.
    pub fn cycle_with_events(
        &mut self,
        now: Duration,
        mut control: Option<(&mut dyn ProcessControl, &mut dyn Clock)>,
        on_event: &mut dyn FnMut(&Target, &DriftEvent),
    ) -> CycleReport {
        let started = Instant::now();
        let mut notices = Vec::new();
        let host = self.reader.host().unwrap_or_else(|e| {
            notices.push(format!("cannot read the host's node counters: {e}"));
            HostSample::default()
        });
        let irq_deltas = self.count_interrupts(now);
        let facts = CycleFacts { now, host, irq_deltas, watermark: self.watermark };
        // numa_maps walks may take 1% of the interval per cycle, at least 10 ms (the walk that
        // spends it is finished).
        let mut budget = (self.interval / 100).max(Duration::from_millis(10));
        let mut instances = Vec::with_capacity(self.targets.len());
        let mut events = Vec::new();
        let mut rebalances = Vec::new();
        for t in &self.targets {
            let th = t.thresholds();
            let drift = self.drift.entry(t.instance.clone()).or_default();
            let (seen, transitions) = observe(&mut self.reader, &facts, t, drift, &mut budget);
            for (kind, tr) in transitions {
                let e = event(t, kind, tr, seen.fraction);
                on_event(t, &e);
                events.push(e);
            }
            if let (Some(s), Some((ctl, clock))) = (&seen.sample, control.as_mut()) {
                let last = self.last_rebalance.get(&t.instance).copied();
                if rebalance_due(&t.settings, drift, last, now) {
                    self.last_rebalance.insert(t.instance.clone(), now);
                    let control: (&mut dyn ProcessControl, &mut dyn Clock) =
                        (&mut **ctl, &mut **clock);
                    rebalances.extend(rebalance_now(
                        &mut self.reader,
                        &facts,
                        t,
                        s,
                        drift,
                        control,
                    ));
                }
            }
            instances.push(seen.report(t, &th, drift, facts.irq_deltas.as_ref()));
        }
        notices.extend(self.reader.notices.take());
        self.reader.end_cycle();
        let host = facts.host;
        CycleReport { host, instances, events, rebalances, notices, took: started.elapsed() }
    }

    /// The interrupts fired since the last cycle (`None` the first cycle, or when they cannot
    /// be counted: said once).
    fn count_interrupts(&mut self, now: Duration) -> Option<IrqDeltas> {
        match self.interrupts.sample(self.reader.root(), now) {
            Ok(d) => d,
            Err(e) => {
                self.reader.notices.once(format!("cannot count interrupts: {e}"));
                None
            }
        }
    }
}

/// What a cycle knows of the whole machine, the same for each instance.
struct CycleFacts {
    now: Duration,
    host: HostSample,
    irq_deltas: Option<IrqDeltas>,
    watermark: Watermark,
}

/// What a cycle saw of one instance.
struct Seen {
    sample: Option<InstanceSample>,
    /// Why it was not sampled.
    error: Option<String>,
    refused: bool,
    verdicts: Verdicts,
    /// Its memory's fraction on the planned nodes (`None` under `min-memory`).
    fraction: Option<f64>,
}

/// Samples one instance, judges the sample and moves its episodes on; an instance that could
/// not be sampled is forgotten, and its episodes end.
fn observe(
    reader: &mut Reader,
    facts: &CycleFacts,
    t: &Target,
    drift: &mut InstanceDrift,
    budget: &mut Duration,
) -> (Seen, Vec<(DriftKind, Transition)>) {
    let (th, now) = (t.thresholds(), facts.now);
    let sampled = reader.sample(&t.instance, &t.locator, Some(&t.planned.cpus), now, budget);
    let refused = matches!(sampled, Err(SampleError::Refused(_) | SampleError::PidFile(_)));
    let (sample, error, verdicts, transitions) = match sampled {
        Ok(s) => {
            let wm = facts.watermark;
            let ending = |k: DriftKind| drift.tracker(k).is_active();
            let mut v =
                Verdicts::of(&s, &facts.host, &t.planned, &th, |n, ns| wm.of_node(n, ns), ending);
            if let (true, Some(d)) = (t.settings.quiet_interrupts, &facts.irq_deltas) {
                v.judge_interrupts(d, &t.planned.cpus, ending(DriftKind::Interrupts));
            }
            let tr = drift.observe(now, v.clone(), &th);
            (Some(s), None, v, tr)
        }
        Err(e) => {
            if let SampleError::Permission { capability, .. } = &e {
                reader.notices.once(format!(
                    "reading other processes' memory maps needs {capability}: \
                     instances that cannot be read are reported as not sampled"
                ));
            }
            reader.forget(&t.instance);
            (None, Some(e.to_string()), Verdicts::default(), drift.vanish(now, &th))
        }
    };
    let fraction = sample
        .as_ref()
        .and_then(|s| local_fraction(&s.memory, t.planned.memory_home(), th.min_memory));
    (Seen { sample, error, refused, verdicts, fraction }, transitions)
}

/// Rebalances a sampled instance now (it is due), measuring its memory again between passes.
fn rebalance_now(
    reader: &mut Reader,
    facts: &CycleFacts,
    t: &Target,
    s: &InstanceSample,
    drift: &InstanceDrift,
    (ctl, clock): (&mut dyn ProcessControl, &mut dyn Clock),
) -> Vec<RebalanceReport> {
    let wm = facts.watermark;
    let root = reader.root().to_path_buf();
    rebalance_instance(
        &root,
        t,
        s,
        &facts.host,
        drift,
        &|n, ns| wm.of_node(n, ns),
        &mut || measure_again(reader, &t.instance, s, facts.now),
        ctl,
        clock,
    )
}

impl Seen {
    /// The instance's line of the cycle's report.
    fn report(
        self,
        t: &Target,
        th: &Thresholds,
        drift: &InstanceDrift,
        irq_deltas: Option<&IrqDeltas>,
    ) -> InstanceReport {
        let (p, v, sample, fraction) = (&t.planned, self.verdicts, self.sample, self.fraction);
        let findings = [
            (DriftKind::Locality, v.locality),
            (DriftKind::Cpu, v.cpu),
            (DriftKind::Policy, v.policy),
            (DriftKind::NodePressure, v.node_pressure),
            (DriftKind::Interrupts, v.interrupts),
        ]
        .into_iter()
        .filter_map(|(k, f)| f.map(|f| (k, f)))
        .collect();
        InstanceReport {
            instance: t.instance.clone(),
            service: t.service.clone(),
            action: t.settings.on_drift,
            planned_cpus: p.cpus.to_string(),
            planned_nodes: p.memory_home().to_string(),
            planned_policy: p.memory_policy.to_string(),
            local_fraction: fraction,
            locality_not_judged: sample.as_ref().filter(|_| fraction.is_none()).map(|s| {
                format!(
                    "{} resident, under min-memory {}",
                    mib(s.memory.total()),
                    mib(th.min_memory)
                )
            }),
            threads_out_of_place: sample
                .as_ref()
                .map_or(0, |s| threads_out_of_place(s, &p.cpus).len()),
            interrupts_per_second: irq_deltas
                .map(|d| d.on(&p.cpus).movable as f64 / d.seconds.max(f64::MIN_POSITIVE)),
            sample,
            error: self.error,
            refused: self.refused,
            findings,
            drifting: DriftKind::ALL
                .into_iter()
                .filter(|k| drift.tracker(*k).is_active())
                .collect(),
            episodes: DriftKind::ALL
                .into_iter()
                .map(|k| (k, drift.tracker(k).episodes()))
                .collect(),
        }
    }
}

fn event(t: &Target, kind: DriftKind, tr: Transition, local_fraction: Option<f64>) -> DriftEvent {
    DriftEvent {
        instance: t.instance.clone(),
        service: t.service.clone(),
        kind,
        edge: tr.edge,
        episode: tr.episode,
        value: tr.finding.value,
        threshold: tr.finding.threshold,
        detail: tr.finding.detail,
        alert: tr.alert && t.settings.on_drift != OnDrift::Ignore,
        action: t.settings.on_drift,
        lasted_seconds: tr.lasted.map(|d| d.as_secs_f64()),
        local_fraction,
    }
}

/// Passes of a memory move at most: a pass whose count reached the aim while the measure read
/// again stays short is followed by another, with the measure's figures.
pub const MOVE_PASSES: u32 = 3;

#[allow(clippy::too_many_arguments)]
fn rebalance_instance(
    root: &Path,
    t: &Target,
    s: &InstanceSample,
    host: &HostSample,
    drift: &InstanceDrift,
    watermark: &dyn Fn(NodeId, &NodeSample) -> u64,
    measure_again: &mut dyn FnMut() -> Result<NodeMemory, SampleError>,
    ctl: &mut dyn ProcessControl,
    clock: &mut dyn Clock,
) -> Vec<RebalanceReport> {
    let nodes: &NodeSet = t.planned.memory_home();
    let rooms: Vec<NodeRoom> = nodes
        .iter()
        .filter_map(|n| {
            let ns = host.nodes.get(&n)?;
            Some(NodeRoom { node: n, free: ns.free_bytes, keep: watermark(n, ns) })
        })
        .collect();
    let mut out: Vec<RebalanceReport> = s
        .pids
        .iter()
        .map(|&pid| RebalanceReport {
            instance: t.instance.clone(),
            pid,
            threads: None,
            memory: None,
            error: None,
        })
        .collect();
    for r in &mut out {
        // Only the process the sample proved to be the instance: its PID with the same start
        // time (one that exited and whose PID was taken since is left alone).
        if let Err(why) = still_the_sampled(root, r.pid, s) {
            r.error = Some(why);
            continue;
        }
        if drift.tracker(DriftKind::Cpu).is_active() {
            match rebalance::repin_threads(ctl, r.pid, &t.planned.cpus, REPIN_ROUNDS) {
                Ok(threads) => r.threads = Some(threads),
                Err(e) => r.error = Some(e.to_string()),
            }
        }
    }
    if drift.tracker(DriftKind::Locality).is_active() {
        let mut limits = MoveLimits {
            stall: t.settings.rebalance_stall,
            rate: t.settings.rebalance_rate,
            min_locality: t.settings.min_locality,
            total_bytes: s.memory.total(),
            local_bytes: s.memory.on(nodes),
        };
        let counted = match s.source {
            MemorySource::Cgroup => Counted::AnonymousPages,
            MemorySource::NumaMaps | MemorySource::NumaMapsCached => Counted::MappedPages,
        };
        move_back(&mut out, &mut limits, nodes, &rooms, counted, measure_again, ctl, clock, root);
    }
    out
}

/// Moves the memory of every process in `out` (those not already in error) back onto
/// `nodes`, pass after pass while a pass's own count says locality is restored and the measure
/// read again says it is not; each report ends with the locality measured after its last pass.
#[allow(clippy::too_many_arguments)]
fn move_back(
    out: &mut [RebalanceReport],
    limits: &mut MoveLimits,
    nodes: &NodeSet,
    rooms: &[NodeRoom],
    counted: Counted,
    measure_again: &mut dyn FnMut() -> Result<NodeMemory, SampleError>,
    ctl: &mut dyn ProcessControl,
    clock: &mut dyn Clock,
    root: &Path,
) {
    for pass in 1..=MOVE_PASSES {
        let mut claimed = false;
        for r in out.iter_mut().filter(|r| r.error.is_none()) {
            let pid = r.pid;
            let t0 = clock.now();
            let moved = rebalance::read_ranges(root, pid, nodes, counted).and_then(|ranges| {
                let read = clock.now().saturating_sub(t0);
                let mut m = rebalance::move_memory(ctl, clock, pid, &ranges, rooms, limits)?;
                // numa_maps walks the page tables too: part of the move's cost.
                m.took += read;
                m.lookup += read;
                Ok(m)
            });
            match moved {
                Ok(m) => {
                    limits.local_bytes += m.bytes_counted;
                    claimed |= m.stop == MoveStop::LocalityRestored;
                    match &mut r.memory {
                        Some(so_far) => so_far.absorb(m),
                        None => r.memory = Some(m),
                    }
                }
                Err(e) => r.error = Some(e.to_string()),
            }
        }
        // The move's count is an estimate: the measure says whether locality is back.
        let Ok(now) = measure_again() else { break };
        (limits.total_bytes, limits.local_bytes) = (now.total(), now.on(nodes));
        let after = local_fraction(&now, nodes, 0);
        for m in out.iter_mut().filter_map(|r| r.memory.as_mut()) {
            m.locality_after = after;
        }
        let short = after.is_some_and(|f| f < limits.min_locality);
        if !(claimed && short) {
            break;
        }
        if pass == MOVE_PASSES {
            for m in out.iter_mut().filter_map(|r| r.memory.as_mut()) {
                if m.stop == MoveStop::LocalityRestored {
                    m.stop = MoveStop::MeasuredShort;
                }
            }
        }
    }
}

/// An instance's memory measured again as its sample measured it: its cgroup's counters, or
/// a walk of its processes' numa_maps (remembered as its last walk).
fn measure_again(
    reader: &mut Reader,
    instance: &str,
    s: &InstanceSample,
    now: Duration,
) -> Result<NodeMemory, SampleError> {
    match (s.source, &s.cgroup) {
        (MemorySource::Cgroup, Some(dir)) => reader.cgroup_memory(dir.trim_start_matches('/')),
        _ => reader.walk_now(instance, &s.pids, now),
    }
}

/// `Ok` when `pid` still has the start time it had when `s` was sampled.
fn still_the_sampled(root: &Path, pid: u32, s: &InstanceSample) -> Result<(), String> {
    let Some(&then) = s.start_times.get(&pid) else {
        return Err(format!("process `{pid}` was not proven to be the instance: left alone"));
    };
    let now = pinctl_sysfs::proc::pid::stat::read(&mut pinctl_sysfs::FsRoot::new(root), pid)
        .ok()
        .flatten()
        .map(|stat| stat.start_time);
    match now {
        Some(now) if now == then => Ok(()),
        _ => Err(format!("process `{pid}` exited since it was sampled: left alone")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fs;

    use pinctl_sys::PageStatus;
    use pinctl_topology::MemoryPolicy;

    use super::*;
    use crate::read::tests::{stat, write};
    use crate::rebalance::tests::{FakeClock, FakeControl};

    /// Two nodes; instance `db` (PID 100, one thread) planned on node 0, CPUs 0-1.
    pub(crate) fn host(remote_pages: u32, thread_cpu: u32, allowed: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "run/db.pid", "100\n");
        write(r, "proc/100/stat", &stat(100, 1, thread_cpu));
        write(r, "proc/100/task/100/stat", &stat(100, 1, thread_cpu));
        write(r, "proc/100/task/100/status", &format!("Cpus_allowed_list:\t{allowed}\n"));
        write(
            r,
            "proc/100/numa_maps",
            &format!("10000 bind:0 anon=1 N0=16384 N1={remote_pages} kernelpagesize_kB=4\n"),
        );
        write(r, "proc/100/maps", "10000-8010000 rw-p 0 0:0 0\n");
        for n in [0, 1] {
            write(
                r,
                &format!("sys/devices/system/node/node{n}/meminfo"),
                &format!("Node {n} MemTotal: 8388608 kB\nNode {n} MemFree: 4194304 kB\n"),
            );
        }
        d
    }

    /// A watcher of [`target`] on the host `d`, every 10 s.
    fn watcher(d: &tempfile::TempDir, action: OnDrift) -> Watcher {
        Watcher::new(d.path(), vec![target(action)], Duration::from_secs(10), Watermark::default())
    }

    pub(crate) fn target(action: OnDrift) -> Target {
        Target {
            instance: "db".into(),
            service: "db".into(),
            planned: Placement {
                cpus: "0-1".parse().unwrap(),
                nodes: "0".parse().unwrap(),
                memory_policy: MemoryPolicy::Bind,
                memory_nodes: "0".parse().unwrap(),
            },
            settings: DriftSettings {
                on_drift: action,
                drift_hold: Duration::from_secs(20),
                min_memory: 1 << 20,
                ..DriftSettings::default()
            },
            locator: Locator { pid_file: Some("/run/db.pid".into()), ..Locator::default() },
        }
    }

    #[test]
    fn an_alert_instance_gets_one_alert_per_episode_and_is_never_touched() {
        let d = host(16384, 5, "0-7");
        let mut w = watcher(&d, OnDrift::Alert);
        let mut ctl = FakeControl { listings: vec![vec![100]], ..Default::default() };
        let mut fake_clock = FakeClock(ctl.clock.clone());
        let mut alerts = 0;
        let mut starts = Vec::new();
        for i in 0..6 {
            let r = w.cycle(Duration::from_secs(i * 10), Some((&mut ctl, &mut fake_clock)));
            alerts += r.events.iter().filter(|e| e.alert).count();
            starts.extend(r.events.iter().filter(|e| e.edge == Edge::Start).map(|e| (i, e.kind)));
            assert!(r.rebalances.is_empty());
            let inst = &r.instances[0];
            assert_eq!(inst.local_fraction, Some(0.5));
            assert_eq!(inst.threads_out_of_place, 1);
        }
        // Locality and CPU drift both start once the 20 s hold has passed (third sample).
        assert_eq!(starts, vec![(2, DriftKind::Locality), (2, DriftKind::Cpu)]);
        assert_eq!(alerts, 2);
        let e = w.cycle(Duration::from_secs(100), None);
        assert!(e.events.is_empty());
        assert!(ctl.calls.is_empty(), "an alert instance was touched: {:?}", ctl.calls);
    }

    /// Forwards to a fake kernel and writes its pages into the numa_maps of [`host`]'s
    /// instance after each move, as the kernel's own file would show them: 16384 local pages
    /// besides the fake's, and `unmapped` remote pages more (memory the move cannot reach).
    struct Mirroring<'a> {
        fake: &'a mut FakeControl,
        root: std::path::PathBuf,
        unmapped: u64,
    }

    impl ProcessControl for Mirroring<'_> {
        fn threads(&mut self, pid: u32) -> std::io::Result<Option<Vec<u32>>> {
            self.fake.threads(pid)
        }
        fn set_thread_affinity(
            &mut self,
            tid: u32,
            cpus: &pinctl_topology::CpuSet,
        ) -> std::io::Result<()> {
            self.fake.set_thread_affinity(tid, cpus)
        }
        fn page_nodes(&mut self, pid: u32, p: &[usize]) -> std::io::Result<Vec<PageStatus>> {
            self.fake.page_nodes(pid, p)
        }
        fn move_pages(
            &mut self,
            pid: u32,
            p: &[usize],
            node: NodeId,
        ) -> std::io::Result<Vec<PageStatus>> {
            let st = self.fake.move_pages(pid, p, node)?;
            let on = |n: NodeId| self.fake.pages.values().filter(|&&at| at == n).count() as u64;
            let (local, remote) = (16384 + on(0), on(1));
            let mut text =
                format!("10000 bind:0 anon=1 N0={local} N1={remote} kernelpagesize_kB=4\n");
            if self.unmapped > 0 {
                text.push_str(&format!(
                    "9000000 bind:0 N1={} kernelpagesize_kB=4\n",
                    self.unmapped
                ));
            }
            write(&self.root, "proc/100/numa_maps", &text);
            Ok(st)
        }
    }

    #[test]
    fn a_rebalance_instance_is_repinned_and_its_pages_moved_back() {
        let d = host(16384, 5, "0-7");
        let mut w = watcher(&d, OnDrift::Rebalance);
        let mut fake = FakeControl { listings: vec![vec![100]], ..Default::default() };
        for i in 0..16384usize {
            fake.pages.insert(0x10000 + (16384 + i) * 4096, 1);
        }
        let mut fake_clock = FakeClock(fake.clock.clone());
        let mut ctl = Mirroring { fake: &mut fake, root: d.path().into(), unmapped: 0 };
        let mut reports = Vec::new();
        for i in 0..3 {
            let r = w.cycle(Duration::from_secs(i * 10), Some((&mut ctl, &mut fake_clock)));
            reports.extend(r.rebalances);
        }
        assert_eq!(reports.len(), 1, "{reports:?}");
        let r = &reports[0];
        assert_eq!(r.threads.as_ref().unwrap().repinned, 1);
        assert_eq!(ctl.fake.affinity[&100].to_string(), "0-1");
        let m = r.memory.as_ref().unwrap();
        // 50% local to the aim, 92%: 0.84 of the remote half moved, in one pass, and the
        // measure read again agrees.
        assert_eq!((m.stop.clone(), m.passes), (MoveStop::LocalityRestored, 1), "{m:?}");
        assert!(m.pages_moved >= 13763 && m.pages_moved < 16384, "{m:?}");
        assert!(m.locality_after.is_some_and(|f| f >= 0.92), "{m:?}");
        assert!(!r.blocked_by_full_node());
        // The next cycle is within the cool-down: nothing more, and the episode has ended.
        let again = w.cycle(Duration::from_secs(30), Some((&mut ctl, &mut fake_clock)));
        assert!(again.rebalances.is_empty());
        let ended: Vec<_> = again.events.iter().filter(|e| e.edge == Edge::End).collect();
        assert!(ended.iter().any(|e| e.kind == DriftKind::Locality), "{:?}", again.events);
        // Without control nothing is ever changed.
        let calls = ctl.fake.calls.len();
        w.cycle(Duration::from_secs(10_000), None);
        assert_eq!(ctl.fake.calls.len(), calls);
    }

    /// The memory move of the first rebalance of [`host`]'s instance `d`, with `remote` of its
    /// pages on node 1 from its 16384th page on, and `unmapped` remote pages more that no
    /// move can reach, over three 10 s cycles.
    fn first_move(d: &tempfile::TempDir, remote: usize, unmapped: u64) -> MoveReport {
        let mut w = watcher(d, OnDrift::Rebalance);
        let mut fake = FakeControl { listings: vec![vec![100]], ..Default::default() };
        for i in 0..remote {
            fake.pages.insert(0x10000 + (16384 + i) * 4096, 1);
        }
        let mut fake_clock = FakeClock(fake.clock.clone());
        let mut ctl = Mirroring { fake: &mut fake, root: d.path().into(), unmapped };
        let mut reports = Vec::new();
        for i in 0..3 {
            let cycle = w.cycle(Duration::from_secs(i * 10), Some((&mut ctl, &mut fake_clock)));
            reports.extend(cycle.rebalances);
        }
        reports.remove(0).memory.expect("a memory move")
    }

    #[test]
    fn a_move_whose_count_outruns_the_measure_goes_on_from_the_measure() {
        // The instance grew 8192 remote pages since it was sampled: the first pass stops
        // where the sample's figures say locality is back, the measure says it is not, and a
        // second pass starts from the measure's figures.
        let d = host(16384, 0, "0-1");
        write(d.path(), "proc/100/maps", "10000-c010000 rw-p 0 0:0 0\n");
        let m = first_move(&d, 16384 + 8192, 0);
        assert_eq!((m.stop.clone(), m.passes), (MoveStop::LocalityRestored, 2), "{m:?}");
        assert!(m.locality_after.is_some_and(|f| f >= 0.9), "{m:?}");
    }

    #[test]
    fn memory_no_move_reaches_is_reported_not_claimed() {
        // 32768 remote pages in a mapping that maps does not list (no range to move): the
        // mapped remote pages all move, and the report says locality is still short.
        let d = host(16384, 0, "0-1");
        write(
            d.path(),
            "proc/100/numa_maps",
            "10000 bind:0 anon=1 N0=16384 N1=16384 kernelpagesize_kB=4\n\
             9000000 bind:0 N1=32768 kernelpagesize_kB=4\n",
        );
        let m = first_move(&d, 16384, 32768);
        assert_eq!((m.stop.clone(), m.pages_moved), (MoveStop::NothingLeft, 16384), "{m:?}");
        assert_eq!(m.locality_after, Some(0.5), "{m:?}");
    }

    #[test]
    fn passes_end_when_the_measure_never_agrees() {
        // A measure that keeps saying half is remote (memory comes back as fast as it moves):
        // three passes, each stopped by its own count, and the report says the measure is short.
        let d = host(32768, 0, "0-1");
        let mut fake = FakeControl { listings: vec![vec![100]], ..Default::default() };
        for i in 0..32768usize {
            fake.pages.insert(0x10000 + i * 4096, 1);
        }
        let mut clock = FakeClock(fake.clock.clone());
        let mut out = vec![RebalanceReport {
            instance: "db".into(),
            pid: 100,
            threads: None,
            memory: None,
            error: None,
        }];
        let mut limits = MoveLimits {
            stall: Duration::from_millis(20),
            rate: u64::MAX,
            min_locality: 0.9,
            total_bytes: 32768 * 4096,
            local_bytes: 16384 * 4096,
        };
        let half = NodeMemory(
            [(0, 8192 * 4096), (1, 8192 * 4096)]
                .into_iter()
                .map(|(n, anon)| (n, crate::sample::NodeBytes { anon, ..Default::default() }))
                .collect(),
        );
        let mut measured = 0;
        move_back(
            &mut out,
            &mut limits,
            &"0".parse().unwrap(),
            &[NodeRoom { node: 0, free: 1 << 40, keep: 0 }],
            Counted::MappedPages,
            &mut || {
                measured += 1;
                Ok(half.clone())
            },
            &mut fake,
            &mut clock,
            d.path(),
        );
        let m = out[0].memory.as_ref().unwrap();
        assert_eq!((m.stop.clone(), m.passes, measured), (MoveStop::MeasuredShort, 3, 3), "{m:?}");
        assert_eq!(m.locality_after, Some(0.5));
    }

    /// Forwards to a fake, counting the calls where a callback can see them.
    struct Counting<'a>(&'a mut FakeControl, std::rc::Rc<std::cell::Cell<usize>>);

    impl ProcessControl for Counting<'_> {
        fn threads(&mut self, pid: u32) -> std::io::Result<Option<Vec<u32>>> {
            self.1.set(self.1.get() + 1);
            self.0.threads(pid)
        }
        fn set_thread_affinity(
            &mut self,
            tid: u32,
            cpus: &pinctl_topology::CpuSet,
        ) -> std::io::Result<()> {
            self.1.set(self.1.get() + 1);
            self.0.set_thread_affinity(tid, cpus)
        }
        fn page_nodes(&mut self, pid: u32, p: &[usize]) -> std::io::Result<Vec<PageStatus>> {
            self.1.set(self.1.get() + 1);
            self.0.page_nodes(pid, p)
        }
        fn move_pages(
            &mut self,
            pid: u32,
            p: &[usize],
            node: NodeId,
        ) -> std::io::Result<Vec<PageStatus>> {
            self.1.set(self.1.get() + 1);
            self.0.move_pages(pid, p, node)
        }
    }

    #[test]
    fn drift_events_are_told_before_the_rebalance_they_cause() {
        let d = host(16384, 5, "0-7");
        let mut w = watcher(&d, OnDrift::Rebalance);
        let mut fake = FakeControl { listings: vec![vec![100]], ..Default::default() };
        for i in 0..16384usize {
            fake.pages.insert(0x10000 + (16384 + i) * 4096, 1);
        }
        let mut fake_clock = FakeClock(fake.clock.clone());
        let calls = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut ctl = Counting(&mut fake, calls.clone());
        let mut told = Vec::new();
        let mut rebalances = 0;
        for i in 0..3 {
            let r = w.cycle_with_events(
                Duration::from_secs(i * 10),
                Some((&mut ctl, &mut fake_clock)),
                &mut |t, e| told.push((t.instance.clone(), e.kind, calls.get())),
            );
            rebalances += r.rebalances.len();
        }
        assert_eq!(rebalances, 1);
        assert!(!told.is_empty());
        // Every start was told with no call made on the instance yet.
        assert!(told.iter().all(|(i, _, c)| i == "db" && *c == 0), "{told:?}");
        assert!(calls.get() > 0, "the rebalance came after");
    }

    /// A PID file in a folder anyone may write names a process outside any cgroup of the
    /// instance: however far it drifts, it is refused, never re-pinned or moved.
    #[test]
    fn a_process_a_pid_file_cannot_prove_is_never_rebalanced() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = host(16384, 5, "0-7");
        fs::set_permissions(d.path().join("run"), fs::Permissions::from_mode(0o777)).unwrap();
        let mut w = watcher(&d, OnDrift::Rebalance);
        let mut ctl = FakeControl { listings: vec![vec![100]], ..Default::default() };
        let mut fake_clock = FakeClock(ctl.clock.clone());
        for i in 0..6 {
            let r = w.cycle(Duration::from_secs(i * 10), Some((&mut ctl, &mut fake_clock)));
            assert!(r.rebalances.is_empty(), "{:?}", r.rebalances);
            let inst = &r.instances[0];
            assert!(inst.refused && inst.sample.is_none(), "{inst:?}");
            assert!(inst.error.as_deref().unwrap().contains("is not believed"), "{inst:?}");
        }
        assert!(ctl.calls.is_empty(), "a refused process was touched: {:?}", ctl.calls);
    }

    /// What was sampled is acted on only while its PID still has the start time it had.
    #[test]
    fn a_pid_taken_by_another_process_since_the_sample_is_left_alone() {
        let d = host(16384, 5, "0-7");
        let mut w = watcher(&d, OnDrift::Rebalance);
        let s = w.cycle(Duration::ZERO, None).instances[0].sample.clone().unwrap();
        assert_eq!(still_the_sampled(d.path(), 100, &s), Ok(()));
        // PID 100 exited and a new process took the number (another start time).
        write(d.path(), "proc/100/stat", &stat(100, 1, 5).replace(" 500 ", " 900 "));
        assert_eq!(
            still_the_sampled(d.path(), 100, &s),
            Err("process `100` exited since it was sampled: left alone".into())
        );
        assert!(still_the_sampled(d.path(), 101, &s).unwrap_err().contains("not proven"));
    }

    /// Interrupts counted from `/proc/interrupts` between cycles: drift only for an instance
    /// whose interrupts pinctl keeps quiet, and only movable ones; the rate for every instance.
    #[test]
    fn movable_interrupts_on_a_quiet_instance_s_cpus_are_an_episode_of_their_own() {
        let d = host(0, 1, "0-1");
        let counts = |nic: u64, nvme: u64| {
            format!(
                "CPU0 CPU1 CPU2\n 35: {nic} 0 {nic}  PCI-MSI 1-edge  eth0-rxtx-0\n 27: {nvme} 0 0  PCI-MSI 2-edge  nvme0q1\n"
            )
        };
        let mut quiet = target(OnDrift::Alert);
        quiet.settings.quiet_interrupts = true;
        let mut other = target(OnDrift::Alert);
        other.instance = "other".into();
        let mut w = Watcher::new(
            d.path(),
            vec![quiet, other],
            Duration::from_secs(10),
            Watermark::default(),
        );
        let mut starts = Vec::new();
        for i in 0..4u64 {
            write(d.path(), "proc/interrupts", &counts(100 * i, 50 * i));
            let r = w.cycle(Duration::from_secs(i * 10), None);
            starts.extend(
                r.events
                    .iter()
                    .filter(|e| e.edge == Edge::Start)
                    .map(|e| (i, e.instance.clone(), e.kind)),
            );
            let db = &r.instances[0];
            if i == 0 {
                assert_eq!(db.interrupts_per_second, None, "one sample counts nothing");
            } else {
                // 100 on CPU 0 (of 0-1) in 10 s; the managed nvme0q1 does not count.
                assert_eq!(db.interrupts_per_second, Some(10.0));
                assert_eq!(r.instances[1].interrupts_per_second, Some(10.0));
                let f = &db.findings.iter().find(|(k, _)| *k == DriftKind::Interrupts).unwrap().1;
                assert_eq!(f.value, 10.0);
                assert!(f.detail.starts_with("100 movable interrupts in 10.0s on CPUs 0-1 (IRQ 35 eth0-rxtx-0: 100 on CPU 0)"), "{}", f.detail);
                assert!(
                    f.detail.ends_with("50 more from managed interrupts, which stay"),
                    "{}",
                    f.detail
                );
                assert!(
                    r.instances[1].findings.iter().all(|(k, _)| *k != DriftKind::Interrupts),
                    "not judged"
                );
            }
        }
        // Two samples spanning the 20 s hold after the first count: the third cycle.
        assert!(starts.contains(&(3, "db".to_string(), DriftKind::Interrupts)), "{starts:?}");
        assert!(!starts.iter().any(|(_, i, k)| i == "other" && *k == DriftKind::Interrupts));
        // Quiet again: the episode ends.
        let r = w.cycle(Duration::from_secs(40), None);
        let end = r.events.iter().find(|e| e.kind == DriftKind::Interrupts && e.edge == Edge::End);
        let end = end.unwrap_or_else(|| panic!("{:?}", r.events));
        // The end says what the quiet sample shows, not the last drifting rate.
        assert_eq!(end.value, 0.0);
        assert!(end.detail.starts_with("no movable interrupts on CPUs 0-1"), "{}", end.detail);
    }

    #[test]
    fn alert_commands_get_the_facts() {
        let e = DriftEvent {
            instance: "db-1".into(),
            service: "db".into(),
            kind: DriftKind::Locality,
            edge: Edge::Start,
            episode: 3,
            value: 0.5,
            threshold: 0.9,
            detail: "half".into(),
            alert: true,
            action: OnDrift::Alert,
            lasted_seconds: None,
            local_fraction: Some(0.5),
        };
        let env: BTreeMap<String, String> = e.alert_env().into_iter().collect();
        assert_eq!(env["PINCTL_INSTANCE"], "db-1");
        assert_eq!(env["PINCTL_DRIFT_KIND"], "locality");
        assert_eq!(env["PINCTL_DRIFT_EVENT"], "start");
        assert_eq!(env["PINCTL_EPISODE"], "3");
        assert_eq!(env["PINCTL_LOCAL_FRACTION"], "0.5000");
        assert_eq!(env["PINCTL_THRESHOLD"], "0.9");
    }

    #[test]
    fn a_vanished_instance_ends_its_episodes() {
        let d = host(16384, 1, "0-1");
        let mut w = watcher(&d, OnDrift::Alert);
        for i in 0..3 {
            w.cycle(Duration::from_secs(i * 10), None);
        }
        fs::remove_dir_all(d.path().join("proc/100")).unwrap();
        let r = w.cycle(Duration::from_secs(30), None);
        assert_eq!(r.events.len(), 1);
        assert_eq!((r.events[0].kind, r.events[0].edge), (DriftKind::Locality, Edge::End));
        assert!(
            r.instances[0].error.as_deref().unwrap().contains("not running"),
            "{:?}",
            r.instances[0].error
        );
    }

    #[test]
    fn rebalance_waits_for_drift_and_the_cooldown() {
        let s = DriftSettings { on_drift: OnDrift::Rebalance, ..DriftSettings::default() };
        let mut d = InstanceDrift::default();
        assert!(!rebalance_due(&s, &d, None, Duration::ZERO));
        let th = target(OnDrift::Rebalance).thresholds();
        let bad = Verdicts {
            cpu: Some(Finding { value: 1.0, threshold: 0.0, detail: String::new() }),
            ..Verdicts::default()
        };
        d.observe(Duration::ZERO, bad.clone(), &th);
        d.observe(Duration::from_secs(30), bad, &th);
        let t = Duration::from_secs(30);
        assert!(rebalance_due(&s, &d, None, t));
        assert!(!rebalance_due(&s, &d, Some(t - Duration::from_secs(10)), t));
        assert!(rebalance_due(&s, &d, Some(Duration::ZERO), t + s.rebalance_cooldown));
        let alert = DriftSettings { on_drift: OnDrift::Alert, ..s };
        assert!(!rebalance_due(&alert, &d, None, t));
    }
}
