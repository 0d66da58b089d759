//! TiUP's cluster topology, filled in with pinctl's plan (docs/fleet.md, "TiUP"): read
//! ([`read`]), each host's instances turned into a pinctl service file by a short table of
//! components ([`services`]), and the plan written back into `numa_node`/`numa_cores` by a
//! line editor that keeps every other byte ([`edit`]).

pub mod edit;
pub mod fill;
pub mod read;
pub mod services;

use std::path::PathBuf;

use pinctl_config::Config;

use crate::hosts::HostCapture;
use read::{Instance, TiupTopology};
use services::{Mapping, Planned};

/// A host of the topology that has a capture: its service file, parsed, and its instances.
#[derive(Debug)]
pub struct TiupHost<'a> {
    pub capture: HostCapture,
    /// The generated service file (docs/fleet.md shows one).
    pub text: String,
    pub config: Config,
    pub instances: Vec<Planned<'a>>,
}

/// The topology's hosts sorted out: those to plan, those without a capture (left as they
/// are), sections pinctl cannot place, and what the plan will lack (drives not known).
#[derive(Debug, Default)]
pub struct Prepared<'a> {
    pub hosts: Vec<TiupHost<'a>>,
    /// Hosts with no capture, and how many instances each has.
    pub uncaptured: Vec<(String, usize)>,
    /// Sections whose component TiUP gives no `numa_node` (`grafana_servers`), with their
    /// instance counts.
    pub not_placed: Vec<(String, usize)>,
    /// Captures given for hosts the topology does not have.
    pub unused_captures: Vec<String>,
    pub notes: Vec<String>,
}

/// Why the topology's hosts cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The generated service file of a host does not parse: a mapping file's setting.
    #[error("the service file for host `{host}` (from the mapping) is not valid:\n{rendered}")]
    ServiceFile { host: String, rendered: String },
}

/// Sorts `topology`'s instances by host (in the order hosts first appear) and builds each
/// captured host's service file.
pub fn prepare<'a>(
    topology: &'a TiupTopology,
    mapping: &Mapping,
    captures: &[HostCapture],
) -> Result<Prepared<'a>, PrepareError> {
    let mut prepared = Prepared::default();
    let mut by_host: Vec<(&str, Vec<Planned<'a>>)> = Vec::new();
    for instance in &topology.instances {
        let Some(planned) = services::planned(topology, instance) else {
            count(&mut prepared.not_placed, &instance.section);
            continue;
        };
        let host = instance.host.value.as_str();
        match by_host.iter_mut().find(|(h, _)| *h == host) {
            Some((_, list)) => list.push(planned),
            None => by_host.push((host, vec![planned])),
        }
    }
    for (host, instances) in by_host {
        let Some(capture) = captures.iter().find(|c| c.host == host) else {
            prepared.uncaptured.push((host.to_string(), instances.len()));
            continue;
        };
        let (text, unknown) = services::service_file(host, &instances, mapping, &topology.path);
        prepared.notes.extend(unknown.into_iter().map(|u| format!("{host}: {u}")));
        let path = PathBuf::from(format!("{host}.toml"));
        let config = pinctl_config::parse(&path, &text).map_err(|e| PrepareError::ServiceFile {
            host: host.to_string(),
            rendered: e.render(false),
        })?;
        prepared.hosts.push(TiupHost { capture: capture.clone(), text, config, instances });
    }
    prepared.unused_captures = captures
        .iter()
        .filter(|c| !topology.instances.iter().any(|i| i.host.value == c.host))
        .map(|c| c.host.clone())
        .collect();
    Ok(prepared)
}

fn count(list: &mut Vec<(String, usize)>, key: &str) {
    match list.iter_mut().find(|(k, _)| k == key) {
        Some((_, n)) => *n += 1,
        None => list.push((key.to_string(), 1)),
    }
}

/// Checks that `edited` is `original` with only the NUMA keys of `wanted` changed: the same
/// instances, every other scalar the same, and the NUMA keys as wanted (read back by the YAML
/// parser, not by the editor).
pub fn verify(
    original: &TiupTopology,
    edited_text: &str,
    wanted: &[(&Instance, edit::NumaFields)],
) -> Result<(), String> {
    let edited = read::read(&original.path, edited_text)
        .map_err(|e| format!("the edited topology does not read back: {e}"))?;
    if edited.instances.len() != original.instances.len() {
        return Err("the edited topology has another number of instances".into());
    }
    let numa = |k: &str| k == "numa_node" || k == "numa_cores";
    for (before, after) in original.instances.iter().zip(&edited.instances) {
        let kept = |i: &Instance| {
            i.fields
                .iter()
                .filter(|(k, _)| !numa(k))
                .map(|(k, f)| (k.clone(), f.value.clone()))
                .collect::<Vec<_>>()
        };
        if (&before.section, &before.host.value, kept(before))
            != (&after.section, &after.host.value, kept(after))
        {
            return Err(format!(
                "line {}: the edit changed more than `numa_node`/`numa_cores`",
                after.host.line
            ));
        }
        let want = wanted.iter().find(|(i, _)| std::ptr::eq(*i, before)).map(|(_, w)| w);
        let got = (
            after.get("numa_node").map(|f| f.value.as_str()),
            after.get("numa_cores").map(|f| f.value.as_str()),
        );
        let expected = match want {
            Some(w) => (Some(w.node.as_str()), w.cores.as_deref()),
            None => (
                before.get("numa_node").map(|f| f.value.as_str()),
                before.get("numa_cores").map(|f| f.value.as_str()),
            ),
        };
        if got != expected {
            return Err(format!(
                "line {}: reads back as {got:?}, not {expected:?}",
                after.host.line
            ));
        }
    }
    Ok(())
}
