//! `pinctl fleet --tiup TOPOLOGY.yaml`: each captured host's TiUP instances planned as one
//! pinctl service file, and the topology written back with `numa_node`/`numa_cores` set
//! (docs/fleet.md, "TiUP"). All or nothing: an instance that cannot be placed, or a host
//! without a plan, is said with its reason and nothing is written.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use pinctl_fleet::HostCapture;
use pinctl_fleet::tiup::Prepared;
use pinctl_fleet::tiup::edit;
use pinctl_fleet::tiup::fill::{self, Filled, HostFill};
use pinctl_fleet::tiup::read;
use pinctl_fleet::tiup::services::Mapping;
use pinctl_topology::text::{escaped, escaped_but_newlines};

use super::FleetArgs;
use crate::error::{CmdResult, Error};

/// Largest topology read: TiUP's own files are a few KiB; 1,000 hosts of 10 instances with
/// their settings stay well under this.
const MAX_TOPOLOGY_BYTES: usize = 16 << 20;

pub(super) fn run(args: &FleetArgs, topology_path: &Path, hosts: &[HostCapture]) -> CmdResult {
    let text = read_text(topology_path, MAX_TOPOLOGY_BYTES)?;
    let topology = read::read(topology_path, &text).map_err(Error::failure)?;
    let mapping = match &args.config {
        Some(path) => Mapping::parse(path, &read_text(path, pinctl_config::MAX_CONFIG_BYTES)?)
            .map_err(Error::failure)?,
        None => Mapping::default(),
    };
    let prepared =
        pinctl_fleet::tiup::prepare(&topology, &mapping, hosts).map_err(Error::failure)?;
    let mut err = io::stderr().lock();
    say_what_is_left(&mut err, &prepared).context("writing to stderr")?;
    if let Some(dir) = &args.service_files {
        fill::write_service_files(dir, &prepared.hosts).map_err(Error::failure)?;
    }
    let Filled { wanted, refusals } =
        fill::fill(&prepared, args.strict, |host| say_host(&mut err, host))
            .context("writing to stderr")?;
    if !refusals.is_empty() {
        writeln!(
            err,
            "error: nothing written: {} instance{} or host{} cannot be placed:",
            refusals.len(),
            if refusals.len() == 1 { "" } else { "s" },
            if refusals.len() == 1 { "" } else { "s" }
        )
        .context("writing to stderr")?;
        for r in &refusals {
            writeln!(err, "  {}", escaped_but_newlines(r)).context("writing to stderr")?;
        }
        if args.service_files.is_none() {
            writeln!(err, "note: `--service-files DIR` writes each host's service file (`HOST.toml`) these point into")
                .context("writing to stderr")?;
        }
        return Ok(ExitCode::FAILURE);
    }
    let edited = edit::apply(&text, &wanted)
        .map_err(|e| Error::failure(anyhow::anyhow!("{}:{e}", topology_path.display())))?;
    pinctl_fleet::tiup::verify(&topology, &edited, &wanted).map_err(|e| {
        Error::failure(anyhow::anyhow!("{}: {e}; nothing written", topology_path.display()))
    })?;
    match &args.write {
        Some(dest) => pinctl_capture::write_atomically(dest, edited.as_bytes())
            .with_context(|| format!("cannot write `{}`", dest.display()))?,
        None => {
            let name = topology_path.display().to_string();
            let diff = similar::TextDiff::from_lines(&text, &edited);
            let mut out = io::stdout().lock();
            write!(out, "{}", diff.unified_diff().header(&name, &name))
                .context("writing to stdout")?;
            out.flush().context("writing to stdout")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A regular file's text, at most `limit` bytes.
fn read_text(path: &Path, limit: usize) -> Result<String, Error> {
    let bytes = pinctl_trust::read_regular(path, limit)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    String::from_utf8(bytes)
        .with_context(|| format!("`{}` is not UTF-8", path.display()))
        .map_err(Error::failure)
}

/// Hosts left as they are, sections not placed, captures of hosts the topology lacks, drives
/// not known: on stderr, before the plan.
fn say_what_is_left(err: &mut impl Write, p: &Prepared<'_>) -> io::Result<()> {
    let listed = |items: &[(String, usize)]| {
        items
            .iter()
            .map(|(k, n)| format!("{k} ({n} instance{})", if *n == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !p.uncaptured.is_empty() {
        writeln!(err, "left as they are (no capture): {}", escaped(&listed(&p.uncaptured)))?;
    }
    if !p.not_placed.is_empty() {
        writeln!(
            err,
            "left as they are (TiUP has no numa_node for them): {}",
            escaped(&listed(&p.not_placed))
        )?;
    }
    if !p.unused_captures.is_empty() {
        writeln!(
            err,
            "warning: captures of hosts the topology does not have: {}",
            escaped(&p.unused_captures.join(", "))
        )?;
    }
    for note in &p.notes {
        writeln!(
            err,
            "note: {} (set it in the mapping's [data-dirs]; placed without it)",
            escaped(note)
        )?;
    }
    Ok(())
}

/// A line per planned host on `err`: its instances and their nodes, then the rules its plan
/// could not keep.
fn say_host(err: &mut impl Write, host: &HostFill<'_>) -> io::Result<()> {
    let Some(placed) = &host.placed else { return Ok(()) };
    let line: Vec<String> = placed
        .iter()
        .map(|(p, f)| match &f.cores {
            Some(c) => format!("{} node {} cores {c}", p.name, f.node),
            None => format!("{} node {}", p.name, f.node),
        })
        .collect();
    writeln!(err, "{}: {}", host.summary.host, escaped(&line.join(", ")))?;
    for b in &host.summary.broken {
        writeln!(err, "  warning: {}", escaped(b))?;
    }
    Ok(())
}
