//! The drift rules: pure functions of samples, the plan and the service's thresholds, and the
//! episode tracker that turns a sequence of verdicts into starts and ends with hysteresis,
//! counts and an alert cool-down. `now` is always passed in: nothing here reads a clock.

use std::time::Duration;

use pinctl_topology::{CpuSet, NodeId, NodeSet, Placement};
use serde::Serialize;

use crate::interrupts::IrqDeltas;
use crate::sample::{HostSample, InstanceSample, NodeMemory, NodeSample};

/// A service's thresholds (its `on-drift` keys).
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// Fraction of memory that must be on the planned nodes (`min-locality`).
    pub min_locality: f64,
    /// Instances with less memory than this are not judged on locality (`min-memory`).
    pub min_memory: u64,
    /// How long a condition must hold before an episode starts (`drift-hold`).
    pub hold: Duration,
    /// Least time between two alert commands of one kind (`alert-cooldown`).
    pub alert_cooldown: Duration,
}

/// The kinds of drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriftKind {
    /// Too little memory on the planned nodes.
    Locality,
    /// A thread allowed or running outside the planned CPUs.
    Cpu,
    /// Mappings whose memory policy is not the planned one.
    Policy,
    /// Free memory of a planned node under the watermark.
    NodePressure,
    /// Movable interrupts firing on the CPUs of an instance whose interrupts pinctl steers
    /// away (`steer-interrupts`, `interrupts = "quiet"`).
    Interrupts,
}

impl DriftKind {
    /// Every kind, in a fixed order.
    pub const ALL: [DriftKind; 5] = [
        DriftKind::Locality,
        DriftKind::Cpu,
        DriftKind::Policy,
        DriftKind::NodePressure,
        DriftKind::Interrupts,
    ];

    /// Its name in log lines, `PINCTL_DRIFT_KIND` and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            DriftKind::Locality => "locality",
            DriftKind::Cpu => "cpu",
            DriftKind::Policy => "policy",
            DriftKind::NodePressure => "node-pressure",
            DriftKind::Interrupts => "interrupts",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What a rule measured when it found drift.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The figure the rule looks at (a fraction, a count, bytes).
    pub value: f64,
    /// The threshold it is compared with.
    pub threshold: f64,
    /// The facts in a few words (`3 of 12 threads outside 0-7: 14 (allowed 0-15, ran on 9)`).
    pub detail: String,
}

impl Finding {
    fn at(value: f64, threshold: f64, detail: String) -> Finding {
        Finding { value, threshold, detail }
    }
}

/// Fraction of an instance's memory on `nodes`; `None` below `min_memory` bytes (too small
/// to judge) or with no memory at all.
pub fn local_fraction(memory: &NodeMemory, nodes: &NodeSet, min_memory: u64) -> Option<f64> {
    let total = memory.total();
    if total == 0 || total < min_memory {
        return None;
    }
    Some(memory.on(nodes) as f64 / total as f64)
}

/// Memory locality: drift when the fraction on the planned nodes is under `min-locality`.
pub fn locality_drift(s: &InstanceSample, planned: &Placement, t: &Thresholds) -> Option<Finding> {
    locality(s, planned, t).filter(|f| f.value < f.threshold)
}

/// The fraction of the instance's memory on its planned nodes against `min-locality`, with
/// where the rest is; `None` under `min-memory`.
fn locality(s: &InstanceSample, planned: &Placement, t: &Thresholds) -> Option<Finding> {
    let nodes = planned.memory_home();
    let fraction = local_fraction(&s.memory, nodes, t.min_memory)?;
    let remote: Vec<String> = s
        .memory
        .0
        .iter()
        .filter(|(n, b)| !nodes.contains(**n) && b.total() > 0)
        .map(|(n, b)| format!("node {n} {}", mib(b.total())))
        .collect();
    let mut detail =
        format!("{:.1}% of {} on node(s) {nodes}", fraction * 100.0, mib(s.memory.total()));
    if fraction < t.min_locality || !remote.is_empty() {
        detail.push_str(&format!("; elsewhere: {}", remote.join(", ")));
    }
    Some(Finding { value: fraction, threshold: t.min_locality, detail })
}

/// Bytes as the drift lines write them: `3.2MiB`.
pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1}MiB", bytes as f64 / f64::from(1 << 20))
}

/// A thread outside the planned CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadOutOfPlace {
    pub tid: u32,
    /// Its allowed CPUs, when they reach outside the plan.
    pub allowed_outside: Option<CpuSet>,
    /// The CPU it last ran on, when outside the plan.
    pub ran_outside: Option<u32>,
}

/// Threads allowed outside `cpus`, or running outside them.
pub fn threads_out_of_place(s: &InstanceSample, cpus: &CpuSet) -> Vec<ThreadOutOfPlace> {
    s.threads
        .iter()
        .filter_map(|t| {
            let allowed_outside = (!t.allowed.is_subset(cpus)).then(|| t.allowed.clone());
            // A thread confined to the plan cannot run outside it: a last CPU outside is
            // history from before a re-pin, until the thread runs again.
            let ran_outside = t
                .last_cpu
                .filter(|&c| !cpus.contains(c) && (t.running || allowed_outside.is_some()));
            (allowed_outside.is_some() || ran_outside.is_some()).then_some(ThreadOutOfPlace {
                tid: t.tid,
                allowed_outside,
                ran_outside,
            })
        })
        .collect()
}

/// CPU drift: any thread allowed or running outside the planned CPUs.
pub fn cpu_drift(s: &InstanceSample, planned: &Placement) -> Option<Finding> {
    let out = threads_out_of_place(s, &planned.cpus);
    let first = out.first()?;
    let mut what = Vec::new();
    if let Some(a) = &first.allowed_outside {
        what.push(format!("allowed {a}"));
    }
    if let Some(c) = first.ran_outside {
        what.push(format!("ran on {c}"));
    }
    Some(Finding {
        value: out.len() as f64,
        threshold: 0.0,
        detail: format!(
            "{} of {} threads outside CPUs {}: tid {} ({})",
            out.len(),
            s.threads.len(),
            planned.cpus,
            first.tid,
            what.join(", ")
        ),
    })
}

/// Policy drift: mappings whose policy is not the planned one (mappings without resident
/// memory are left out: a policy on an empty range places nothing). Samples without a
/// numa_maps walk have no policies and never drift.
pub fn policy_drift(s: &InstanceSample, planned: &Placement) -> Option<Finding> {
    let wrong: Vec<_> = s
        .policies
        .iter()
        .filter(|p| p.resident_bytes > 0)
        .filter(|p| {
            !p.parsed
                .as_ref()
                .is_some_and(|k| k.matches(planned.memory_policy, &planned.memory_nodes))
        })
        .collect();
    let first = wrong.first()?;
    let mappings: u64 = wrong.iter().map(|p| p.mappings).sum();
    let planned_text = if planned.memory_policy.takes_nodes() {
        format!("{}:{}", planned.memory_policy, planned.memory_nodes)
    } else {
        planned.memory_policy.to_string()
    };
    Some(Finding {
        value: mappings as f64,
        threshold: 0.0,
        detail: format!(
            "{mappings} mapping(s) not under {planned_text}: `{}` ({} mapping(s), {})",
            first.policy,
            first.mappings,
            mib(first.resident_bytes)
        ),
    })
}

/// Node pressure: a planned node whose free memory is under its watermark. `watermark` gives
/// the watermark of a node from its sample. The node with the least free memory is reported.
pub fn node_pressure(
    host: &HostSample,
    planned: &Placement,
    watermark: impl Fn(NodeId, &NodeSample) -> u64,
) -> Option<Finding> {
    least_free_node(host, planned, watermark, true)
}

/// The planned node with the least free memory (`under`: among those under their watermark),
/// against its watermark.
fn least_free_node(
    host: &HostSample,
    planned: &Placement,
    watermark: impl Fn(NodeId, &NodeSample) -> u64,
    under: bool,
) -> Option<Finding> {
    planned
        .memory_home()
        .iter()
        .filter_map(|n| host.nodes.get(&n).map(|s| (n, s, watermark(n, s))))
        .filter(|(_, s, w)| !under || s.free_bytes < *w)
        .min_by_key(|(_, s, _)| s.free_bytes)
        .map(|(n, s, w)| Finding {
            value: s.free_bytes as f64,
            threshold: w as f64,
            detail: format!(
                "node {n} has {} free, {} the watermark {}",
                mib(s.free_bytes),
                if s.free_bytes < w { "under" } else { "above" },
                mib(w)
            ),
        })
}

/// Interrupts on an instance's CPUs: drift when movable interrupts fired on `cpus` between
/// the last two samples. The figure is their rate (per second); managed interrupts (which
/// nothing can move) are named in the detail but do not count.
pub fn interrupt_drift(deltas: &IrqDeltas, cpus: &CpuSet) -> Option<Finding> {
    let on = deltas.on(cpus);
    if on.movable == 0 {
        return None;
    }
    let rate = on.movable as f64 / deltas.seconds.max(f64::MIN_POSITIVE);
    let top: Vec<String> = on
        .top
        .iter()
        .map(|(irq, name, cpu, n)| format!("IRQ {irq} {name}: {n} on CPU {cpu}"))
        .collect();
    let managed = if on.managed > 0 {
        format!("; {} more from managed interrupts, which stay", on.managed)
    } else {
        String::new()
    };
    Some(Finding {
        value: rate,
        threshold: 0.0,
        detail: format!(
            "{} movable interrupts in {:.1}s on CPUs {cpus} ({}){managed}",
            on.movable,
            deltas.seconds,
            top.join("; ")
        ),
    })
}

/// Start or end of a drift episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Edge {
    Start,
    End,
}

/// What the tracker decided on one observation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    pub edge: Edge,
    /// The episode's number for this instance and kind, from 1.
    pub episode: u64,
    /// For a start, the finding that started it; for an end, what the sample that ended it
    /// shows (the value at the end), or the last finding when the instance is gone.
    pub finding: Finding,
    /// How long the episode lasted (ends only).
    #[serde(skip)]
    pub lasted: Option<Duration>,
    /// Whether the alert command runs (starts only, outside the cool-down).
    pub alert: bool,
}

/// One instance's episodes of one kind of drift.
///
/// An episode starts when the condition is seen in at least two consecutive samples spanning
/// at least `hold` (so one sample never triggers, whatever `hold` is), and ends at the first
/// sample without it. Each start may run the alert command once, unless the previous alert of
/// this kind was less than `cooldown` ago.
#[derive(Debug, Clone, Default)]
pub struct EpisodeTracker {
    /// When the condition was first seen in the current unbroken run of samples.
    since: Option<Duration>,
    active: Option<(Duration, Finding)>,
    episodes: u64,
    last_alert: Option<Duration>,
}

impl EpisodeTracker {
    /// Feeds one sample's verdict (`None`: no drift seen). `at_end` is what the sample shows
    /// of this kind when it does not drift (the locality now, no thread out of place): an
    /// episode's end reports it, so the end line never repeats the drifting value. Without it
    /// (the instance is gone) the end reports the last finding, said to be the last seen.
    pub fn observe(
        &mut self,
        now: Duration,
        finding: Option<Finding>,
        at_end: Option<Finding>,
        hold: Duration,
        cooldown: Duration,
    ) -> Option<Transition> {
        let Some(finding) = finding else {
            self.since = None;
            let (started, last) = self.active.take()?;
            let finding = at_end.unwrap_or_else(|| Finding {
                detail: format!("not sampled any more; last seen: {}", last.detail),
                ..last
            });
            return Some(Transition {
                edge: Edge::End,
                episode: self.episodes,
                finding,
                lasted: Some(now.saturating_sub(started)),
                alert: false,
            });
        };
        if let Some((_, last)) = &mut self.active {
            *last = finding;
            return None;
        }
        let since = *self.since.get_or_insert(now);
        if now == since || now - since < hold {
            return None;
        }
        self.episodes += 1;
        let alert = self.last_alert.is_none_or(|t| now.saturating_sub(t) >= cooldown);
        if alert {
            self.last_alert = Some(now);
        }
        self.active = Some((now, finding.clone()));
        Some(Transition { edge: Edge::Start, episode: self.episodes, finding, lasted: None, alert })
    }

    /// Whether an episode is going on.
    pub fn is_active(&self) -> bool {
        self.active.is_some()
    }

    /// Episodes started so far.
    pub fn episodes(&self) -> u64 {
        self.episodes
    }
}

/// The trackers of one instance, one per kind.
#[derive(Debug, Clone, Default)]
pub struct InstanceDrift {
    trackers: [EpisodeTracker; 5],
}

/// The verdicts of every rule on one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdicts {
    pub locality: Option<Finding>,
    pub cpu: Option<Finding>,
    pub policy: Option<Finding>,
    pub node_pressure: Option<Finding>,
    /// Judged apart from the sample ([`interrupt_drift`]): set by the watcher.
    pub interrupts: Option<Finding>,
    /// Of each kind with an episode going on that does not drift in this sample, what it
    /// shows instead (the episode's end reports it): [`Verdicts::of`] fills them, the watcher
    /// the interrupts'. Not made for the kinds with nothing to end (most, most cycles).
    pub at_end: Vec<(DriftKind, Finding)>,
}

impl Verdicts {
    /// Runs every rule on a sample. `ending` tells the kinds with an episode going on, whose
    /// value now an end would report.
    pub fn of(
        s: &InstanceSample,
        host: &HostSample,
        planned: &Placement,
        t: &Thresholds,
        watermark: impl Fn(NodeId, &NodeSample) -> u64,
        ending: impl Fn(DriftKind) -> bool,
    ) -> Verdicts {
        let mut v = Verdicts {
            locality: None,
            cpu: cpu_drift(s, planned),
            policy: policy_drift(s, planned),
            node_pressure: node_pressure(host, planned, &watermark),
            interrupts: None,
            at_end: Vec::new(),
        };
        match locality(s, planned, t) {
            Some(f) if f.value < f.threshold => v.locality = Some(f),
            Some(f) if ending(DriftKind::Locality) => v.at_end.push((DriftKind::Locality, f)),
            _ => {}
        }
        if v.cpu.is_none() && ending(DriftKind::Cpu) {
            let detail = format!("every thread on CPUs {}", planned.cpus);
            v.at_end.push((DriftKind::Cpu, Finding::at(0.0, 0.0, detail)));
        }
        if v.policy.is_none() && ending(DriftKind::Policy) {
            let detail = "no mapping with memory under another policy".to_string();
            v.at_end.push((DriftKind::Policy, Finding::at(0.0, 0.0, detail)));
        }
        if v.node_pressure.is_none() && ending(DriftKind::NodePressure) {
            if let Some(f) = least_free_node(host, planned, &watermark, false) {
                v.at_end.push((DriftKind::NodePressure, f));
            }
        }
        v
    }

    /// Judges interrupts ([`interrupt_drift`]) on `cpus` from the last two samples' counts;
    /// `ending`: an interrupts episode is going on.
    pub fn judge_interrupts(&mut self, deltas: &IrqDeltas, cpus: &CpuSet, ending: bool) {
        self.interrupts = interrupt_drift(deltas, cpus);
        if self.interrupts.is_none() && ending {
            let detail = format!("no movable interrupts on CPUs {cpus} in {:.1}s", deltas.seconds);
            self.at_end.push((DriftKind::Interrupts, Finding::at(0.0, 0.0, detail)));
        }
    }

    fn take_at_end(&mut self, kind: DriftKind) -> Option<Finding> {
        let i = self.at_end.iter().position(|(k, _)| *k == kind)?;
        Some(self.at_end.swap_remove(i).1)
    }

    fn take(&mut self, kind: DriftKind) -> Option<Finding> {
        match kind {
            DriftKind::Locality => self.locality.take(),
            DriftKind::Cpu => self.cpu.take(),
            DriftKind::Policy => self.policy.take(),
            DriftKind::NodePressure => self.node_pressure.take(),
            DriftKind::Interrupts => self.interrupts.take(),
        }
    }
}

impl InstanceDrift {
    /// Feeds one sample's verdicts; returns the episodes that started or ended.
    pub fn observe(
        &mut self,
        now: Duration,
        mut verdicts: Verdicts,
        t: &Thresholds,
    ) -> Vec<(DriftKind, Transition)> {
        DriftKind::ALL
            .iter()
            .filter_map(|&k| {
                let f = verdicts.take(k);
                let at_end = verdicts.take_at_end(k);
                self.trackers[k.index()]
                    .observe(now, f, at_end, t.hold, t.alert_cooldown)
                    .map(|tr| (k, tr))
            })
            .collect()
    }

    /// The tracker of one kind.
    pub fn tracker(&self, kind: DriftKind) -> &EpisodeTracker {
        &self.trackers[kind.index()]
    }

    /// Ends every episode (the instance is gone): the ends to report.
    pub fn vanish(&mut self, now: Duration, t: &Thresholds) -> Vec<(DriftKind, Transition)> {
        self.observe(now, Verdicts::default(), t)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sample::KernelPolicy;
    use crate::sample::{MemorySource, NodeBytes, PolicyUse, ThreadSample};
    use pinctl_topology::MemoryPolicy;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn thresholds() -> Thresholds {
        Thresholds {
            min_locality: 0.9,
            min_memory: 1 << 20,
            hold: secs(30),
            alert_cooldown: secs(600),
        }
    }

    pub(crate) fn planned() -> Placement {
        Placement {
            cpus: "0-3".parse().unwrap(),
            nodes: "0".parse().unwrap(),
            memory_policy: MemoryPolicy::Bind,
            memory_nodes: "0".parse().unwrap(),
        }
    }

    fn sample(at: u64, local_mib: u64, remote_mib: u64) -> InstanceSample {
        let mut memory = NodeMemory::default();
        memory.0.insert(0, NodeBytes { anon: local_mib << 20, ..Default::default() });
        memory.0.insert(1, NodeBytes { file: remote_mib << 20, ..Default::default() });
        InstanceSample {
            at: secs(at),
            pids: vec![10],
            start_times: [(10, 500)].into(),
            refused: Vec::new(),
            cgroup: None,
            memory,
            source: MemorySource::Cgroup,
            threads: vec![ThreadSample {
                tid: 10,
                allowed: "0-3".parse().unwrap(),
                last_cpu: Some(1),
                running: true,
            }],
            policies: Vec::new(),
            cost: Duration::ZERO,
        }
    }

    fn run(
        tracker: &mut EpisodeTracker,
        seq: &[(u64, bool)],
        t: &Thresholds,
    ) -> Vec<(u64, Edge, u64, bool)> {
        seq.iter()
            .filter_map(|&(at, bad)| {
                let f = bad.then(|| Finding { value: 0.5, threshold: 0.9, detail: String::new() });
                tracker
                    .observe(secs(at), f, None, t.hold, t.alert_cooldown)
                    .map(|tr| (at, tr.edge, tr.episode, tr.alert))
            })
            .collect()
    }

    #[test]
    fn locality_fraction_and_minimum_size() {
        let t = thresholds();
        let f = locality_drift(&sample(0, 70, 30), &planned(), &t).unwrap();
        assert!((f.value - 0.7).abs() < 1e-9);
        assert!(f.detail.contains("node 1 30.0MiB"), "{}", f.detail);
        assert_eq!(locality_drift(&sample(0, 95, 5), &planned(), &t), None);
        // Exactly at the threshold is not drift.
        assert_eq!(locality_drift(&sample(0, 90, 10), &planned(), &t), None);
        // Under min-memory: not judged at all.
        let mut small = sample(0, 0, 0);
        small.memory.0.get_mut(&1).unwrap().anon = 1000;
        assert_eq!(local_fraction(&small.memory, &"0".parse().unwrap(), 1 << 20), None);
        assert_eq!(locality_drift(&small, &planned(), &t), None);
        // A policy without nodes is judged against the CPUs' nodes.
        let mut p = planned();
        p.memory_policy = MemoryPolicy::Local;
        p.memory_nodes = NodeSet::new();
        assert!(locality_drift(&sample(0, 10, 90), &p, &t).is_some());
    }

    #[test]
    fn one_sample_never_starts_an_episode() {
        let t = Thresholds { hold: Duration::ZERO, ..thresholds() };
        let mut tr = EpisodeTracker::default();
        assert_eq!(run(&mut tr, &[(0, true), (10, false), (20, true)], &t), vec![]);
        assert_eq!(run(&mut tr, &[(30, true)], &t), vec![(30, Edge::Start, 1, true)]);
    }

    #[test]
    fn hold_hysteresis_end_and_counts() {
        let t = thresholds();
        let mut tr = EpisodeTracker::default();
        let got = run(
            &mut tr,
            &[(0, true), (10, true), (20, true), (30, true), (40, true), (50, false), (60, false)],
            &t,
        );
        assert_eq!(got, vec![(30, Edge::Start, 1, true), (50, Edge::End, 1, false)]);
        assert_eq!(tr.episodes(), 1);
        assert!(!tr.is_active());
        // A flapping condition never reaches the hold.
        let got =
            run(&mut tr, &[(70, true), (90, true), (95, false), (100, true), (120, true)], &t);
        assert_eq!(got, vec![]);
        assert_eq!(tr.episodes(), 1);
    }

    #[test]
    fn one_alert_per_episode_and_a_cooldown_between_them() {
        let t = Thresholds { hold: secs(10), alert_cooldown: secs(100), ..thresholds() };
        let mut tr = EpisodeTracker::default();
        let seq = [
            (0, true),
            (10, true),
            (20, true),
            (30, true),
            (40, false), // episode 1, alerted
            (50, true),
            (60, true),
            (70, false), // episode 2 in cool-down
            (200, true),
            (210, true),
            (220, true), // episode 3, alerted
        ];
        let got = run(&mut tr, &seq, &t);
        assert_eq!(
            got,
            vec![
                (10, Edge::Start, 1, true),
                (40, Edge::End, 1, false),
                (60, Edge::Start, 2, false),
                (70, Edge::End, 2, false),
                (210, Edge::Start, 3, true),
            ]
        );
        assert_eq!(tr.episodes(), 3);
    }

    #[test]
    fn end_reports_the_value_at_the_end_and_duration() {
        let t = Thresholds { hold: secs(5), ..thresholds() };
        let f = |v| Some(Finding { value: v, threshold: 0.9, detail: format!("{v}") });
        let episode = |tr: &mut EpisodeTracker| {
            assert!(tr.observe(secs(0), f(0.5), None, t.hold, t.alert_cooldown).is_none());
            assert!(tr.observe(secs(5), f(0.6), None, t.hold, t.alert_cooldown).is_some());
            assert!(tr.observe(secs(9), f(0.8), None, t.hold, t.alert_cooldown).is_none());
        };
        // Ended by a sample in place: its value, not the last drifting one.
        let mut tr = EpisodeTracker::default();
        episode(&mut tr);
        let end = tr.observe(secs(12), None, f(0.95), t.hold, t.alert_cooldown).unwrap();
        assert_eq!((end.edge, end.finding.value, end.lasted), (Edge::End, 0.95, Some(secs(7))));
        assert_eq!(end.finding.detail, "0.95");
        // Ended because the instance is gone: the last finding, said to be the last seen.
        let mut tr = EpisodeTracker::default();
        episode(&mut tr);
        let end = tr.observe(secs(12), None, None, t.hold, t.alert_cooldown).unwrap();
        assert_eq!(
            (end.finding.value, end.finding.detail.as_str()),
            (0.8, "not sampled any more; last seen: 0.8")
        );
    }

    #[test]
    fn threads_allowed_or_running_outside() {
        let mut s = sample(0, 1, 0);
        s.threads = vec![
            ThreadSample {
                tid: 1,
                allowed: "0-3".parse().unwrap(),
                last_cpu: Some(2),
                running: true,
            },
            ThreadSample {
                tid: 2,
                allowed: "0-7".parse().unwrap(),
                last_cpu: Some(2),
                running: true,
            },
            ThreadSample {
                tid: 3,
                allowed: "0-3".parse().unwrap(),
                last_cpu: Some(6),
                running: true,
            },
        ];
        let out = threads_out_of_place(&s, &planned().cpus);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].allowed_outside.as_ref().unwrap().to_string(), "0-7");
        assert_eq!(out[1].ran_outside, Some(6));
        let f = cpu_drift(&s, &planned()).unwrap();
        assert_eq!(f.value, 2.0);
        assert_eq!(f.detail, "2 of 3 threads outside CPUs 0-3: tid 2 (allowed 0-7)");
        s.threads.truncate(1);
        assert_eq!(cpu_drift(&s, &planned()), None);
        // Asleep since before a re-pin: its last CPU is history, not drift.
        s.threads = vec![ThreadSample {
            tid: 4,
            allowed: "0-3".parse().unwrap(),
            last_cpu: Some(6),
            running: false,
        }];
        assert_eq!(cpu_drift(&s, &planned()), None);
    }

    #[test]
    fn policy_mismatch_counts_resident_mappings() {
        let mut s = sample(0, 1, 0);
        let use_of = |p: &str, mappings, resident_bytes| PolicyUse {
            policy: p.to_string(),
            parsed: KernelPolicy::parse(p).ok(),
            mappings,
            resident_bytes,
        };
        s.policies = vec![use_of("bind=static:0", 10, 1 << 20), use_of("default", 3, 0)];
        assert_eq!(policy_drift(&s, &planned()), None);
        s.policies.push(use_of("interleave:0-1", 2, 4096));
        s.policies.push(use_of("mystery:0", 1, 4096));
        let f = policy_drift(&s, &planned()).unwrap();
        assert_eq!(f.value, 3.0);
        assert!(
            f.detail.starts_with("3 mapping(s) not under bind:0: `interleave:0-1`"),
            "{}",
            f.detail
        );
    }

    #[test]
    fn node_pressure_reports_the_fullest_planned_node() {
        let mut host = HostSample::default();
        for (n, free) in [(0, 100u64 << 20), (1, 10 << 20), (2, 1 << 20)] {
            host.nodes.insert(
                n,
                NodeSample { total_bytes: 1 << 30, free_bytes: free, ..Default::default() },
            );
        }
        let mut p = planned();
        p.memory_nodes = "0-1".parse().unwrap();
        let f = node_pressure(&host, &p, |_, _| 64 << 20).unwrap();
        assert_eq!((f.value, f.threshold), ((10u64 << 20) as f64, (64u64 << 20) as f64));
        assert!(f.detail.starts_with("node 1 has 10.0MiB free"));
        assert_eq!(node_pressure(&host, &p, |_, _| 5 << 20), None);
    }

    #[test]
    fn instance_trackers_are_independent_and_vanishing_ends_them() {
        let t = Thresholds { hold: secs(10), ..thresholds() };
        let host = HostSample::default();
        let mut d = InstanceDrift::default();
        let mut bad = sample(0, 10, 90);
        bad.threads[0].last_cpu = Some(7);
        for at in [0, 10] {
            bad.at = secs(at);
            let v = Verdicts::of(&bad, &host, &planned(), &t, |_, _| 0, |_| false);
            let got = d.observe(secs(at), v, &t);
            if at == 10 {
                let kinds: Vec<_> = got.iter().map(|(k, tr)| (*k, tr.edge)).collect();
                assert_eq!(
                    kinds,
                    vec![(DriftKind::Locality, Edge::Start), (DriftKind::Cpu, Edge::Start)]
                );
            }
        }
        assert!(d.tracker(DriftKind::Cpu).is_active());
        assert!(!d.tracker(DriftKind::Policy).is_active());
        let ends = d.vanish(secs(20), &t);
        assert_eq!(ends.len(), 2);
        assert!(ends.iter().all(|(_, tr)| tr.edge == Edge::End));
    }
}
