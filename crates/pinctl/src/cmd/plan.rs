//! `pinctl plan`: where every service instance would run on a topology, and why: a table, the
//! `--json` contract of docs/planning.md, or drop-ins / command lines that apply it
//! (`--emit systemd DIR`, `--emit numactl`). A dry run: it changes nothing on the host.
//!
//! The files and the topology come through the route every planning command shares
//! (`super::host`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use pinctl_config::Config;
use pinctl_launch::emit::{self, Wrote};
use pinctl_plan::Plan;
use pinctl_topology::text::escaped;

use crate::error::{CmdResult, Error};

/// Arguments of `pinctl plan`.
#[derive(Debug, clap::Args)]
pub(crate) struct PlanArgs {
    /// The service file; repeat it to plan several files together, as one host (on the live
    /// machine, the other files of the file's folder are planned with it anyway).
    #[arg(short = 'c', long = "config", value_name = "FILE", required = true)]
    config: Vec<PathBuf>,
    /// Plan for this topology instead of the live machine: a sysfs/procfs directory, a tarball
    /// of one, a `pinctl topology --json` snapshot, or an hwloc XML file.
    #[arg(long, value_name = "SRC")]
    topology: Option<PathBuf>,
    /// Print the plan as JSON (the contract in docs/planning.md).
    #[arg(long, conflicts_with = "emit")]
    json: bool,
    /// List each interrupt on the instances' CPUs, not a count per instance.
    #[arg(short, long)]
    verbose: bool,
    /// Fail when the best plan breaks a soft rule (memory over a node's capacity under a
    /// policy that spills, an instance away from its `near` device, a kept-free node used),
    /// and when a `near` entry names no device of the topology (a snapshot's too).
    #[arg(long)]
    strict: bool,
    /// Write what applies the plan: `systemd DIR` writes a drop-in per instance
    /// (`DIR/<unit>.d/50-pinctl.conf`); `numactl` prints a numactl command line per instance.
    #[arg(long, num_args = 1..=2, value_names = ["FORMAT", "DIR"])]
    emit: Option<Vec<String>>,
}

/// What `--emit` asks for.
enum Emit {
    Systemd(PathBuf),
    Numactl,
}

fn parse_emit(values: &[String]) -> Result<Emit, Error> {
    let usage = Error::Usage;
    match values {
        [format, dir] if format == "systemd" && dir.is_empty() => {
            Err(usage("`--emit systemd` needs a directory, not an empty path".into()))
        }
        [format, dir] if format == "systemd" => Ok(Emit::Systemd(PathBuf::from(dir))),
        [format] if format == "systemd" => {
            Err(usage("`--emit systemd` needs a directory: `--emit systemd DIR`".into()))
        }
        [format] if format == "numactl" => Ok(Emit::Numactl),
        [format, extra] if format == "numactl" => {
            Err(usage(format!("`--emit numactl` takes no directory (got `{extra}`)")))
        }
        [format, ..] => {
            Err(usage(format!("unknown `--emit` format `{format}`: expected systemd or numactl")))
        }
        [] => Err(usage("`--emit` needs a format: systemd DIR or numactl".into())),
    }
}

pub(crate) fn run(args: PlanArgs) -> CmdResult {
    let emit = args.emit.as_deref().map(parse_emit).transpose()?;
    if emit.is_some() && args.config.len() > 1 {
        return Err(Error::usage("`--emit` writes the plan of one file: give one `-c`"));
    }
    let mut err = io::stderr().lock();
    let loaded_host = super::host::load(&args.config, args.topology.as_deref(), args.strict)?;
    let host = &loaded_host.host;
    for file in host.files.iter().filter(|f| !f.diagnostics.is_empty()) {
        let text = pinctl_config::render_all(&file.diagnostics, Some(&file.config.path), false);
        writeln!(err, "{text}").context("writing to stderr")?;
    }
    for note in &loaded_host.notes {
        writeln!(err, "warning: host: {}", escaped(note)).context("writing to stderr")?;
    }
    let loaded = &host.joint.loaded;
    // The host's warnings (discovery's assumptions first) are printed once: in the text
    // output, in `--json`'s `host_warnings`, and for `--emit`, whose stdout is files or
    // command lines, on stderr.
    if emit.is_some() {
        for w in &loaded.topology.warnings {
            writeln!(err, "warning: host: {}", escaped(w)).context("writing to stderr")?;
        }
    }
    let (_, plan) = loaded_host.plan()?;

    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let own = loaded_host.own();
    match emit {
        Some(Emit::Systemd(dir)) => {
            emit_systemd(&mut out, &own.config, &plan, &args.config[0], &dir)?;
        }
        Some(Emit::Numactl) => {
            emit_numactl(&mut out, &mut err, &own.config, &plan).context("writing the lines")?;
        }
        None if args.json => {
            let config_warnings: Vec<String> =
                host.files.iter().flat_map(|f| &f.diagnostics).map(|d| d.one_line()).collect();
            let mut document = plan.document(&loaded.topology.warnings, &config_warnings);
            for p in &mut document.services {
                if let Some(f) = host.file_of(&p.name) {
                    p.file = Some(f.config.path.display().to_string());
                    p.supervisor = Some(pinctl_launch::Host::supervisor_of(f));
                }
            }
            document.interrupts_on_service_cpus = pinctl_irq::landing::of_plan(&host.joint, &plan);
            serde_json::to_writer_pretty(&mut out, &document).context("writing JSON")?;
            writeln!(out).context("writing to stdout")?;
        }
        None => {
            let landing = pinctl_irq::landing::of_plan(&host.joint, &plan);
            render(&mut out, &plan, &loaded_host, &landing, args.verbose)
                .context("writing to stdout")?;
        }
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// The human form: one block per instance (nodes, CPUs, memory, then its reasons), free and
/// kept-free nodes, the interrupts on the instances' CPUs, the plan's warnings, then the
/// host's (as `pinctl check` prints them).
pub(crate) fn render(
    out: &mut impl Write,
    plan: &Plan,
    host: &super::host::LoadedHost,
    landing: &[pinctl_plan::InterruptLanding],
    verbose: bool,
) -> io::Result<()> {
    let supervisor = |name: &str| {
        let file = host.host.file_of(name);
        file.map(pinctl_launch::Host::supervisor_of).unwrap_or_default()
    };
    let of = super::render::plan::PlanOf {
        files: &host.asked,
        loaded: &host.host.joint.loaded,
        others: host.others(),
        supervisor: &supervisor,
    };
    super::render::plan::render(out, plan, &of, landing, verbose)
}

/// A drop-in per instance (`DIR/<unit>.d/50-pinctl.conf`), all or none, and the stale
/// ones of the same file removed; each path said as it is written or removed.
fn emit_systemd(
    out: &mut impl Write,
    config: &Config,
    plan: &Plan,
    config_path: &Path,
    dir: &Path,
) -> Result<(), Error> {
    let drop_ins = emit::drop_ins(config, plan, config_path).map_err(Error::failure)?;
    let mut say = |step: Wrote<'_>| match step {
        Wrote::Written(file) => writeln!(out, "{}", escaped(&file.display().to_string())),
        Wrote::Removed(file) => writeln!(out, "removed {}", escaped(&file.display().to_string())),
    };
    emit::write_drop_ins(dir, &drop_ins, config_path, &mut say).map_err(Error::failure)
}

/// A numactl command line per instance, preceded by a comment naming it, and by one naming
/// the settings a numactl line cannot carry (also said on `err`).
fn emit_numactl(
    out: &mut impl Write,
    err: &mut impl Write,
    config: &Config,
    plan: &Plan,
) -> io::Result<()> {
    for l in emit::numactl_lines(config, plan) {
        if !l.dropped.is_empty() {
            let what = format!(
                "{}: a numactl line does not carry `{}`: set them where the line runs, or \
                 start it with `pinctl exec -c FILE --service {}`",
                escaped(&l.instance),
                l.dropped.join("`, `"),
                escaped(&l.instance)
            );
            writeln!(err, "warning: {what}")?;
            writeln!(out, "# warning: {what}")?;
        }
        writeln!(out, "# {}", l.instance)?;
        writeln!(out, "{}", l.line)?;
    }
    Ok(())
}
