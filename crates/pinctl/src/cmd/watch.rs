//! `pinctl watch -c FILE [--once] [--json]`: samples every planned instance (where its memory
//! and threads are) and reports drift. `--once` prints one sample of each instance, like
//! `numastat -p` for the planned services plus what is wrong with them; without it, the drift
//! watch loop (pinctl-drift's `WatchLoop`) runs at `watch-interval` and this module renders
//! what it says: one line per drift start and end, instances found or lost, rebalances.
//! Under `pinctl run` the same loop runs on a thread of its own (pinctl-drift's
//! `SupervisedWatch`, an observer of the supervisor); its lines go through [`super::render::LogTo`] too.
//!
//! The tokio runtime (for the metrics server) is built here and only here, and only when
//! metrics are served: `pinctl exec` never loads one.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use pinctl_drift::metrics::{Listening, Metrics};
use pinctl_drift::read::Supervised;
use pinctl_drift::rebalance::{LinuxControl, MonotonicClock};
use pinctl_drift::watch::{CheckStatus, Target, Watcher, system_uid, targets};
use pinctl_drift::watch_loop::{Said, WatchLoop, WatchSettings};

use crate::error::{CmdResult, Error};

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
    let running = match pinctl_supervise::client::instances(&socket) {
        Ok(running) => running,
        Err(e) => {
            let why = crate::error::Error::from(e).message().unwrap_or_default();
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
        pinctl_drift::text::once(&mut out, &report).context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::from(report.check() as u8))
}

/// The watch loop: a cycle every `watch-interval` until stopped.
fn watch(args: WatchArgs) -> CmdResult {
    let (settings, watcher) = watcher_of(&args)?;
    let listening =
        settings.watch.metrics_listen.map(Listening::bind).transpose().map_err(Error::failure)?;
    let mut watching = WatchLoop::new(
        watcher,
        Metrics::new(),
        Box::new(LinuxControl::live()),
        MonotonicClock::default(),
        Box::new(super::render::LogTo::Stdout { json: args.json }),
    );
    // The runtime lives as long as the loop; the server runs on its worker thread.
    let _runtime = match listening {
        Some(listening) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("starting the metrics server's runtime")?;
            watching.say(Said::Metrics { listen: listening.addr });
            let server = watching.metrics.server();
            rt.block_on(async { listening.serve(server) }).context("serving metrics")?;
            Some(rt)
        }
        None => None,
    };
    let instances = watching.watcher.targets.len();
    watching.say(Said::Watching { instances, interval: settings.watch.interval });
    watching.run_forever()
}
