//! `pinctl run -c FILE`: plans the file as `pinctl plan` does and hands every instance to the
//! supervisor (crates/pinctl-supervise). The async runtime is built inside the supervisor's
//! `run`, so no other command loads it.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use pinctl_drift::supervised::SupervisedWatch;
use pinctl_supervise::observe::Observer;
use pinctl_supervise::{Options, Outcome, Replan};
use pinctl_topology::Placement;

use crate::error::{CmdResult, Error};

/// Arguments of `pinctl run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The service file.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: PathBuf,
    /// Refuse to start when the best plan breaks a soft rule (as `pinctl plan --strict`).
    #[arg(long)]
    strict: bool,
    /// The control socket (default: `[host] socket`, else /run/pinctl/NAME.sock, NAME being
    /// `[host] name` or the service file's name without `.toml`).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The state file used for adoption (default: `[host] state-file`, else
    /// /run/pinctl/NAME.state.json).
    #[arg(long, value_name = "PATH")]
    state_file: Option<PathBuf>,
    /// Plan against this topology instead of the live machine.
    #[arg(long, value_name = "SRC", hide = true)]
    topology: Option<PathBuf>,
    /// Testing only: start instances without their placement (with a --topology larger
    /// than this machine).
    #[arg(long, hide = true)]
    unpinned: bool,
}

/// Plans the host of the file (keeping the instances in `running` where they are when it can:
/// a reload; never moving the running instances of the host's other files): the instance
/// specs of the file's part, the file, and what the file and the plan warn about, one line
/// each, in `pinctl plan`'s words, with what interrupt steering needs of the plan; or the
/// rendered report of what is wrong (the same diagnostics `pinctl plan` prints).
fn replan(
    config_path: &Path,
    topology: Option<&Path>,
    strict: bool,
    running: &BTreeMap<String, Placement>,
) -> Result<Replan, String> {
    let report = |e: Error| e.message().map(|m| m + "\n").unwrap_or_default();
    let asked = [config_path.to_path_buf()];
    let host = super::host::load(&asked, topology, strict).map_err(report)?;
    let held = held_by_others(&host);
    let (_, plan) = host.plan_keeping(running, &held).map_err(report)?;
    let own = host.own();
    let mut warnings: Vec<String> = own.diagnostics.iter().map(|d| d.one_line()).collect();
    warnings.extend(host.notes.iter().map(|n| format!("host: {n}")));
    warnings.extend(plan.warnings.iter().map(|w| format!("plan: {w}")));
    let specs = pinctl_supervise::launch::specs(&own.config, &plan);
    let file = host.host.files.into_iter().find(|f| f.config.path == config_path);
    Ok(Replan { specs, file: file.expect("the file asked for is the host's"), warnings })
}

/// Where the running instances of the host's other files are, from their supervisors' state
/// files (trusted as adoption trusts them; one that cannot be read holds nothing).
fn held_by_others(host: &super::host::LoadedHost) -> BTreeMap<String, Placement> {
    let mut held = BTreeMap::new();
    for file in host.host.files.iter().filter(|f| !host.is_asked(f)) {
        let Ok(paths) = file.config.supervisor() else { continue };
        let Ok(Some(state)) = pinctl_supervise::statefile::read(&paths.state_file) else {
            continue;
        };
        for entry in state.instances {
            if file.config.instance(&entry.name).is_some() {
                held.insert(entry.name, entry.spec.placement);
            }
        }
    }
    held
}

fn steering_log(line: &str) {
    pinctl_supervise::relay::log_line(&format!("pinctl: irq: {line}"));
}

pub(crate) fn run(args: RunArgs) -> CmdResult {
    let Replan { specs, file, warnings } =
        match replan(&args.config, args.topology.as_deref(), args.strict, &BTreeMap::new()) {
            Ok(ok) => ok,
            Err(report) => {
                let _ = std::io::stderr().lock().write_all(report.as_bytes());
                return Err(Error::Reported(pinctl_launch::ExitStatus::Failure));
            }
        };
    // What `pinctl plan` would warn about, said once at start (a reload says its own).
    for w in &warnings {
        pinctl_supervise::relay::log_line(&format!("pinctl: warning: {w}"));
    }
    let config = &file.config;
    let supervisor = config.supervisor().map_err(|e| Error::failure(anyhow::anyhow!(e)))?;
    let options = Options {
        name: supervisor.name,
        socket: args.socket.unwrap_or(supervisor.socket),
        legacy_state_file: supervisor.legacy_state_file.filter(|_| args.state_file.is_none()),
        state_file: args.state_file.unwrap_or(supervisor.state_file),
        unpinned: args.unpinned,
        config: Some(std::path::absolute(&args.config).unwrap_or_else(|_| args.config.clone())),
    };
    // One supervisor per state file, and the lock says so first: before the metrics port is
    // bound or the interrupt record read, a second `pinctl run` of this file is refused by
    // the lock, naming the PID that holds it.
    let lock = pinctl_supervise::statefile::StateLock::acquire(&options.state_file)
        .map_err(Error::failure)?;
    // The drift watcher samples the instances where the plan put them on this machine: not
    // when they run unpinned or were planned for another topology (tests only).
    let mut observers: Vec<Box<dyn Observer>> = Vec::new();
    if !args.unpinned && args.topology.is_none() {
        let lines = Box::new(super::render::LogTo::Supervisor);
        let watch = SupervisedWatch::new(config, lines).map_err(Error::failure)?;
        observers.push(Box::new(watch));
    }
    // Interrupts are steered on this machine for the plan (docs/irq.md): not for instances
    // run unpinned or planned for another topology (tests only). The record of what it
    // changes sits beside the state file.
    let steering = if args.unpinned || args.topology.is_some() {
        None
    } else {
        let record = pinctl_irq::record::path_for(&options.state_file, &options.name);
        Some(pinctl_irq::observer::start(
            pinctl_irq::observer::Planned::of(&file),
            &record,
            config.watch.interval,
            Box::new(steering_log),
        ))
    };
    let (path, topology, strict) = (args.config.clone(), args.topology.clone(), args.strict);
    let planner = Box::new(move |running: &BTreeMap<String, Placement>| {
        replan(&path, topology.as_deref(), strict, running)
    });
    let steering = steering.map(|(observer, steering)| {
        observers.push(Box::new(observer));
        steering
    });
    let outcome =
        pinctl_supervise::run_observed(lock, options, specs, planner, Some(Box::new(observers)));
    // Stopped: every interrupt, queue and irqbalance setting steering changed is put back.
    // Detached: left as it is, with its record, for the next supervisor to take over.
    if let Some(s) = steering {
        s.finish(matches!(outcome, Ok(Outcome::Stopped { .. })), &steering_log);
    }
    match outcome {
        Ok(Outcome::Stopped { clean: true } | Outcome::Detached) => Ok(ExitCode::SUCCESS),
        Ok(Outcome::Stopped { clean: false }) => Err(Error::failure(anyhow::anyhow!(
            "stopped, but some instance needed KILL after its stop-timeout"
        ))),
        Err(e) => Err(Error::failure(e)),
    }
}
