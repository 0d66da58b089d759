//! `pinctl fleet`: many hosts planned offline in one run, each on its own capture, as
//! `pinctl plan -c FILE --topology CAPTURE` plans one (docs/fleet.md): per host its
//! placements and reasons, then a summary; or `--json` keyed by host, for a configuration
//! manager to take as host variables. Output is written host by host as each is planned.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use pinctl_config::Config;
use pinctl_fleet::{HostCapture, HostDocument, HostError, HostSummary};
use pinctl_launch::ServiceFile;
use pinctl_plan::Plan;
use pinctl_topology::text::{escaped, escaped_but_newlines};

use crate::error::{CmdResult, Error};

mod tiup;

/// Arguments of `pinctl fleet`.
#[derive(Debug, clap::Args)]
pub(crate) struct FleetArgs {
    /// The service file every host runs; with `--tiup`, the mapping file that overrides the
    /// settings of TiUP's components (docs/fleet.md).
    #[arg(short = 'c', long = "config", value_name = "FILE", required_unless_present = "tiup")]
    config: Option<PathBuf>,
    /// A host and its capture (`pinctl topology --capture`, a `--json` snapshot, hwloc XML):
    /// `HOST=CAPTURE`, as often as there are hosts.
    #[arg(long = "topology", value_name = "HOST=CAPTURE")]
    topologies: Vec<String>,
    /// A folder of captures named after their hosts (`db-1.json`, `10.0.1.16.tar.gz`, a sysfs
    /// tree `db-2/`), besides or instead of `--topology`.
    #[arg(long, value_name = "DIR")]
    captures: Option<PathBuf>,
    /// Print the fleet's plan as JSON keyed by host (docs/fleet.md).
    #[arg(long)]
    json: bool,
    /// A host whose best plan breaks a soft rule has no plan (as `pinctl plan --strict`).
    #[arg(long)]
    strict: bool,
    /// A TiUP cluster topology: plan each host's instances and fill in their `numa_node` and
    /// `numa_cores`, every other byte kept; a unified diff on stdout unless `--write`.
    #[arg(long, value_name = "TOPOLOGY.yaml", conflicts_with = "json")]
    tiup: Option<PathBuf>,
    /// With `--tiup`: write the filled-in topology to FILE (whole or not at all; it may be
    /// the topology itself) instead of printing a diff.
    #[arg(long, value_name = "FILE", requires = "tiup")]
    write: Option<PathBuf>,
    /// With `--tiup`: also write each planned host's service file to DIR/HOST.toml, to check
    /// or plan it alone with `pinctl plan -c`.
    #[arg(long, value_name = "DIR", requires = "tiup")]
    service_files: Option<PathBuf>,
}

pub(crate) fn run(args: FleetArgs) -> CmdResult {
    let hosts = hosts_of(&args.topologies, args.captures.as_deref())?;
    if let Some(topology) = &args.tiup {
        return tiup::run(&args, topology, &hosts);
    }
    let Some(config_path) = &args.config else {
        return Err(Error::usage("`-c FILE` is needed without `--tiup`"));
    };
    let config = pinctl_launch::load_config(config_path)?;
    let jobs: Vec<(HostCapture, &Config)> = hosts.into_iter().map(|h| (h, &config)).collect();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let summaries =
        if args.json { json(&mut out, &jobs, &args)? } else { text(&mut out, &jobs, &args)? };
    out.flush().context("writing to stdout")?;
    Ok(if summaries.iter().any(|s| s.refused.is_some()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The hosts of `--topology` and `--captures`, each once.
pub(crate) fn hosts_of(args: &[String], dir: Option<&Path>) -> Result<Vec<HostCapture>, Error> {
    let mut hosts = Vec::new();
    for arg in args {
        hosts.push(pinctl_fleet::host_capture(arg).map_err(Error::usage)?);
    }
    if let Some(dir) = dir {
        hosts.extend(pinctl_fleet::captures_in(dir).map_err(Error::failure)?);
    }
    pinctl_fleet::refuse_twice(&hosts).map_err(Error::usage)?;
    if hosts.is_empty() {
        return Err(Error::usage(
            "no host to plan: give `--topology HOST=CAPTURE` or `--captures DIR`",
        ));
    }
    Ok(hosts)
}

/// Each host's block as `pinctl plan` prints it, under a `host NAME` line, then the summary.
fn text(
    out: &mut impl Write,
    jobs: &[(HostCapture, &Config)],
    args: &FleetArgs,
) -> Result<Vec<HostSummary>, Error> {
    let per_host = |host: &HostCapture, outcome: Result<(ServiceFile, Plan), HostError>| {
        let mut block =
            format!("== host {} ({})\n", host.host, escaped(&host.capture.display().to_string()))
                .into_bytes();
        match &outcome {
            Ok((file, plan)) => {
                let landing = pinctl_irq::landing::of_plan(file, plan);
                let files = [file.config.path.clone()];
                let of = super::render::plan::PlanOf {
                    files: &files,
                    loaded: &file.loaded,
                    others: Vec::new(),
                    supervisor: &|_: &str| String::new(),
                };
                let _ = super::render::plan::render(&mut block, plan, &of, &landing, false);
                // What `pinctl plan` says on stderr about the file on this host.
                for d in &file.diagnostics {
                    let line = escaped(&d.one_line());
                    block.extend(format!("{}: {line}\n", d.severity).bytes());
                }
            }
            Err(e) => {
                block.extend(format!("no plan: {}\n", escaped_but_newlines(&e.to_string())).bytes())
            }
        }
        block.push(b'\n');
        (block, HostSummary::of(&host.host, &outcome))
    };
    let mut summaries = Vec::with_capacity(jobs.len());
    pinctl_fleet::plan_hosts(jobs, args.strict, per_host, |(block, summary)| {
        summaries.push(summary);
        out.write_all(&block)
    })
    .context("writing to stdout")?;
    summary(out, &summaries).context("writing to stdout")?;
    Ok(summaries)
}

/// `fleet: N hosts, M instances; ...` and a line per host: its instances, then what its plan
/// could not keep or why it has none.
fn summary(out: &mut impl Write, summaries: &[HostSummary]) -> io::Result<()> {
    let instances: usize = summaries.iter().map(|s| s.instances).sum();
    let broke = summaries.iter().filter(|s| !s.broken.is_empty()).count();
    let refused = summaries.iter().filter(|s| s.refused.is_some()).count();
    writeln!(
        out,
        "fleet: {} host{}, {instances} instances; {broke} with a rule not kept, {refused} with no plan",
        summaries.len(),
        if summaries.len() == 1 { "" } else { "s" },
    )?;
    let rows: Vec<[String; 3]> = summaries
        .iter()
        .map(|s| {
            let why = match (&s.refused, s.broken.as_slice()) {
                // The first line: a rendered diagnostic follows in the host's block.
                (Some(reason), _) => format!("no plan: {}", reason.lines().next().unwrap_or("")),
                (None, []) => "ok".to_string(),
                (None, [one]) => one.clone(),
                (None, [first, rest @ ..]) => format!("{first} (and {} more)", rest.len()),
            };
            [escaped(&s.host), s.instances.to_string(), escaped(&why)]
        })
        .collect();
    super::render::table(out, ["HOST", "INSTANCES", "RULES"], &rows)
}

/// `{"schema_version": 1, "hosts": {HOST: {...}, ...}, "summary": [...]}`, each host written
/// as soon as it is planned.
fn json(
    out: &mut impl Write,
    jobs: &[(HostCapture, &Config)],
    args: &FleetArgs,
) -> Result<Vec<HostSummary>, Error> {
    let per_host = |host: &HostCapture, outcome: Result<(ServiceFile, Plan), HostError>| {
        let summary = HostSummary::of(&host.host, &outcome);
        let value = HostDocument::of(&host.host, outcome);
        (serde_json::to_vec_pretty(&value), summary)
    };
    out.write_all(b"{\n\"schema_version\": 1,\n\"hosts\": {").context("writing to stdout")?;
    let mut summaries: Vec<HostSummary> = Vec::with_capacity(jobs.len());
    pinctl_fleet::plan_hosts(jobs, args.strict, per_host, |(value, summary)| {
        let value = value.context("writing JSON")?;
        let comma = if summaries.is_empty() { "" } else { "," };
        write!(out, "{comma}\n{}: ", serde_json::to_string(&summary.host)?)?;
        out.write_all(&value)?;
        summaries.push(summary);
        anyhow::Ok(())
    })?;
    out.write_all(b"\n},\n\"summary\": ").context("writing to stdout")?;
    serde_json::to_writer_pretty(&mut *out, &summaries).context("writing JSON")?;
    writeln!(out, "\n}}").context("writing to stdout")?;
    Ok(summaries)
}
