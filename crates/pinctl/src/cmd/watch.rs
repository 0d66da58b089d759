//! `pinctl watch -c FILE [--once] [--json]`: samples every planned instance (where its memory
//! and threads are) and reports drift. `--once` prints one sample of each instance, like
//! `numastat -p` for the planned services plus what is wrong with them; without it, the drift
//! watch loop (pinctl-drift's `WatchLoop`) runs at `watch-interval` and this module renders
//! what it says: one line per drift start and end, instances found or lost, rebalances.
//! Under `pinctl run` the same loop runs on a thread of the watcher (pinctl-drift's
//! `SupervisedWatch`), told of the supervisor's instances through [`SupervisedObserver`].
//!
//! The tokio runtime (for the metrics server) is built here and only here, and only when
//! metrics are served: `pinctl exec` never loads one.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use pinctl_drift::metrics::{self, Metrics};
use pinctl_drift::read::Supervised;
use pinctl_drift::rebalance::{LinuxControl, MonotonicClock};
use pinctl_drift::supervised::{SupervisedInstance, SupervisedWatch};
use pinctl_drift::watch::{CycleReport, RebalanceReport, Target, Watcher, system_uid, targets};
use pinctl_drift::watch_loop::{Presence, Said, Sink, WatchLoop, WatchSettings};
use pinctl_drift::{DriftKind, Edge};
use pinctl_supervise::observe::{Observed, Observer};
use pinctl_supervise::protocol::DriftState;

use crate::error::CmdResult;

/// Arguments of `pinctl watch`.
#[derive(Debug, clap::Args)]
pub(crate) struct WatchArgs {
    /// The service file whose planned instances are watched.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: PathBuf,
    /// Print one sample of every instance and exit as a monitoring check: 0 in place, 1
    /// drift, 2 an instance not sampled, 3 a file or plan it cannot use.
    #[arg(long)]
    once: bool,
    /// JSON: the sample as one object (`--once`), or one object per log line.
    #[arg(long)]
    json: bool,
}

/// `watch --once` is a check a cron job or a Nagios/Icinga service runs, so it exits with the
/// monitoring plugins' statuses (docs/drift.md): nothing wrong, drift, an instance that could
/// not be sampled, or a file or plan it could not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CheckStatus {
    Ok = 0,
    Drift = 1,
    NotSampled = 2,
    Unknown = 3,
}

impl CheckStatus {
    /// The worst of the instances': one not sampled outweighs drift elsewhere (it may be
    /// drifting too, unseen).
    fn of(report: &CycleReport) -> CheckStatus {
        let not_sampled = report.instances.iter().any(|i| i.sample.is_none());
        let drifting = report.instances.iter().any(|i| !i.findings.is_empty());
        if not_sampled {
            CheckStatus::NotSampled
        } else if drifting {
            CheckStatus::Drift
        } else {
            CheckStatus::Ok
        }
    }
}

pub(crate) fn run(args: WatchArgs) -> CmdResult {
    if !args.once {
        return watch(args);
    }
    // A file, topology or plan `--once` cannot use is "unknown" to a monitoring system, not
    // drift: said on stderr as any other command says it, with status 3.
    once(&args).or_else(|e| {
        if let Some(m) = e.message() {
            let _ = writeln!(io::stderr().lock(), "{m}");
        }
        Ok(ExitCode::from(CheckStatus::Unknown as u8))
    })
}

/// The planned instances to watch. Those that neither a `pid-file` nor a `unit` locates are
/// asked of the `pinctl run` that supervises this file, when one runs: its answer (over its
/// socket, served by root) names each one's process, cgroup and placement, which stands as the
/// proof a PID file gives otherwise. Instances it does not name stay unlocated.
fn watched(config: &pinctl_config::Config, plan: &pinctl_plan::Plan) -> Vec<Target> {
    let mut targets = targets(config, plan, &system_uid);
    let unlocated = |t: &Target| t.locator.pid_file.is_none() && t.locator.unit.is_none();
    if !targets.iter().any(unlocated) {
        return targets;
    }
    let Ok(socket) = config.supervisor().map(|s| s.socket) else { return targets };
    if !socket.exists() {
        return targets;
    }
    let running = match super::control::instances_at(&socket) {
        Ok(running) => running,
        Err(e) => {
            let why = e.message().unwrap_or_default();
            let _ = writeln!(io::stderr().lock(), "warning: {}: {why}", socket.display());
            return targets;
        }
    };
    for t in targets.iter_mut().filter(|t| unlocated(t)) {
        let Some(i) = running.iter().find(|i| i.name == t.instance) else { continue };
        t.locator.supervised = Some(Supervised {
            pid: i.pid.and_then(|p| u32::try_from(p).ok()),
            cgroup: i.cgroup.clone(),
        });
        // Where the supervisor put it (a reload keeps instances where they run).
        t.planned = i.placement.clone();
    }
    targets
}

/// The file's watch settings and a watcher of its planned instances on this machine.
fn watcher_of(args: &WatchArgs) -> Result<(WatchSettings, Watcher), crate::error::Error> {
    let host = super::host::load(std::slice::from_ref(&args.config), None, false)?;
    let (_, plan) = host.plan()?;
    let file = host.own();
    let settings = WatchSettings::of(&file.config);
    let watcher = Watcher::new(
        Path::new("/"),
        watched(&file.config, &plan),
        settings.watch.interval,
        settings.watermark,
    );
    Ok((settings, watcher))
}

/// One sample of every planned instance, printed, and the check's status.
fn once(args: &WatchArgs) -> CmdResult {
    let (_, mut watcher) = watcher_of(args)?;
    let report = watcher.cycle(std::time::Duration::ZERO, None);
    let mut out = io::BufWriter::new(io::stdout().lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report).context("writing to stdout")?;
        writeln!(out).context("writing to stdout")?;
    } else {
        render_once(&mut out, &report).context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::from(CheckStatus::of(&report) as u8))
}

/// The watch loop: a cycle every `watch-interval` until stopped.
fn watch(args: WatchArgs) -> CmdResult {
    let (settings, watcher) = watcher_of(&args)?;
    let to = LogTo::Stdout { json: args.json };
    let mut watching = WatchLoop::new(
        watcher,
        Metrics::new(),
        Box::new(LinuxControl::live()),
        MonotonicClock::default(),
        Box::new(to),
    );
    // The runtime lives as long as the loop; the server runs on its worker thread.
    let _runtime = match settings.watch.metrics_listen {
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
            log_to(to, "metrics", &[("listen", format!("http://{bound}/metrics").into())]);
            rt.spawn(metrics::serve(listener, watching.metrics.server()));
            Some(rt)
        }
        None => None,
    };
    let instances = watching.watcher.targets.len();
    watching.say(Said::Watching { instances, interval: settings.watch.interval });
    watching.run_forever()
}

/// Where the watch loop's lines go: `pinctl watch` writes them to stdout (one JSON object each
/// under `--json`); `pinctl run` writes them to stderr after `pinctl: watch: `, like the
/// supervisor's own lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogTo {
    Stdout { json: bool },
    Supervisor,
}

impl LogTo {
    fn json(self) -> bool {
        self == LogTo::Stdout { json: true }
    }
}

/// A log field's value: text, or a figure that `--json` writes as a JSON number, array or
/// boolean rather than as the text the line shows.
#[derive(Debug, Clone, PartialEq)]
enum Field {
    Text(String),
    Count(u64),
    Seconds(f64),
    Pids(Vec<u32>),
    Yes,
}

impl From<String> for Field {
    fn from(text: String) -> Field {
        Field::Text(text)
    }
}

impl From<&str> for Field {
    fn from(text: &str) -> Field {
        Field::Text(text.to_string())
    }
}

impl Field {
    fn text(&self) -> String {
        match self {
            Field::Text(t) => t.clone(),
            Field::Count(n) => n.to_string(),
            Field::Seconds(s) => s.to_string(),
            Field::Pids(p) => p.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            Field::Yes => "yes".into(),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Field::Text(t) => t.clone().into(),
            Field::Count(n) => (*n).into(),
            Field::Seconds(s) => (*s).into(),
            Field::Pids(p) => p.clone().into(),
            Field::Yes => true.into(),
        }
    }
}

/// Text fields as log fields (the drift and rebalance lines' text form).
fn texts(fields: Vec<(&'static str, String)>) -> Vec<(&'static str, Field)> {
    fields.into_iter().map(|(k, v)| (k, Field::Text(v))).collect()
}

/// One line: `kind key=value ...` (values with blanks quoted), or a JSON object with
/// `"event": kind` under `--json`.
fn log_to(to: LogTo, kind: &str, fields: &[(&str, Field)]) {
    let line = if to.json() {
        let mut m = serde_json::Map::new();
        m.insert("event".into(), kind.into());
        for (k, v) in fields {
            m.insert((*k).into(), v.json());
        }
        serde_json::Value::Object(m).to_string()
    } else {
        let mut line = kind.to_string();
        for (k, v) in fields {
            let v = v.text();
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

impl Sink for LogTo {
    fn say(&mut self, said: Said<'_>) {
        let to = *self;
        match said {
            Said::Watching { instances, interval } => log_to(
                to,
                "watch",
                &[
                    ("instances", Field::Count(instances as u64)),
                    ("interval_seconds", Field::Seconds(interval.as_secs_f64())),
                ],
            ),
            Said::Reloaded { interval } => log_to(
                to,
                "watch",
                &[
                    ("reloaded", Field::Yes),
                    ("interval_seconds", Field::Seconds(interval.as_secs_f64())),
                ],
            ),
            Said::Drift(e) if to.json() => {
                line_to(to, &serde_json::json!({ "drift": e }).to_string())
            }
            Said::Drift(e) => log_to(to, "drift", &texts(event_fields(e))),
            Said::Instance { instance, presence } => {
                let mut fields: Vec<(&str, Field)> = vec![("instance", instance.into())];
                match presence {
                    Presence::Found { pids, source, refused } => {
                        fields.push(("status", "found".into()));
                        fields.push(("pids", Field::Pids(pids.to_vec())));
                        fields.push(("source", source.to_string().into()));
                        if !refused.is_empty() {
                            fields.push(("refused", refused_text(refused).into()));
                        }
                    }
                    Presence::Refused { reason } => {
                        fields.push(("status", "refused".into()));
                        fields.push(("reason", reason.as_str().into()));
                    }
                    Presence::Missing { reason } => {
                        fields.push(("status", "missing".into()));
                        fields.push(("reason", reason.as_str().into()));
                    }
                }
                log_to(to, "instance", &fields);
            }
            Said::Rebalance(r) if to.json() => {
                line_to(to, &serde_json::json!({ "rebalance": r }).to_string())
            }
            Said::Rebalance(r) => log_to(to, "rebalance", &texts(rebalance_fields(r))),
            Said::Notice(n) => log_to(to, "notice", &[("message", n.to_string().into())]),
            Said::AlertError { instance, message } => {
                let mut fields: Vec<(&str, Field)> = Vec::new();
                if let Some(i) = instance {
                    fields.push(("instance", i.into()));
                }
                fields.push(("message", message.into()));
                log_to(to, "alert-error", &fields);
            }
        }
    }
}

fn rebalance_fields(r: &RebalanceReport) -> Vec<(&'static str, String)> {
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
        f.push(("worst_batch_stall_ms", format!("{:.2}", m.worst_stall.as_secs_f64() * 1000.0)));
        f.push(("call_cost_ms", format!("{:.2}", m.call_cost.as_secs_f64() * 1000.0)));
        f.push(("page_cost_us", format!("{:.2}", m.page_cost.as_secs_f64() * 1e6)));
        f.push(("passes", m.passes.to_string()));
        if let Some(after) = m.locality_after {
            f.push(("locality_after", format!("{after:.3}")));
        }
        f.push((
            "stop",
            serde_json::to_value(&m.stop)
                .map_or_else(|_| String::new(), |v| v["reason"].as_str().unwrap_or("").to_string()),
        ));
    }
    if let Some(e) = &r.error {
        f.push(("error", e.clone()));
    }
    f
}

/// `pinctl run`'s drift watcher as the supervisor sees it: each notice of the supervisor's
/// instances goes to pinctl-drift's [`SupervisedWatch`] (which samples them on its own
/// thread), a reload's file hands it the new settings, and `pinctl status` reads back what it
/// last found. The metrics socket is bound before the supervisor starts (so a taken port
/// refuses `pinctl run` at once) and served on the supervisor's runtime from its first notice.
pub(crate) struct SupervisedObserver {
    watch: SupervisedWatch,
    listener: Option<std::net::TcpListener>,
    server: metrics::MetricsServer,
    /// Where metrics are served: a reload cannot move the socket, so a new `metrics-listen`
    /// is said to need a restart.
    metrics_listen: Option<std::net::SocketAddr>,
}

impl SupervisedObserver {
    /// Binds `metrics-listen` when set; nothing is sampled until the supervisor calls.
    pub(crate) fn new(config: &pinctl_config::Config) -> anyhow::Result<SupervisedObserver> {
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
                    &[("listen", format!("http://{bound}/metrics").into())],
                );
                Some(l)
            }
            None => None,
        };
        let metrics = Metrics::new();
        Ok(SupervisedObserver {
            server: metrics.server(),
            metrics_listen: settings.watch.metrics_listen,
            watch: SupervisedWatch::new(settings, metrics, Box::new(LogTo::Supervisor)),
            listener,
        })
    }
}

impl Observer for SupervisedObserver {
    fn drift(&self, instance: &str) -> Option<DriftState> {
        let last = self.watch.last_sample(instance)?;
        Some(DriftState {
            local_fraction: last.local_fraction,
            locality_not_judged: last.locality_not_judged,
            drifting: last.drifting.iter().map(|k| k.name().to_string()).collect(),
            threads_out_of_place: last.threads_out_of_place,
            error: last.error,
        })
    }

    fn reloaded(&mut self, file: &pinctl_launch::ServiceFile) -> Vec<String> {
        let settings = WatchSettings::of(&file.config);
        let mut not_applied = Vec::new();
        if settings.watch.metrics_listen != self.metrics_listen {
            let to = |a: Option<std::net::SocketAddr>| a.map_or("off".into(), |a| a.to_string());
            not_applied.push(format!(
                "metrics-listen changed from {} to {}: the metrics socket moves when pinctl run \
                 is restarted; every other watch key is taken up now",
                to(self.metrics_listen),
                to(settings.watch.metrics_listen)
            ));
        }
        self.watch.reloaded(settings);
        not_applied
    }

    fn instances(&mut self, instances: &[Observed]) {
        if let Some(listener) = self.listener.take() {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => {
                    tokio::spawn(metrics::serve(l, self.server.clone()));
                }
                Err(e) => log_to(
                    LogTo::Supervisor,
                    "metrics-error",
                    &[("message", format!("cannot serve metrics: {e}").into())],
                ),
            }
        }
        let instances = instances
            .iter()
            .map(|o| SupervisedInstance {
                name: o.name.clone(),
                service: o.service.clone(),
                pid: o.pid,
                cgroup: o.cgroup.clone(),
                planned: o.placement.clone(),
                restarts: o.restarts,
            })
            .collect();
        if let Err(e) = self.watch.instances(instances) {
            log_to(
                LogTo::Supervisor,
                "watch-error",
                &[("message", format!("cannot start the watcher's thread: {e}").into())],
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
    f.push(("action", e.action.name().to_string()));
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
            i.instance,
            i.service,
            i.planned_cpus,
            i.planned_policy,
            i.planned_nodes,
            i.action.name()
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
        for r in &s.refused {
            writeln!(
                out,
                "  refused PID {}: {} (not sampled, re-pinned or moved)",
                r.pid, r.reason
            )?;
        }
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

fn refused_text(refused: &[pinctl_drift::sample::Refused]) -> String {
    let each: Vec<String> =
        refused.iter().map(|r| format!("refused PID {} ({})", r.pid, r.reason)).collect();
    each.join("; ")
}
