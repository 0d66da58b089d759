//! The drift watcher of `pinctl run`. The supervisor tells it of its instances (PID, cgroup,
//! placement) after every change and hands it a reload's settings with the reload; the watcher
//! samples them on a thread of its own every `watch-interval`, with the loop, rules, log lines,
//! alerts and rebalancing of `pinctl watch`, so a slow sample or a rebalance never holds up
//! the supervisor. What it last found of each instance is kept for `pinctl status`.
//!
//! It knows nothing of the supervisor: the binary turns the supervisor's notices into
//! [`SupervisedInstance`]s (and this crate does not depend on pinctl-supervise, nor it on this).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::DriftKind;
use crate::metrics::Metrics;
use crate::read::{Locator, Supervised};
use crate::rebalance::{LinuxControl, MonotonicClock};
use crate::watch::{InstanceReport, Target, Watcher};
use crate::watch_loop::{Said, Sink, WatchLoop, WatchSettings};
use pinctl_topology::Placement;

/// One instance as the supervisor knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisedInstance {
    pub name: String,
    pub service: String,
    /// The main process; `None` while it is not running.
    pub pid: Option<u32>,
    /// Its own cgroup v2 path, when it has one.
    pub cgroup: Option<String>,
    pub planned: Placement,
    /// Automatic restarts so far.
    pub restarts: u32,
}

/// What the watcher last found of an instance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LastSample {
    /// Share of its memory on its planned nodes; `None` under `min-memory` or unsampled.
    pub local_fraction: Option<f64>,
    /// Why a sampled instance's locality is not judged (under `min-memory`).
    pub locality_not_judged: Option<String>,
    /// Kinds with an episode going on.
    pub drifting: Vec<DriftKind>,
    /// Threads allowed or running outside the planned CPUs.
    pub threads_out_of_place: usize,
    /// Why the sample failed, when it did.
    pub error: Option<String>,
    /// The process it was taken of: a sample of an earlier process of the instance (before
    /// a restart) is not what the instance is now.
    pub pid: Option<u32>,
}

impl LastSample {
    fn of(i: &InstanceReport, pid: Option<u32>) -> LastSample {
        LastSample {
            pid,
            local_fraction: i.local_fraction,
            locality_not_judged: i.locality_not_judged.clone(),
            drifting: i.drifting.clone(),
            threads_out_of_place: i.threads_out_of_place,
            error: i.error.clone(),
        }
    }
}

/// What the supervisor's side and the watcher's thread share.
#[derive(Debug, Default)]
struct Shared {
    /// The supervisor's instances, as last told.
    instances: Mutex<Vec<SupervisedInstance>>,
    /// A reload's settings, until the thread takes them up.
    reloaded: Mutex<Option<WatchSettings>>,
    /// Each instance's last sample.
    last: Mutex<BTreeMap<String, LastSample>>,
}

/// What the thread starts from, taken when the first instances are known.
struct Start {
    settings: WatchSettings,
    metrics: Metrics,
    sink: Box<dyn Sink + Send>,
}

/// The watcher of `pinctl run` (see the module documentation).
pub struct SupervisedWatch {
    shared: Arc<Shared>,
    start: Option<Start>,
}

impl std::fmt::Debug for SupervisedWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisedWatch").field("shared", &self.shared).finish_non_exhaustive()
    }
}

impl SupervisedWatch {
    /// A watcher with the file's settings, its metrics, and where its lines go. Nothing is
    /// sampled until it is told of instances.
    pub fn new(settings: WatchSettings, metrics: Metrics, sink: Box<dyn Sink + Send>) -> Self {
        SupervisedWatch { shared: Arc::default(), start: Some(Start { settings, metrics, sink }) }
    }

    /// The supervisor's instances now; the first call starts the watcher's thread. `Err`: no
    /// thread could be started (nothing is watched).
    pub fn instances(&mut self, instances: Vec<SupervisedInstance>) -> std::io::Result<()> {
        if let Ok(mut latest) = self.shared.instances.lock() {
            *latest = instances;
        }
        let Some(start) = self.start.take() else { return Ok(()) };
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("pinctl-watch".into())
            .spawn(move || watch(shared, start))
            .map(drop)
    }

    /// A reload's settings, taken up at the next cycle.
    pub fn reloaded(&self, settings: WatchSettings) {
        if let Ok(mut pending) = self.shared.reloaded.lock() {
            *pending = Some(settings);
        }
    }

    /// What the watcher last found of `instance`.
    /// `None` until it has sampled the process the instance runs now (after a restart,
    /// the last sample was of the old one: `status` shows one truth per instance).
    pub fn last_sample(&self, instance: &str) -> Option<LastSample> {
        let pid = self.shared.instances.lock().ok()?.iter().find(|i| i.name == instance)?.pid;
        self.shared.last.lock().ok()?.get(instance).filter(|s| s.pid == pid).cloned()
    }
}

/// A watch target for a supervised instance: its placement from the supervisor, its drift
/// settings from the file.
fn target(i: &SupervisedInstance, settings: &WatchSettings) -> Target {
    Target {
        instance: i.name.clone(),
        service: i.service.clone(),
        planned: i.planned.clone(),
        settings: settings.watch.drift(&i.service),
        locator: Locator {
            supervised: Some(Supervised { pid: i.pid, cgroup: i.cgroup.clone() }),
            ..Locator::default()
        },
    }
}

/// The thread: the watch loop over whatever the supervisor last told.
fn watch(shared: Arc<Shared>, start: Start) {
    let Start { mut settings, metrics, sink } = start;
    let watcher =
        Watcher::new(Path::new("/"), Vec::new(), settings.watch.interval, settings.watermark);
    let control = Box::new(LinuxControl::live());
    let mut watching = WatchLoop::new(watcher, metrics, control, MonotonicClock::default(), sink);
    let count = shared.instances.lock().map_or(0, |i| i.len());
    let interval = settings.watch.interval;
    watching.say(Said::Watching { instances: count, interval });
    loop {
        if let Some(reloaded) = shared.reloaded.lock().ok().and_then(|mut r| r.take()) {
            watching.reload(&reloaded);
            settings = reloaded;
        }
        let now: Vec<SupervisedInstance> =
            shared.instances.lock().map(|l| l.clone()).unwrap_or_default();
        let targets: Vec<Target> = now.iter().map(|i| target(i, &settings)).collect();
        for t in &targets {
            let old = watching.watcher.targets.iter().find(|o| o.instance == t.instance);
            if old.is_some_and(|o| o.locator != t.locator) {
                watching.watcher.forget(&t.instance);
            }
        }
        watching.watcher.targets = targets;
        watching.metrics.set_restarts(now.iter().map(|i| (i.name.as_str(), i.restarts)));
        let report = watching.cycle();
        if let Ok(mut last) = shared.last.lock() {
            let pid_of = |name: &str| now.iter().find(|n| n.name == name).and_then(|n| n.pid);
            *last = report
                .instances
                .iter()
                .map(|i| (i.instance.clone(), LastSample::of(i, pid_of(&i.instance))))
                .collect();
        }
        watching.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(pid: Option<u32>) -> SupervisedInstance {
        SupervisedInstance {
            name: "db-0".into(),
            service: "db".into(),
            pid,
            cgroup: None,
            planned: crate::rules::tests::planned(),
            restarts: 0,
        }
    }

    #[test]
    fn a_sample_of_the_process_before_a_restart_is_not_shown_as_the_instance_now() {
        let watch = SupervisedWatch { shared: Arc::default(), start: None };
        let sampled = LastSample { pid: Some(100), threads_out_of_place: 3, ..Default::default() };
        watch.shared.last.lock().unwrap().insert("db-0".into(), sampled.clone());
        *watch.shared.instances.lock().unwrap() = vec![running(Some(100))];
        assert_eq!(watch.last_sample("db-0"), Some(sampled));
        // Restarted: a new process, not sampled yet.
        *watch.shared.instances.lock().unwrap() = vec![running(Some(200))];
        assert_eq!(watch.last_sample("db-0"), None);
        *watch.shared.instances.lock().unwrap() = vec![running(None)];
        assert_eq!(watch.last_sample("db-0"), None);
    }
}
