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
    let mut watcher =
        Watcher::new(Path::new("/"), targets(config, &plan), interval, Watermark::of(config));
    let stdout = io::stdout();
    if args.once {
        let report = watcher.cycle(Duration::ZERO, None);
        let mut out = io::BufWriter::new(stdout.lock());
        if args.json {
            serde_json::to_writer_pretty(&mut out, &report).context("writing to stdout")?;
            writeln!(out).context("writing to stdout")?;
        } else {
            render_once(&mut out, &report).context("writing to stdout")?;
        }
        out.flush().context("writing to stdout")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut metrics = Metrics::new();
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
            log(&args, "metrics", &[("listen", format!("http://{bound}/metrics"))]);
            rt.spawn(metrics::serve(listener, metrics.registry()));
            Some(rt)
        }
        None => None,
    };
    let mut alerts = AlertRunner::default();
    let mut control = LinuxControl::live();
    let mut clock = SystemClock::default();
    let mut status: BTreeMap<String, String> = BTreeMap::new();
    let started = Instant::now();
    let mut next = Duration::ZERO;
    log(
        &args,
        "watch",
        &[
            ("instances", watcher.targets.len().to_string()),
            ("interval_seconds", interval.as_secs_f64().to_string()),
        ],
    );
    loop {
        let report = watcher.cycle(started.elapsed(), Some((&mut control, &mut clock)));
        for n in &report.notices {
            log(&args, "notice", &[("message", n.clone())]);
        }
        for i in &report.instances {
            instance_status(&args, i, &mut status);
        }
        for e in &report.events {
            if e.action == "ignore" {
                continue;
            }
            if args.json {
                println!("{}", serde_json::json!({ "drift": e }));
            } else {
                log(&args, "drift", &event_fields(e));
            }
            if !e.alert {
                continue;
            }
            let target = watcher.targets.iter().find(|t| t.instance == e.instance);
            if let Some(argv) = target.and_then(|t| t.settings.alert_command.as_ref()) {
                let what = format!("{} {}", e.instance, e.kind.name());
                if let Err(err) = alerts.start(argv, &e.alert_env(), &what) {
                    log(
                        &args,
                        "alert-error",
                        &[
                            ("instance", e.instance.clone()),
                            ("message", format!("cannot start `{}`: {err}", argv[0])),
                        ],
                    );
                }
            }
        }
        for r in &report.rebalances {
            rebalance_line(&args, r);
            if r.blocked_by_full_node() {
                let target = watcher.targets.iter().find(|t| t.instance == r.instance);
                if let Some(argv) = target.and_then(|t| t.settings.alert_command.as_ref()) {
                    let env = vec![
                        ("PINCTL_INSTANCE".to_string(), r.instance.clone()),
                        ("PINCTL_DRIFT_KIND".to_string(), "rebalance-blocked".to_string()),
                        (
                            "PINCTL_DETAIL".to_string(),
                            "no planned node has the free memory to move pages back".to_string(),
                        ),
                    ];
                    if let Err(err) = alerts.start(argv, &env, &format!("{} rebalance", r.instance))
                    {
                        log(
                            &args,
                            "alert-error",
                            &[
                                ("instance", r.instance.clone()),
                                ("message", format!("cannot start `{}`: {err}", argv[0])),
                            ],
                        );
                    }
                }
            }
        }
        for problem in alerts.reap() {
            log(&args, "alert-error", &[("message", problem)]);
        }
        metrics.record(&report);
        next += interval;
        let now = started.elapsed();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            // A cycle longer than the interval: start the next one now, without catching up.
            next = now;
        }
    }
}

/// One log line: `pinctl watch: kind key=value ...` (values with blanks quoted), or a JSON
/// object with `"event": kind` under `--json`.
fn log(args: &WatchArgs, kind: &str, fields: &[(&str, String)]) {
    let line = if args.json {
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
    let mut out = io::stdout().lock();
    // A closed stdout must not stop the watcher: metrics and alerts go on.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
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

/// Logs an instance that appears or disappears (once per change, not every cycle).
fn instance_status(args: &WatchArgs, i: &InstanceReport, seen: &mut BTreeMap<String, String>) {
    let now = match (&i.sample, &i.error) {
        (Some(s), _) => format!("found pids={:?} source={}", s.pids, s.source.name()),
        (None, Some(e)) => format!("missing {e}"),
        (None, None) => "missing".to_string(),
    };
    if seen.get(&i.instance) == Some(&now) {
        return;
    }
    seen.insert(i.instance.clone(), now);
    let mut fields = vec![("instance", i.instance.clone())];
    match (&i.sample, &i.error) {
        (Some(s), _) => {
            fields.push(("status", "found".into()));
            fields.push(("pids", s.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")));
            fields.push(("source", s.source.name().into()));
        }
        (None, e) => {
            fields.push(("status", "missing".into()));
            fields.push(("reason", e.clone().unwrap_or_default()));
        }
    }
    log(args, "instance", &fields);
}

fn rebalance_line(args: &WatchArgs, r: &RebalanceReport) {
    if args.json {
        println!("{}", serde_json::json!({ "rebalance": r }));
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
        f.push(("seconds", format!("{:.3}", m.took.as_secs_f64())));
        f.push(("worst_batch_stall_ms", format!("{:.2}", m.worst_stall.as_secs_f64() * 1000.0)));
        f.push((
            "stop",
            serde_json::to_value(&m.stop)
                .map_or_else(|_| String::new(), |v| v["reason"].as_str().unwrap_or("").to_string()),
        ));
    }
    if let Some(e) = &r.error {
        f.push(("error", e.clone()));
    }
    log(args, "rebalance", &f);
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
