//! The fleet loop: each host's capture loaded, its service file checked against it and
//! planned, then handed to the caller and dropped before more hosts are loaded. Hosts are
//! planned on a few threads in small batches; results come back in the order of the hosts.

use std::num::NonZeroUsize;

use pinctl_capture::{SourceError, load_topology};
use pinctl_config::Config;
use pinctl_launch::{LaunchError, ServiceFile};
use pinctl_plan::Plan;
use pinctl_sysfs::TopologySource;

use crate::hosts::HostCapture;

/// Why one host has no plan. The rest of the fleet is planned all the same.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Its capture could not be read.
    #[error("cannot read its capture: {0}")]
    Capture(#[from] SourceError),
    /// Its service file does not fit it, or no placement keeps every hard rule.
    #[error("{}", launch_text(.0))]
    Plan(Box<LaunchError>),
}

/// A launch error with its causes on one line (`plan of x.toml: tikv-2 needs ...`).
fn launch_text(e: &LaunchError) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// One line of the fleet's summary: how many instances a host got, which soft rules its plan
/// breaks (the plan's warnings), or why it has no plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostSummary {
    pub host: String,
    pub instances: usize,
    /// What the file, checked against this host, and the plan warn of: rules not kept,
    /// `near` entries that name no device of the host.
    pub broken: Vec<String>,
    /// Why the host has no plan; `None` when it has one.
    pub refused: Option<String>,
}

impl HostSummary {
    /// The summary of `host`'s outcome.
    pub fn of(host: &str, outcome: &Result<(ServiceFile, Plan), HostError>) -> HostSummary {
        match outcome {
            Ok((file, plan)) => {
                // The file's own warnings are the same on every host; those after them come
                // from checking it against this host (a `near` device it lacks, no route).
                let on_host = file.diagnostics.iter().skip(file.config.warnings.len());
                let mut broken: Vec<String> = on_host.map(|d| d.message.clone()).collect();
                broken.extend(plan.warnings.iter().cloned());
                HostSummary {
                    host: host.to_string(),
                    instances: plan.placements.len(),
                    broken,
                    refused: None,
                }
            }
            Err(e) => HostSummary {
                host: host.to_string(),
                instances: 0,
                broken: Vec::new(),
                refused: Some(e.to_string()),
            },
        }
    }
}

/// Plans `host` on its capture as `pinctl plan -c FILE --topology CAPTURE` would.
pub fn plan_host(
    host: &HostCapture,
    config: &Config,
    strict: bool,
) -> Result<(ServiceFile, Plan), HostError> {
    let source = TopologySource::from_arg(Some(&host.capture)).map_err(SourceError::from)?;
    let loaded = load_topology(&source)?;
    let file = ServiceFile::check(config.clone(), loaded, strict)
        .map_err(|e| HostError::Plan(Box::new(e)))?;
    let plan = file.plan().map_err(|e| HostError::Plan(Box::new(e)))?;
    Ok((file, plan))
}

/// Plans every host of `jobs` (a host and the service file it runs) and gives each outcome to
/// `per_host` on a worker thread, whose answer `deliver` receives on this thread in the order
/// of `jobs`. At most a few batches' worth of hosts are in memory at once: a host's topology
/// and plan are dropped as soon as `per_host` has turned them into its (smaller) answer.
/// Stops at the first error of `deliver` (its output failed), which it returns.
pub fn plan_hosts<R, E>(
    jobs: &[(HostCapture, &Config)],
    strict: bool,
    per_host: impl Fn(&HostCapture, Result<(ServiceFile, Plan), HostError>) -> R + Sync,
    mut deliver: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E>
where
    R: Send,
{
    let workers = std::thread::available_parallelism().map_or(1, NonZeroUsize::get).min(16);
    // Batches a few times the workers long keep the threads busy while bounding what waits
    // for delivery.
    for batch in jobs.chunks(workers * 4) {
        let answers = answers_of(batch, workers, strict, &per_host);
        for answer in answers {
            deliver(answer)?;
        }
    }
    Ok(())
}

/// `per_host` of each job of `batch`, computed on `workers` threads, in the batch's order.
fn answers_of<R: Send>(
    batch: &[(HostCapture, &Config)],
    workers: usize,
    strict: bool,
    per_host: &(impl Fn(&HostCapture, Result<(ServiceFile, Plan), HostError>) -> R + Sync),
) -> Vec<R> {
    let answer =
        |(host, config): &(HostCapture, &Config)| per_host(host, plan_host(host, config, strict));
    if workers == 1 || batch.len() == 1 {
        return batch.iter().map(answer).collect();
    }
    let share = batch.len().div_ceil(workers);
    std::thread::scope(|scope| {
        let running: Vec<_> = batch
            .chunks(share)
            .map(|part| scope.spawn(move || part.iter().map(answer).collect::<Vec<R>>()))
            .collect();
        running
            .into_iter()
            .flat_map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}
