//! The watch loop of `pinctl watch` and of `pinctl run`'s watcher: a [`Watcher`] cycle every
//! `watch-interval`, then what it found said through a [`Sink`] (drift episodes, instances
//! found or lost, rebalances, notices), alert commands started and reaped, metrics recorded.
//!
//! Time comes from a [`Clock`] and words go to a [`Sink`], so the loop, its alert cool-downs
//! and its pace are tested with a fake clock and a recording sink; the binary only renders
//! what the sink gets. Reloaded settings arrive as a [`WatchSettings`] value with the reload.

use std::collections::BTreeMap;
use std::time::Duration;

use pinctl_config::{Config, OnDrift, WatchConfig};

use crate::alert::AlertRunner;
use crate::metrics::Metrics;
use crate::rebalance::{Clock, ProcessControl};
use crate::sample::Refused;
use crate::watch::{CycleReport, DriftEvent, InstanceReport, RebalanceReport, Watcher, Watermark};

/// What a reload can change in a running watcher: every drift key, `watch-interval` and the
/// node watermark.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchSettings {
    pub watch: WatchConfig,
    pub watermark: Watermark,
}

impl WatchSettings {
    /// The settings a service file gives.
    pub fn of(config: &Config) -> WatchSettings {
        WatchSettings { watch: config.watch.clone(), watermark: Watermark::of(config) }
    }
}

/// How an instance was found at a cycle, said once per change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// Sampled: its processes, where its memory figures come from, and the processes found
    /// beside them but refused as the instance.
    Found { pids: Vec<u32>, source: &'static str, refused: Vec<Refused> },
    /// Not proven to be the instance (a PID file others could write, another user's process):
    /// not sampled, re-pinned or moved.
    Refused { reason: String },
    /// Not found, or not readable.
    Missing { reason: String },
}

impl Presence {
    fn of(i: &InstanceReport) -> Presence {
        match (&i.sample, &i.error) {
            (Some(s), _) => Presence::Found {
                pids: s.pids.clone(),
                source: s.source.name(),
                refused: s.refused.clone(),
            },
            (None, e) if i.refused => Presence::Refused { reason: e.clone().unwrap_or_default() },
            (None, e) => Presence::Missing { reason: e.clone().unwrap_or_default() },
        }
    }
}

/// What the loop says, for its caller to render.
#[derive(Debug, Clone)]
pub enum Said<'a> {
    /// The loop starts watching.
    Watching { instances: usize, interval: Duration },
    /// A reload's settings were taken up.
    Reloaded { interval: Duration },
    /// A drift episode started or ended.
    Drift(&'a DriftEvent),
    /// An instance appeared, disappeared or was refused (once per change).
    Instance { instance: &'a str, presence: &'a Presence },
    /// A rebalance ran.
    Rebalance(&'a RebalanceReport),
    /// Something said once (a missing capability, no cgroup v2).
    Notice(&'a str),
    /// An alert command could not start, failed or was killed.
    AlertError { instance: Option<&'a str>, message: String },
    /// Metrics are served here (`metrics-listen` as bound).
    Metrics { listen: std::net::SocketAddr },
    /// Metrics cannot be served (the watcher goes on).
    MetricsError(String),
    /// The watcher cannot go on (its thread could not start): nothing is watched.
    WatchError(String),
}

/// Where the loop's words go.
pub trait Sink {
    fn say(&mut self, said: Said<'_>);
}

/// The watch loop (see the module documentation).
pub struct WatchLoop<C: Clock> {
    pub watcher: Watcher,
    pub metrics: Metrics,
    alerts: AlertRunner,
    control: Box<dyn ProcessControl>,
    clock: C,
    sink: Box<dyn Sink>,
    /// How each instance was last said to be, so it is said once per change.
    presence: BTreeMap<String, Presence>,
    /// When each instance's last `rebalance-blocked` alert ran: those follow `alert-cooldown`
    /// like episode alerts, or a blocked rebalance would alert on every cycle.
    blocked_alerted: BTreeMap<String, Duration>,
    /// When the next cycle is due, on `clock`.
    next: Duration,
}

impl<C: Clock> std::fmt::Debug for WatchLoop<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchLoop")
            .field("watcher", &self.watcher)
            .field("next", &self.next)
            .finish()
    }
}

impl<C: Clock> WatchLoop<C> {
    /// A loop over `watcher`'s targets, acting on processes through `control`.
    pub fn new(
        watcher: Watcher,
        metrics: Metrics,
        control: Box<dyn ProcessControl>,
        clock: C,
        sink: Box<dyn Sink>,
    ) -> WatchLoop<C> {
        let next = clock.now();
        WatchLoop {
            watcher,
            metrics,
            alerts: AlertRunner::default(),
            control,
            clock,
            sink,
            presence: BTreeMap::new(),
            blocked_alerted: BTreeMap::new(),
            next,
        }
    }

    /// Says something through the loop's sink, in line with what the loop says.
    pub fn say(&mut self, said: Said<'_>) {
        self.sink.say(said);
    }

    /// Takes up a reload's settings from the next cycle on.
    pub fn reload(&mut self, settings: &WatchSettings) {
        self.watcher.set_interval(settings.watch.interval);
        self.watcher.set_watermark(settings.watermark);
        self.sink.say(Said::Reloaded { interval: settings.watch.interval });
    }

    /// One cycle now: sample, judge, rebalance where asked, then say it. Drift lines and
    /// alerts go out as each instance is judged, before its rebalance (which can take seconds).
    pub fn cycle(&mut self) -> CycleReport {
        let now = self.clock.now();
        let WatchLoop { watcher, alerts, control, clock, sink, .. } = self;
        let report =
            watcher.cycle_with_events(now, Some((control.as_mut(), clock)), &mut |t, e| {
                if e.action == OnDrift::Ignore {
                    return;
                }
                sink.say(Said::Drift(e));
                if let (true, Some(argv)) = (e.alert, t.settings.alert_command.as_ref()) {
                    let what = format!("{} {}", e.instance, e.kind.name());
                    if let Err(err) = alerts.start(argv, &e.alert_env(), &what) {
                        let message = format!("cannot start `{}`: {err}", argv[0]);
                        sink.say(Said::AlertError { instance: Some(&e.instance), message });
                    }
                }
            });
        for n in &report.notices {
            self.sink.say(Said::Notice(n));
        }
        for i in &report.instances {
            let presence = Presence::of(i);
            if self.presence.get(&i.instance) != Some(&presence) {
                self.sink.say(Said::Instance { instance: &i.instance, presence: &presence });
                self.presence.insert(i.instance.clone(), presence);
            }
        }
        for r in &report.rebalances {
            self.sink.say(Said::Rebalance(r));
            if r.blocked_by_full_node() && self.blocked_alert_due(&r.instance, now) {
                let env = vec![
                    ("PINCTL_INSTANCE".to_string(), r.instance.clone()),
                    ("PINCTL_DRIFT_KIND".to_string(), "rebalance-blocked".to_string()),
                    (
                        "PINCTL_DETAIL".to_string(),
                        "no planned node has the free memory to move pages back".to_string(),
                    ),
                ];
                self.alert(&r.instance, &env, &format!("{} rebalance", r.instance));
            }
        }
        for message in self.alerts.reap() {
            self.sink.say(Said::AlertError { instance: None, message });
        }
        self.metrics.record(&report);
        report
    }

    /// Waits until the next cycle is due: one `watch-interval` after the last one was due. A
    /// cycle longer than the interval starts the next one at once, without catching up.
    pub fn wait(&mut self) {
        let d = self.until_next();
        if !d.is_zero() {
            self.clock.sleep(d);
        }
    }

    /// How long [`WatchLoop::wait`] would wait, the next cycle counted as due then: for a
    /// caller that waits itself (`pinctl run`'s watcher waits to be stopped as well).
    pub fn until_next(&mut self) -> Duration {
        let now = self.clock.now();
        self.next += self.watcher.interval();
        if self.next > now {
            self.next - now
        } else {
            self.next = now;
            Duration::ZERO
        }
    }

    /// Cycles until the process ends.
    pub fn run_forever(&mut self) -> ! {
        loop {
            self.cycle();
            self.wait();
        }
    }

    /// Whether a `rebalance-blocked` alert of `instance` is outside its `alert-cooldown` at
    /// `now` (and records it as sent when it is).
    fn blocked_alert_due(&mut self, instance: &str, now: Duration) -> bool {
        let Some(t) = self.watcher.targets.iter().find(|t| t.instance == instance) else {
            return false;
        };
        let cooldown = t.settings.alert_cooldown;
        let due =
            self.blocked_alerted.get(instance).is_none_or(|&at| now.saturating_sub(at) >= cooldown);
        if due {
            self.blocked_alerted.insert(instance.to_string(), now);
        }
        due
    }

    /// Starts the instance's `alert-command`, if it has one.
    fn alert(&mut self, instance: &str, env: &[(String, String)], what: &str) {
        let target = self.watcher.targets.iter().find(|t| t.instance == instance);
        let Some(argv) = target.and_then(|t| t.settings.alert_command.clone()) else { return };
        if let Err(err) = self.alerts.start(&argv, env, what) {
            let message = format!("cannot start `{}`: {err}", argv[0]);
            self.sink.say(Said::AlertError { instance: Some(instance), message });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use pinctl_config::OnDrift;

    use super::*;
    use crate::rebalance::tests::{FakeClock, FakeControl};
    use crate::watch::tests::{host, target};

    /// A sink that keeps a line per thing said.
    #[derive(Clone, Default)]
    struct Recorded(Rc<RefCell<Vec<String>>>);

    impl Sink for Recorded {
        fn say(&mut self, said: Said<'_>) {
            let line = match said {
                Said::Watching { instances, interval } => {
                    format!("watching {instances} {interval:?}")
                }
                Said::Reloaded { interval } => format!("reloaded {interval:?}"),
                Said::Drift(e) => format!("drift {:?} {} alert={}", e.edge, e.kind.name(), e.alert),
                Said::Instance { instance, presence } => match presence {
                    Presence::Found { pids, .. } => format!("{instance} found {pids:?}"),
                    Presence::Refused { .. } => format!("{instance} refused"),
                    Presence::Missing { .. } => format!("{instance} missing"),
                },
                Said::Rebalance(r) => format!("rebalance {}", r.instance),
                Said::Notice(n) => format!("notice {n}"),
                Said::AlertError { message, .. } => format!("alert-error {message}"),
                Said::Metrics { listen } => format!("metrics {listen}"),
                Said::MetricsError(m) => format!("metrics-error {m}"),
                Said::WatchError(m) => format!("watch-error {m}"),
            };
            self.0.borrow_mut().push(line);
        }
    }

    /// A loop over [`host`]'s instance with `action`, on a fake clock every 10 s.
    fn looping(
        d: &tempfile::TempDir,
        action: OnDrift,
    ) -> (WatchLoop<FakeClock>, Recorded, Rc<std::cell::Cell<Duration>>) {
        let watcher = Watcher::new(
            d.path(),
            vec![target(action)],
            Duration::from_secs(10),
            Watermark::default(),
        );
        let control = FakeControl { listings: vec![vec![100]], ..Default::default() };
        let time = control.clock.clone();
        let sink = Recorded::default();
        let l = WatchLoop::new(
            watcher,
            Metrics::new(),
            Box::new(control),
            FakeClock(time.clone()),
            Box::new(sink.clone()),
        );
        (l, sink, time)
    }

    #[test]
    fn the_loop_keeps_its_pace_on_its_clock_and_does_not_catch_up() {
        let d = host(0, 0, "0-1");
        let (mut l, _, time) = looping(&d, OnDrift::Alert);
        l.cycle();
        l.wait();
        assert_eq!(time.get(), Duration::from_secs(10));
        // A cycle that took 25 s: the next starts at once, and the one after 10 s later.
        time.set(time.get() + Duration::from_secs(25));
        l.wait();
        assert_eq!(time.get(), Duration::from_secs(35));
        l.wait();
        assert_eq!(time.get(), Duration::from_secs(45));
        // A reload's interval is taken up at once.
        let mut settings =
            WatchSettings { watch: WatchConfig::default(), watermark: Watermark::default() };
        settings.watch.interval = Duration::from_secs(2);
        l.reload(&settings);
        l.wait();
        assert_eq!(time.get(), Duration::from_secs(47));
    }

    #[test]
    fn drift_is_said_as_it_starts_and_an_instance_once_per_change() {
        let d = host(16384, 5, "0-7");
        let (mut l, said, time) = looping(&d, OnDrift::Alert);
        for _ in 0..4 {
            l.cycle();
            l.wait();
        }
        let lines = said.0.borrow().clone();
        let (notices, lines): (Vec<String>, Vec<String>) =
            lines.into_iter().partition(|l| l.starts_with("notice "));
        assert_eq!(notices.len(), 1, "a notice is said once: {notices:?}");
        assert_eq!(
            lines,
            ["db found [100]", "drift Start locality alert=true", "drift Start cpu alert=true",],
            "locality and CPU drift start once the 20 s hold has passed; the instance is said \
             once"
        );
        // The process goes: said once, however many cycles see it gone.
        std::fs::remove_dir_all(d.path().join("proc/100")).unwrap();
        for _ in 0..3 {
            l.cycle();
            l.wait();
        }
        let lines = said.0.borrow().clone();
        assert_eq!(lines.iter().filter(|l| l.as_str() == "db missing").count(), 1, "{lines:?}");
        assert_eq!(time.get(), Duration::from_secs(70));
        let r = l.cycle();
        assert!(r.instances[0].sample.is_none());
    }
}
