//! `pinctl check`: validates a service file against a topology (the live machine by default):
//! the file itself, each value against the machine, `near` entries, whether its programs, users
//! and groups exist (on the live machine), then whether a plan exists.
//! Prints every warning and the host's warnings on stdout with the verdict, errors on stderr
//! (as every command does), and exits 0 (usable) or 1.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::error::CmdResult;
use pinctl_launch::{ExitStatus, LaunchError};

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
    let asked = [args.config.clone()];
    let host = match super::host::load(&asked, args.topology.as_deref(), false) {
        Ok(host) => host,
        Err(
            e @ crate::error::Error::Launch(LaunchError::Config(_) | LaunchError::Rejected { .. }),
        ) => {
            // A file that is wrong is `check`'s answer, not a failure to run it.
            if let Some(report) = e.message() {
                io::stderr().lock().write_all(report.as_bytes()).context("writing to stderr")?;
            }
            return Ok(failed);
        }
        Err(e) => return Err(e),
    };
    let file = host.own();
    // On the live machine: what would keep instances from starting (a missing program, user
    // or group) is an error, said as every error in the file is.
    let unstartable = file.unstartable();
    if !unstartable.is_empty() {
        let report = pinctl_config::render_all(&unstartable, Some(&args.config), false);
        writeln!(io::stderr().lock(), "{report}").context("writing to stderr")?;
        return Ok(failed);
    }
    let mut warnings = file.diagnostics.len();
    if !file.diagnostics.is_empty() {
        let text = pinctl_config::render_all(&file.diagnostics, Some(&args.config), false);
        writeln!(out, "{text}").context("writing to stdout")?;
    }
    for w in file.loaded.topology.warnings.iter().chain(&host.notes) {
        writeln!(out, "warning: host: {w}").context("writing to stdout")?;
        warnings += 1;
    }
    let others = host.others();
    if !others.is_empty() {
        writeln!(out, "planned with the host's other files: {}", others.join(", "))
            .context("writing to stdout")?;
    }
    let code = match host.plan() {
        Ok((_, plan)) if args.topology.is_none() && !outputs_usable(&mut out, file, &plan)? => {
            failed
        }
        Ok((_, plan)) => {
            passed(&mut out, &args.config, file, &plan, warnings).context("writing to stdout")?;
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let Some(message) = e.message() {
                writeln!(io::stderr().lock(), "{message}").context("writing to stderr")?;
            }
            failed
        }
    };
    out.flush().context("writing to stdout")?;
    Ok(code)
}

/// The plan's warnings and the verdict: `ok: FILE is valid for SOURCE: N instances on nodes
/// LIST`, with the number of warnings said before it (`warnings`) and here.
fn passed(
    out: &mut impl Write,
    config: &std::path::Path,
    file: &pinctl_launch::ServiceFile,
    plan: &pinctl_plan::Plan,
    mut warnings: usize,
) -> io::Result<()> {
    for w in &plan.warnings {
        writeln!(out, "warning: plan: {w}")?;
        warnings += 1;
    }
    let used = plan
        .placements
        .iter()
        .fold(pinctl_topology::NodeSet::new(), |acc, p| acc.union(&p.placement.nodes));
    let warned = match warnings {
        0 => String::new(),
        1 => ", 1 warning".to_string(),
        n => format!(", {n} warnings"),
    };
    writeln!(
        out,
        "ok: `{}` is valid for {}: {} instance{} on node{} {used}{warned}",
        config.display(),
        file.loaded.source,
        plan.placements.len(),
        if plan.placements.len() == 1 { "" } else { "s" },
        if used.len() == 1 { "" } else { "s" },
    )
}

/// On the live machine: says of every instance's `output` file who `pinctl run` will open it
/// as, with the rule `run` uses (`pinctl_supervise::output::access`); `false` when one cannot
/// be opened (said on stderr).
fn outputs_usable(
    out: &mut impl Write,
    file: &pinctl_launch::ServiceFile,
    plan: &pinctl_plan::Plan,
) -> anyhow::Result<bool> {
    use pinctl_supervise::output::access;
    let mut usable = true;
    for spec in pinctl_supervise::launch::specs(&file.config, plan) {
        let Some(path) = &spec.output else { continue };
        let looked = pinctl_supervise::launch::output_owner(&spec)
            .map_err(|f| f.reason)
            .and_then(|owner| access::check(path, owner.as_ref()));
        match looked {
            Ok(how) => writeln!(out, "{}: output `{}`: {how}", spec.name, path.display())
                .context("writing to stdout")?,
            Err(why) => {
                usable = false;
                writeln!(
                    io::stderr().lock(),
                    "error: {}: output `{}`: {why}",
                    spec.name,
                    path.display()
                )
                .context("writing to stderr")?;
            }
        }
    }
    Ok(usable)
}
