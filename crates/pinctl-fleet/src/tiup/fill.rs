//! Each captured host of a TiUP topology planned, and every instance given the `numa_node`
//! and `numa_cores` its placement means, or the reason it cannot have them. All or nothing:
//! the caller writes the topology only when no instance or host was refused.

use pinctl_config::Config;

use super::Prepared;
use super::edit::NumaFields;
use super::read::Instance;
use super::services::{self, Planned};
use crate::{HostCapture, HostSummary};

/// One planned host, as it is delivered: its summary and the instances given keys (`None`
/// when the host has no plan).
#[derive(Debug)]
pub struct HostFill<'t> {
    pub summary: HostSummary,
    pub placed: Option<Vec<(&'t Planned<'t>, NumaFields)>>,
}

/// What the topology gets: each instance's keys, and the reasons (`HOST: why`) of the
/// instances or hosts that cannot have them.
#[derive(Debug, Default)]
pub struct Filled<'t> {
    pub wanted: Vec<(&'t Instance, NumaFields)>,
    pub refusals: Vec<String>,
}

/// Plans each host of `prepared` on its capture and chooses its instances' keys; `each` hears
/// every host in the topology's order as it is planned. Stops at the first error of `each`.
pub fn fill<'t, E>(
    prepared: &'t Prepared<'t>,
    strict: bool,
    mut each: impl FnMut(&HostFill<'t>) -> Result<(), E>,
) -> Result<Filled<'t>, E> {
    let jobs: Vec<(HostCapture, &Config)> =
        prepared.hosts.iter().map(|h| (h.capture.clone(), &h.config)).collect();
    // On the worker thread: the keys of each instance, or why the host has no plan.
    let per_host = |host: &HostCapture, outcome| {
        let summary = HostSummary::of(&host.host, &outcome);
        let tiup_host =
            prepared.hosts.iter().find(|h| h.capture.host == host.host).expect("a job per host");
        let fields: Result<Vec<Result<NumaFields, String>>, String> = match &outcome {
            Ok((file, plan)) => Ok(tiup_host
                .instances
                .iter()
                .map(|p| services::numa_fields(p, plan, &file.loaded.topology))
                .collect()),
            Err(e) => Err(e.to_string()),
        };
        (summary, fields)
    };
    let mut filled = Filled::default();
    let mut hosts = prepared.hosts.iter();
    crate::plan_hosts(&jobs, strict, per_host, |(summary, fields)| {
        let tiup_host = hosts.next().expect("answers come in the order of the hosts");
        let placed = match fields {
            Err(reason) => {
                filled.refusals.push(format!("{}: {reason}", summary.host));
                None
            }
            Ok(fields) => Some(filled.take(&summary.host, &tiup_host.instances, fields)),
        };
        each(&HostFill { summary, placed })
    })?;
    Ok(filled)
}

impl<'t> Filled<'t> {
    /// The keys of one host's instances taken into the topology's, the refused said; the
    /// instances placed, for the caller to show.
    fn take(
        &mut self,
        host: &str,
        instances: &'t [Planned<'t>],
        fields: Vec<Result<NumaFields, String>>,
    ) -> Vec<(&'t Planned<'t>, NumaFields)> {
        let mut placed = Vec::new();
        for (p, f) in instances.iter().zip(fields) {
            match f {
                Ok(f) => {
                    self.wanted.push((p.instance, f.clone()));
                    placed.push((p, f));
                }
                Err(reason) => self.refusals.push(format!("{host}: {reason}")),
            }
        }
        placed
    }
}

/// Writes each host's service file to `dir/HOST.toml` (`--service-files`), to check or plan
/// it alone with `pinctl plan -c`.
pub fn write_service_files(
    dir: &std::path::Path,
    hosts: &[super::TiupHost<'_>],
) -> Result<(), WriteError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| WriteError::CreateDir { path: dir.to_path_buf(), source })?;
    for h in hosts {
        let path = dir.join(format!("{}.toml", h.capture.host));
        pinctl_capture::write_atomically(&path, h.text.as_bytes())
            .map_err(|source| WriteError::Write { path, source })?;
    }
    Ok(())
}

/// Why the hosts' service files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot create `{}`", path.display())]
    CreateDir { path: std::path::PathBuf, source: std::io::Error },
    #[error("cannot write `{}`", path.display())]
    Write { path: std::path::PathBuf, source: std::io::Error },
}
