//! The drift watcher of `pinctl run`, an observer of the supervisor (as pinctl-irq's steering
//! is). The supervisor tells it of its instances (PID, cgroup, placement) after every change
//! and hands it a reload's file with the reload; the watcher samples them on a thread of its
//! own every `watch-interval`, with the loop, rules, log lines, alerts and rebalancing of
//! `pinctl watch`, so a slow sample or a rebalance never holds up the supervisor. What it last
//! found of each instance answers `pinctl status`. The metrics socket is bound when the
//! watcher is made (a taken port refuses `pinctl run` at once) and served on the supervisor's
//! runtime from its first notice. When the supervisor stops (or detaches) it drops its
//! observer, and the thread is stopped and joined: nothing of the watcher outlives `run`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use pinctl_supervise::observe::{Observed, Observer};
use pinctl_supervise::protocol::DriftState;

use crate::metrics::{BindError, Listening, Metrics, MetricsServer};
use crate::read::{Locator, Supervised};
use crate::rebalance::{LinuxControl, MonotonicClock};
use crate::watch::{InstanceReport, Target, Watcher};
use crate::watch_loop::{Said, Sink, WatchLoop, WatchSettings};

/// Where the watcher's lines go, shared by its thread and the supervisor's side (which says
/// where metrics are served, or why they are not).
#[derive(Clone)]
struct Lines(Arc<Mutex<Box<dyn Sink + Send>>>);

impl Sink for Lines {
    fn say(&mut self, said: Said<'_>) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).say(said);
    }
}

/// An instance's drift as `pinctl status` shows it.
fn drift_state(i: &InstanceReport) -> DriftState {
    DriftState {
        local_fraction: i.local_fraction,
        locality_not_judged: i.locality_not_judged.clone(),
        drifting: i.drifting.iter().map(|k| k.name().to_string()).collect(),
        threads_out_of_place: i.threads_out_of_place,
        error: i.error.clone(),
    }
}

/// What the watcher last found of an instance, and of which process: a sample of an earlier
/// process of the instance (before a restart) is not what the instance is now.
#[derive(Debug, Clone, PartialEq)]
struct Sampled {
    pid: Option<u32>,
    drift: DriftState,
}

/// What the supervisor's side and the watcher's thread share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the thread's wait between cycles when it is to stop.
    wake: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The supervisor's instances, as last told.
    instances: Vec<Observed>,
    /// A reload's settings, until the thread takes them up.
    reloaded: Option<WatchSettings>,
    /// Each instance's last sample.
    last: BTreeMap<String, Sampled>,
    /// The supervisor stopped: the thread ends at its next wait.
    stop: bool,
}

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits `d`, or less when told to stop; whether to stop.
    fn stopped_within(&self, d: Duration) -> bool {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (st, _) = self
            .wake
            .wait_timeout_while(st, d, |s| !s.stop)
            .unwrap_or_else(PoisonError::into_inner);
        st.stop
    }
}

/// What the thread starts from, taken when the first instances are known.
struct Start {
    settings: WatchSettings,
    metrics: Metrics,
}

/// The watcher of `pinctl run` (see the module documentation).
pub struct SupervisedWatch {
    shared: Arc<Shared>,
    start: Option<Start>,
    thread: Option<JoinHandle<()>>,
    lines: Lines,
    /// The metrics socket, until the supervisor's runtime serves it.
    listening: Option<Listening>,
    server: MetricsServer,
    /// Where metrics are served: a reload cannot move the socket, so a new `metrics-listen`
    /// is said to need a restart.
    metrics_listen: Option<SocketAddr>,
}

impl std::fmt::Debug for SupervisedWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupervisedWatch").field("shared", &self.shared).finish_non_exhaustive()
    }
}

impl SupervisedWatch {
    /// A watcher with the file's settings, its lines said through `sink`; binds
    /// `metrics-listen` when set (`Err`: it cannot be bound). Nothing is sampled until the
    /// supervisor tells its instances.
    pub fn new(
        config: &pinctl_config::Config,
        sink: Box<dyn Sink + Send>,
    ) -> Result<SupervisedWatch, BindError> {
        let settings = WatchSettings::of(config);
        let mut lines = Lines(Arc::new(Mutex::new(sink)));
        let metrics_listen = settings.watch.metrics_listen;
        let listening = metrics_listen.map(Listening::bind).transpose()?;
        if let Some(l) = &listening {
            lines.say(Said::Metrics { listen: l.addr });
        }
        let metrics = Metrics::new();
        Ok(SupervisedWatch {
            shared: Arc::default(),
            server: metrics.server(),
            start: Some(Start { settings, metrics }),
            thread: None,
            lines,
            listening,
            metrics_listen,
        })
    }

    /// What the watcher last found of `instance`.
    /// `None` until it has sampled the process the instance runs now (after a restart,
    /// the last sample was of the old one: `status` shows one truth per instance).
    fn last_sample(&self, instance: &str) -> Option<DriftState> {
        self.shared.with(|st| {
            let pid = st.instances.iter().find(|i| i.name == instance)?.pid;
            st.last.get(instance).filter(|s| s.pid == pid).map(|s| s.drift.clone())
        })
    }

    /// Starts the thread (and serves metrics, on the supervisor's runtime) once.
    fn start(&mut self) {
        let Some(start) = self.start.take() else { return };
        let served = self.listening.take().map(|l| l.serve(self.server.clone()));
        if let Some(Err(e)) = served {
            self.lines.say(Said::MetricsError(format!("cannot serve metrics: {e}")));
        }
        let (shared, lines) = (self.shared.clone(), self.lines.clone());
        match std::thread::Builder::new()
            .name("pinctl-watch".into())
            .spawn(move || watch(&shared, start, lines))
        {
            Ok(thread) => self.thread = Some(thread),
            Err(e) => {
                self.lines.say(Said::WatchError(format!("cannot start the watcher's thread: {e}")))
            }
        }
    }
}

impl Observer for SupervisedWatch {
    fn instances(&mut self, instances: &[Observed]) {
        self.shared.with(|st| st.instances = instances.to_vec());
        self.start();
    }

    fn drift(&self, instance: &str) -> Option<DriftState> {
        self.last_sample(instance)
    }

    fn reloaded(&mut self, file: &pinctl_launch::ServiceFile) -> Vec<String> {
        let settings = WatchSettings::of(&file.config);
        let mut not_applied = Vec::new();
        if settings.watch.metrics_listen != self.metrics_listen {
            let to = |a: Option<SocketAddr>| a.map_or("off".into(), |a| a.to_string());
            not_applied.push(format!(
                "metrics-listen changed from {} to {}: the metrics socket moves when pinctl run \
                 is restarted; every other watch key is taken up now",
                to(self.metrics_listen),
                to(settings.watch.metrics_listen)
            ));
        }
        self.shared.with(|st| st.reloaded = Some(settings));
        not_applied
    }
}

impl Drop for SupervisedWatch {
    /// The supervisor stopped: the thread ends at its next wait, and is waited for (a cycle
    /// under way, a rebalance say, ends first within its own budget).
    fn drop(&mut self) {
        self.shared.with(|st| st.stop = true);
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A watch target for a supervised instance: its placement from the supervisor, its drift
/// settings from the file.
fn target(i: &Observed, settings: &WatchSettings) -> Target {
    Target {
        instance: i.name.clone(),
        service: i.service.clone(),
        planned: i.placement.clone(),
        settings: settings.watch.drift(&i.service),
        locator: Locator {
            supervised: Some(Supervised { pid: i.pid, cgroup: i.cgroup.clone() }),
            ..Locator::default()
        },
    }
}

/// The thread: the watch loop over whatever the supervisor last told, until it stops.
fn watch(shared: &Shared, start: Start, lines: Lines) {
    let Start { mut settings, metrics } = start;
    let watcher =
        Watcher::new(Path::new("/"), Vec::new(), settings.watch.interval, settings.watermark);
    let control = Box::new(LinuxControl::live());
    let sink = Box::new(lines);
    let mut watching = WatchLoop::new(watcher, metrics, control, MonotonicClock::default(), sink);
    let count = shared.with(|st| st.instances.len());
    watching.say(Said::Watching { instances: count, interval: settings.watch.interval });
    loop {
        let (now, reloaded) = shared.with(|st| (st.instances.clone(), st.reloaded.take()));
        if let Some(reloaded) = reloaded {
            watching.reload(&reloaded);
            settings = reloaded;
        }
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
        let pid_of = |name: &str| now.iter().find(|n| n.name == name).and_then(|n| n.pid);
        let last = report
            .instances
            .iter()
            .map(|i| {
                (i.instance.clone(), Sampled { pid: pid_of(&i.instance), drift: drift_state(i) })
            })
            .collect();
        shared.with(|st| st.last = last);
        if shared.stopped_within(watching.until_next()) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(pid: Option<u32>) -> Observed {
        Observed {
            name: "db-0".into(),
            service: "db".into(),
            pid,
            cgroup: None,
            placement: crate::rules::tests::planned(),
            restarts: 0,
        }
    }

    /// Says nothing.
    struct Quiet;

    impl Sink for Quiet {
        fn say(&mut self, _: Said<'_>) {}
    }

    fn unbound() -> SupervisedWatch {
        let host = pinctl_config::HostConfig::default();
        let mut config = pinctl_config::Config::new("pinctl.toml", host, Vec::new());
        config.watch.interval = Duration::from_secs(3600);
        SupervisedWatch::new(&config, Box::new(Quiet)).unwrap()
    }

    #[test]
    fn a_sample_of_the_process_before_a_restart_is_not_shown_as_the_instance_now() {
        let mut watch = unbound();
        watch.start = None;
        let drift = DriftState { threads_out_of_place: 3, ..Default::default() };
        let sampled = Sampled { pid: Some(100), drift: drift.clone() };
        watch.shared.with(|st| st.last.insert("db-0".into(), sampled));
        watch.instances(&[running(Some(100))]);
        assert_eq!(watch.drift("db-0"), Some(drift));
        // Restarted: a new process, not sampled yet.
        watch.instances(&[running(Some(200))]);
        assert_eq!(watch.drift("db-0"), None);
        watch.instances(&[running(None)]);
        assert_eq!(watch.drift("db-0"), None);
    }

    #[test]
    fn the_thread_ends_when_the_supervisor_drops_its_watcher() {
        let mut watch = unbound();
        // No instance: the thread starts, says it watches none, and waits its hour.
        watch.instances(&[]);
        let thread_side = Arc::downgrade(&watch.shared);
        assert!(watch.thread.is_some(), "the first notice starts the thread");
        drop(watch);
        // Joined: the thread has returned and let go of what it shared.
        assert!(thread_side.upgrade().is_none(), "the watcher's thread outlived it");
    }
}
