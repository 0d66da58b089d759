//! `pinctl watch -c FILE [--once] [--json]`: samples every planned instance (where its memory
//! and threads are) and reports drift. `--once` prints one sample of each instance, like
//! `numastat -p` for the planned services plus what is wrong with them; without it, a loop at
//! `watch-interval` logs one line per drift start and end, runs `alert-command`, rebalances
//! instances whose `on-drift` says so, and serves metrics on `metrics-listen`.
//!
//! The tokio runtime (for the metrics server) is built here and only here, and only when
//! metrics are served: `pinctl exec` never loads one.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use pinctl_drift::alert::AlertRunner;
use pinctl_drift::metrics::{self, Metrics};
use pinctl_drift::rebalance::{LinuxControl, SystemClock};
use pinctl_drift::watch::{
    CycleReport, InstanceReport, RebalanceReport, Watcher, Watermark, targets,
};
use pinctl_drift::{DriftKind, Edge};

use crate::error::CmdResult;
use pinctl_config::WatchConfig;
use pinctl_drift::Planned;
use pinctl_drift::read::{Locator, Supervised};
use pinctl_drift::watch::Target;
use pinctl_supervise::observe::{Observed, Observer};
use pinctl_supervise::protocol::DriftState;
use std::sync::{Arc, Mutex};

/// Arguments of `pinctl watch`.
#[derive(Debug, clap::Args)]
pub(crate) struct WatchArgs {
    /// The service file whose planned instances are watched.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: PathBuf,
    /// Print one sample of every instance and exit.
    #[arg(long)]
    once: bool,
    /// JSON: the sample as one object (`--once`), or one object per log line.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: WatchArgs) -> CmdResult {
    let config = pinctl_launch::load_config(&args.config)?;
    let prepared = pinctl_launch::prepare_plan(config, pinctl_launch::live_topology()?, false)?;
    let plan = pinctl_launch::plan(&prepared)?;
    let config = &prepared.config;
    let interval = config.watch.interval;
    let watcher =
        Watcher::new(Path::new("/"), targets(config, &plan), interval, Watermark::of(config));
    if args.once {
        let mut watcher = watcher;
        let report = watcher.cycle(Duration::ZERO, None);
        let mut out = io::BufWriter::new(io::stdout().lock());
        if args.json {
            serde_json::to_writer_pretty(&mut out, &report).context("writing to stdout")?;
            writeln!(out).context("writing to stdout")?;
        } else {
            render_once(&mut out, &report).context("writing to stdout")?;
        }
        out.flush().context("writing to stdout")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut watching = Watching::new(watcher, LogTo::Stdout { json: args.json }, Metrics::new());
    // The runtime lives as long as the loop; the server runs on its worker thread.
    let _runtime = match config.watch.metrics_listen {
        Some(addr) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("starting the metrics server's runtime")?;
            let listener = rt
                .block_on(metrics::bind(addr))
                .with_context(|| format!("cannot listen on `{addr}` (metrics-listen)"))?;
            let bound = listener.local_addr().context("reading the metrics address")?;
            watching.log("metrics", &[("listen", format!("http://{bound}/metrics"))]);
            rt.spawn(metrics::serve(listener, watching.metrics.registry()));
            Some(rt)
        }
        None => None,
    };
    watching.log(
        "watch",
        &[
            ("instances", watching.watcher.targets.len().to_string()),
            ("interval_seconds", interval.as_secs_f64().to_string()),
        ],
    );
    let started = Instant::now();
    let mut next = Duration::ZERO;
    loop {
        watching.cycle(started.elapsed());
        next = watching.wait_for_next(started, next, interval);
    }
}

/// Where the watch loop's lines go: `pinctl watch` writes them to stdout (one JSON object each
/// under `--json`); `pinctl run` writes them to stderr after `pinctl: watch: `, like the
/// supervisor's own lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogTo {
    Stdout { json: bool },
    Supervisor,
}

/// One line: `kind key=value ...` (values with blanks quoted), or a JSON object with
/// `"event": kind` under `--json`.
fn log_to(to: LogTo, kind: &str, fields: &[(&str, String)]) {
    let line = if to == (LogTo::Stdout { json: true }) {
        let mut m = serde_json::Map::new();
        m.insert("event".into(), kind.into());
        for (k, v) in fields {
            m.insert((*k).into(), v.clone().into());
        }
        serde_json::Value::Object(m).to_string()
    } else {
        let mut line = kind.to_string();
        for (k, v) in fields {
            if v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == '"' || c == '=') {
                line.push_str(&format!(" {k}={v:?}"));
            } else {
                line.push_str(&format!(" {k}={v}"));
            }
        }
        line
    };
    line_to(to, &line);
}

fn line_to(to: LogTo, line: &str) {
    // A closed output must not stop the watcher: metrics and alerts go on.
    match to {
        LogTo::Stdout { .. } => {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
        // Under `pinctl run`, through the supervisor's relay: a stalled reader of its log
        // must not stall the watcher either.
        LogTo::Supervisor => pinctl_supervise::relay::log_line(&format!("pinctl: watch: {line}")),
    }
}

/// The watch loop of `pinctl watch` and `pinctl run`: one cycle of the watcher, then its log
/// lines, alert commands, rebalance reports and metrics.
pub(crate) struct Watching {
    pub(crate) watcher: Watcher,
    pub(crate) metrics: Metrics,
    to: LogTo,
    alerts: AlertRunner,
    control: LinuxControl,
    clock: SystemClock,
    /// What was last said of each instance (found, missing), so it is said once per change.
    status: BTreeMap<String, String>,
    /// When each instance's last `rebalance-blocked` alert ran: those follow `alert-cooldown`
    /// like episode alerts, or a blocked rebalance would alert on every cycle.
    blocked_alerted: BTreeMap<String, Instant>,
}

impl Watching {
    pub(crate) fn new(watcher: Watcher, to: LogTo, metrics: Metrics) -> Watching {
        Watching {
            watcher,
            metrics,
            to,
            alerts: AlertRunner::default(),
            control: LinuxControl::live(),
            clock: SystemClock::default(),
            status: BTreeMap::new(),
            blocked_alerted: BTreeMap::new(),
        }
    }

    /// One line: `kind key=value ...` (values with blanks quoted), or a JSON object with
    /// `"event": kind` under `--json`.
    pub(crate) fn log(&self, kind: &str, fields: &[(&str, String)]) {
        log_to(self.to, kind, fields);
    }

    fn line(&self, line: &str) {
        line_to(self.to, line);
    }

    fn json(&self) -> bool {
        self.to == (LogTo::Stdout { json: true })
    }

    /// Sleeps until `next + interval` on the clock that started at `started`, and returns that
    /// time; a cycle longer than the interval starts the next one now, without catching up.
    pub(crate) fn wait_for_next(
        &self,
        started: Instant,
        next: Duration,
        interval: Duration,
    ) -> Duration {
        let next = next + interval;
        let now = started.elapsed();
        if next > now {
            std::thread::sleep(next - now);
            next
        } else {
            now
        }
    }

    /// One cycle at `now` (time since the loop started): sample, judge, rebalance where asked,
    /// then say it. Drift lines and alerts go out as each instance is judged, before its
    /// rebalance.
    /// One cycle: samples, rules, log lines, alerts, rebalances and metrics; returns what it
    /// found.
    pub(crate) fn cycle(&mut self, now: Duration) -> CycleReport {
        let Watching { watcher, to, alerts, control, clock, .. } = self;
        let to = *to;
        let report = watcher.cycle_telling(now, Some((control, clock)), &mut |t, e| {
            if e.action == "ignore" {
                return;
            }
            if to == (LogTo::Stdout { json: true }) {
                line_to(to, &serde_json::json!({ "drift": e }).to_string());
            } else {
                log_to(to, "drift", &event_fields(e));
            }
            if let (true, Some(argv)) = (e.alert, t.settings.alert_command.as_ref()) {
                let what = format!("{} {}", e.instance, e.kind.name());
                if let Err(err) = alerts.start(argv, &e.alert_env(), &what) {
                    log_to(
                        to,
                        "alert-error",
                        &[
                            ("instance", e.instance.clone()),
                            ("message", format!("cannot start `{}`: {err}", argv[0])),
                        ],
                    );
                }
            }
        });
        for n in &report.notices {
            self.log("notice", &[("message", n.clone())]);
        }
        for i in &report.instances {
            self.instance_status(i);
        }
        for r in &report.rebalances {
            self.rebalance_line(r);
            if r.blocked_by_full_node() && self.blocked_alert_due(&r.instance) {
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
        for problem in self.alerts.reap() {
            self.log("alert-error", &[("message", problem)]);
        }
        self.metrics.record(&report);
        report
    }

    /// Whether a `rebalance-blocked` alert of `instance` is outside its `alert-cooldown` (and
    /// records it as sent when it is).
    fn blocked_alert_due(&mut self, instance: &str) -> bool {
        let Some(t) = self.watcher.targets.iter().find(|t| t.instance == instance) else {
            return false;
        };
        let cooldown = t.settings.alert_cooldown;
        let due = self.blocked_alerted.get(instance).is_none_or(|at| at.elapsed() >= cooldown);
        if due {
            self.blocked_alerted.insert(instance.to_string(), Instant::now());
        }
        due
    }

    /// Starts the instance's `alert-command`, if it has one.
    fn alert(&mut self, instance: &str, env: &[(String, String)], what: &str) {
        let target = self.watcher.targets.iter().find(|t| t.instance == instance);
        let Some(argv) = target.and_then(|t| t.settings.alert_command.clone()) else { return };
        if let Err(err) = self.alerts.start(&argv, env, what) {
            self.log(
                "alert-error",
                &[
                    ("instance", instance.to_string()),
                    ("message", format!("cannot start `{}`: {err}", argv[0])),
                ],
            );
        }
    }

    /// Logs an instance that appears or disappears (once per change, not every cycle).
    fn instance_status(&mut self, i: &InstanceReport) {
        let now = match (&i.sample, &i.error) {
            (Some(s), _) => format!("found pids={:?} source={}", s.pids, s.source.name()),
            (None, Some(e)) => format!("missing {e}"),
            (None, None) => "missing".to_string(),
        };
        if self.status.get(&i.instance) == Some(&now) {
            return;
        }
        self.status.insert(i.instance.clone(), now);
        let mut fields = vec![("instance", i.instance.clone())];
        match (&i.sample, &i.error) {
            (Some(s), _) => {
                fields.push(("status", "found".into()));
                fields.push((
                    "pids",
                    s.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                ));
                fields.push(("source", s.source.name().into()));
            }
            (None, e) => {
                fields.push(("status", "missing".into()));
                fields.push(("reason", e.clone().unwrap_or_default()));
            }
        }
        self.log("instance", &fields);
    }

    fn rebalance_line(&self, r: &RebalanceReport) {
        if self.json() {
            self.line(&serde_json::json!({ "rebalance": r }).to_string());
            return;
        }
        let mut f = vec![("instance", r.instance.clone()), ("pid", r.pid.to_string())];
        if let Some(t) = &r.threads {
            f.push(("threads_repinned", t.repinned.to_string()));
            f.push(("threads_complete", t.complete.to_string()));
        }
        if let Some(m) = &r.memory {
            f.push(("pages_moved", m.pages_moved.to_string()));
            f.push(("pages_failed", m.pages_failed.to_string()));
            f.push(("huge_blocks", m.blocks.to_string()));
            f.push(("huge_blocks_whole", m.blocks_whole.to_string()));
            f.push(("batches", m.batches.to_string()));
            f.push(("seconds", format!("{:.3}", m.took.as_secs_f64())));
            f.push(("lookup_seconds", format!("{:.3}", m.lookup.as_secs_f64())));
            f.push((
                "worst_batch_stall_ms",
                format!("{:.2}", m.worst_stall.as_secs_f64() * 1000.0),
            ));
            f.push(("call_cost_ms", format!("{:.2}", m.call_cost.as_secs_f64() * 1000.0)));
            f.push(("page_cost_us", format!("{:.2}", m.page_cost.as_secs_f64() * 1e6)));
            f.push((
                "stop",
                serde_json::to_value(&m.stop).map_or_else(
                    |_| String::new(),
                    |v| v["reason"].as_str().unwrap_or("").to_string(),
                ),
            ));
        }
        if let Some(e) = &r.error {
            f.push(("error", e.clone()));
        }
        self.log("rebalance", &f);
    }
}

/// The drift watcher of `pinctl run`: told of the supervisor's instances (PID, cgroup,
/// placement) after every change, it samples them on its own thread every `watch-interval`
/// with the same rules, keys, log lines, alerts and rebalancing as `pinctl watch`, so a slow
/// sample or a rebalance never holds up the supervisor's runtime. Its metrics are served on
/// the supervisor's runtime.
pub(crate) struct SupervisedWatch {
    latest: Arc<Mutex<Vec<Observed>>>,
    /// Each instance's drift at the watcher's last cycle, for `pinctl status`.
    states: Arc<Mutex<BTreeMap<String, DriftState>>>,
    /// What the thread starts from, taken when the first instances are known. (The watcher
    /// itself is built on the thread: its reader is not `Send`.)
    pending: Option<(Metrics, WatchSettings)>,
    /// The metrics socket, bound before the supervisor starts (so a taken port refuses
    /// `pinctl run` at once), served from the first call on the runtime.
    listener: Option<std::net::TcpListener>,
    /// The watch settings of the file the planner last read (a reload or its dry run)...
    planned: Arc<Mutex<Option<WatchSettings>>>,
    /// ...handed to the thread, which takes them at its next cycle, once a reload applied it.
    applied: Arc<Mutex<Option<WatchSettings>>>,
    /// Where metrics are served: a reload cannot move the socket, so a new `metrics-listen`
    /// is said to need a restart.
    metrics_listen: Option<std::net::SocketAddr>,
}

/// What a reload can change in a running watcher: every drift key, `watch-interval` and the
/// node watermark.
#[derive(Debug, Clone)]
pub(crate) struct WatchSettings {
    watch: WatchConfig,
    watermark: Watermark,
}

impl WatchSettings {
    pub(crate) fn of(config: &pinctl_config::Config) -> WatchSettings {
        WatchSettings { watch: config.watch.clone(), watermark: Watermark::of(config) }
    }
}

impl SupervisedWatch {
    /// Binds `metrics-listen` when set; nothing is sampled until the supervisor calls.
    pub(crate) fn new(config: &pinctl_config::Config) -> anyhow::Result<SupervisedWatch> {
        let settings = WatchSettings::of(config);
        let listener = match settings.watch.metrics_listen {
            Some(addr) => {
                let l = std::net::TcpListener::bind(addr)
                    .with_context(|| format!("cannot listen on `{addr}` (metrics-listen)"))?;
                l.set_nonblocking(true).context("setting up the metrics socket")?;
                let bound = l.local_addr().context("reading the metrics address")?;
                log_to(
                    LogTo::Supervisor,
                    "metrics",
                    &[("listen", format!("http://{bound}/metrics"))],
                );
                Some(l)
            }
            None => None,
        };
        Ok(SupervisedWatch {
            latest: Arc::default(),
            states: Arc::default(),
            metrics_listen: settings.watch.metrics_listen,
            pending: Some((Metrics::new(), settings)),
            listener,
            planned: Arc::default(),
            applied: Arc::default(),
        })
    }

    /// Where the planner leaves the watch settings of each file it reads; a reload that
    /// applies the file hands them to the watcher.
    pub(crate) fn planned_settings(&self) -> Arc<Mutex<Option<WatchSettings>>> {
        self.planned.clone()
    }
}

/// A watch target for a supervised instance: its placement from the supervisor, its drift
/// settings from the file.
fn supervised_target(o: &Observed, watch: &WatchConfig) -> Target {
    let p = &o.placement;
    Target {
        instance: o.name.clone(),
        service: o.service.clone(),
        planned: Planned {
            cpus: p.cpus.clone(),
            nodes: p.nodes.clone(),
            policy: p.memory_policy,
            policy_nodes: p.memory_nodes.clone(),
        },
        settings: watch.drift(&o.service),
        locator: Locator {
            supervised: Some(Supervised { pid: o.pid, cgroup: o.cgroup.clone() }),
            ..Locator::default()
        },
    }
}

/// What `pinctl status` shows of an instance's last sample.
fn drift_state(i: &InstanceReport) -> DriftState {
    DriftState {
        local_fraction: i.local_fraction,
        drifting: i.drifting.iter().map(|k| k.name().to_string()).collect(),
        threads_out_of_place: i.threads_out_of_place,
        error: i.error.clone(),
    }
}

impl Observer for SupervisedWatch {
    fn drift(&self, instance: &str) -> Option<DriftState> {
        self.states.lock().ok()?.get(instance).cloned()
    }

    fn reloaded(&mut self) {
        let Some(settings) = self.planned.lock().ok().and_then(|mut p| p.take()) else { return };
        if settings.watch.metrics_listen != self.metrics_listen {
            let to = |a: Option<std::net::SocketAddr>| a.map_or("off".into(), |a| a.to_string());
            log_to(
                LogTo::Supervisor,
                "watch-error",
                &[(
                    "message",
                    format!(
                        "metrics-listen changed from {} to {}: the metrics socket moves when \
                         pinctl run is restarted; every other watch key is taken up now",
                        to(self.metrics_listen),
                        to(settings.watch.metrics_listen)
                    ),
                )],
            );
        }
        if let Ok(mut applied) = self.applied.lock() {
            *applied = Some(settings);
        }
    }

    fn instances(&mut self, instances: &[Observed]) {
        if let Ok(mut latest) = self.latest.lock() {
            *latest = instances.to_vec();
        }
        if let Some(listener) = self.listener.take() {
            let registry = self.pending.as_ref().map(|(m, _)| m.registry());
            match (tokio::net::TcpListener::from_std(listener), registry) {
                (Ok(l), Some(registry)) => {
                    tokio::spawn(metrics::serve(l, registry));
                }
                (Err(e), _) => {
                    log_to(
                        LogTo::Supervisor,
                        "metrics-error",
                        &[("message", format!("cannot serve metrics: {e}"))],
                    );
                }
                (Ok(_), None) => {}
            }
        }
        let Some((metrics, WatchSettings { mut watch, watermark })) = self.pending.take() else {
            return;
        };
        let latest = self.latest.clone();
        let states = self.states.clone();
        let applied = self.applied.clone();
        log_to(
            LogTo::Supervisor,
            "watch",
            &[
                ("instances", instances.len().to_string()),
                ("interval_seconds", watch.interval.as_secs_f64().to_string()),
            ],
        );
        let spawned = std::thread::Builder::new().name("pinctl-watch".into()).spawn(move || {
            let watcher = Watcher::new(Path::new("/"), Vec::new(), watch.interval, watermark);
            let mut watching = Watching::new(watcher, LogTo::Supervisor, metrics);
            let started = Instant::now();
            let mut next = Duration::ZERO;
            loop {
                if let Some(reloaded) = applied.lock().ok().and_then(|mut a| a.take()) {
                    let WatchSettings { watch: new, watermark } = reloaded;
                    log_to(
                        LogTo::Supervisor,
                        "watch",
                        &[
                            ("reloaded", "yes".into()),
                            ("interval_seconds", new.interval.as_secs_f64().to_string()),
                        ],
                    );
                    watching.watcher.set_interval(new.interval);
                    watching.watcher.set_watermark(watermark);
                    watch = new;
                }
                let now: Vec<Observed> = latest.lock().map(|l| l.clone()).unwrap_or_default();
                let targets: Vec<Target> =
                    now.iter().map(|o| supervised_target(o, &watch)).collect();
                for t in &targets {
                    let old = watching.watcher.targets.iter().find(|o| o.instance == t.instance);
                    if old.is_some_and(|o| o.locator != t.locator) {
                        watching.watcher.forget(&t.instance);
                    }
                }
                watching.watcher.targets = targets;
                watching.metrics.set_restarts(now.iter().map(|o| (o.name.as_str(), o.restarts)));
                let report = watching.cycle(started.elapsed());
                if let Ok(mut states) = states.lock() {
                    *states = report
                        .instances
                        .iter()
                        .map(|i| (i.instance.clone(), drift_state(i)))
                        .collect();
                }
                next = watching.wait_for_next(started, next, watch.interval);
            }
        });
        if let Err(e) = spawned {
            log_to(
                LogTo::Supervisor,
                "watch-error",
                &[("message", format!("cannot start the watcher's thread: {e}"))],
            );
        }
    }
}

fn event_fields(e: &pinctl_drift::watch::DriftEvent) -> Vec<(&'static str, String)> {
    let edge = if e.edge == Edge::Start { "start" } else { "end" };
    let mut f = vec![
        ("edge", edge.to_string()),
        ("instance", e.instance.clone()),
        ("service", e.service.clone()),
        ("kind", e.kind.name().to_string()),
        ("episode", e.episode.to_string()),
        ("value", format!("{:.4}", e.value)),
        ("threshold", format!("{:.4}", e.threshold)),
    ];
    if let Some(l) = e.local_fraction {
        f.push(("local_fraction", format!("{l:.4}")));
    }
    if let Some(s) = e.lasted_seconds {
        f.push(("lasted_seconds", format!("{s:.1}")));
    }
    f.push(("action", e.action.to_string()));
    f.push(("alert", if e.alert { "yes" } else { "no" }.to_string()));
    f.push(("detail", e.detail.clone()));
    f
}

fn mib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / f64::from(1 << 20))
}

/// `numastat -p` for each planned instance (MiB per node and kind), then what is wrong.
fn render_once(out: &mut impl Write, r: &CycleReport) -> io::Result<()> {
    let nodes: Vec<u32> = r.host.nodes.keys().copied().collect();
    for (n, i) in r.instances.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        writeln!(
            out,
            "{} (service {}): planned CPUs {}, memory {} on node(s) {}, on-drift {}",
            i.instance, i.service, i.planned_cpus, i.planned_policy, i.planned_nodes, i.action
        )?;
        let Some(s) = &i.sample else {
            writeln!(out, "  not sampled: {}", i.error.as_deref().unwrap_or("unknown"))?;
            continue;
        };
        let from = match &s.cgroup {
            Some(c) => format!("{c}/memory.numa_stat"),
            None => format!("/proc/{}/numa_maps", s.pids[0]),
        };
        writeln!(
            out,
            "  pids {}; from {from} in {:.0}us",
            s.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            s.cost.as_secs_f64() * 1e6
        )?;
        let mut header = format!("  {:<10}", "MiB");
        for n in &nodes {
            header.push_str(&format!(" {:>12}", format!("Node {n}")));
        }
        writeln!(out, "{header} {:>12}", "Total")?;
        for (k, kind) in ["anon", "file", "shmem", "huge"].into_iter().enumerate() {
            let mut row = format!("  {kind:<10}");
            let mut total = 0;
            for n in &nodes {
                let b = s.memory.0.get(n).map_or(0, |b| b.kinds()[k].1);
                total += b;
                row.push_str(&format!(" {:>12}", mib(b)));
            }
            writeln!(out, "{row} {:>12}", mib(total))?;
        }
        let mut row = format!("  {:<10}", "total");
        for n in &nodes {
            row.push_str(&format!(" {:>12}", mib(s.memory.0.get(n).map_or(0, |b| b.total()))));
        }
        writeln!(out, "{row} {:>12}", mib(s.memory.total()))?;
        let local = i.local_fraction.map_or_else(
            || "not judged (under min-memory)".to_string(),
            |f| format!("{:.1}%", f * 100.0),
        );
        writeln!(
            out,
            "  local {local}; {} of {} threads out of place",
            i.threads_out_of_place,
            s.threads.len()
        )?;
        if i.findings.is_empty() {
            writeln!(out, "  ok")?;
        }
        for (kind, f) in &i.findings {
            let kind: DriftKind = *kind;
            writeln!(out, "  drift {}: {}", kind.name(), f.detail)?;
        }
    }
    for n in &r.notices {
        writeln!(out, "\nnote: {n}")?;
    }
    Ok(())
}
