//! `pinctl check`: validates a service file against a topology (the live machine by default):
//! the file itself, each value against the machine, `near` entries, then whether a plan exists.
//! Prints every warning and the host's warnings on stdout with the verdict, errors on stderr
//! (as every command does), and exits 0 (usable) or 1.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::cmd::plan::prepare;
use crate::error::CmdResult;
use pinctl_launch::ExitStatus;
use pinctl_topology::text::{escaped, escaped_but_newlines};

/// Arguments of `pinctl check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The service file.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: PathBuf,
    /// Check against this topology instead of the live machine: a sysfs/procfs directory, a
    /// tarball of one, a `pinctl topology --json` snapshot, or an hwloc XML file.
    #[arg(long, value_name = "SRC")]
    topology: Option<PathBuf>,
}

pub(crate) fn run(args: CheckArgs) -> CmdResult {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let failed = ExitCode::from(ExitStatus::Failure.code());
    let prepared = match prepare(&args.config, args.topology.as_deref(), false)? {
        Ok(prepared) => prepared,
        Err(report) => {
            io::stderr().lock().write_all(report.as_bytes()).context("writing to stderr")?;
            return Ok(failed);
        }
    };
    let mut warnings = prepared.diagnostics.len();
    if !prepared.diagnostics.is_empty() {
        let text = pinctl_config::render_all(&prepared.diagnostics, Some(&args.config), false);
        writeln!(out, "{text}").context("writing to stdout")?;
    }
    for w in &prepared.loaded.topology.warnings {
        writeln!(out, "warning: host: {w}").context("writing to stdout")?;
        warnings += 1;
    }
    let topology = &prepared.loaded.topology;
    let code = match pinctl_plan::plan(topology, &prepared.config, &prepared.inputs) {
        Ok(plan) => {
            for w in &plan.warnings {
                writeln!(out, "warning: plan: {w}").context("writing to stdout")?;
                warnings += 1;
            }
            let used = plan
                .placements
                .iter()
                .fold(pinctl_topology::NodeSet::new(), |acc, p| acc.union(&p.nodes));
            writeln!(
                out,
                "ok: `{}` is valid for {}: {} instance{} on node{} {}{}",
                args.config.display(),
                prepared.loaded.source,
                plan.placements.len(),
                if plan.placements.len() == 1 { "" } else { "s" },
                if used.len() == 1 { "" } else { "s" },
                used,
                match warnings {
                    0 => String::new(),
                    1 => ", 1 warning".to_string(),
                    n => format!(", {n} warnings"),
                }
            )
            .context("writing to stdout")?;
            ExitCode::SUCCESS
        }
        Err(e) => {
            let config = escaped(&args.config.display().to_string());
            let message = escaped_but_newlines(&e.to_string());
            writeln!(
                io::stderr().lock(),
                "error: cannot place the services of `{config}`: {message}"
            )
            .context("writing to stderr")?;
            failed
        }
    };
    out.flush().context("writing to stdout")?;
    Ok(code)
}
