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
use pinctl_plan::{Placement, Plan};
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
    let of = PlanOf {
        files: &host.asked,
        loaded: &host.host.joint.loaded,
        others: host.others(),
        supervisor: &supervisor,
    };
    render_of(out, plan, &of, landing, verbose)
}

/// What a plan's text form says it is of: the files asked for, the topology, the host's
/// other files planned with them, and each instance's supervisor.
pub(crate) struct PlanOf<'a> {
    pub(crate) files: &'a [std::path::PathBuf],
    pub(crate) loaded: &'a pinctl_sysfs::LoadedTopology,
    pub(crate) others: Vec<String>,
    pub(crate) supervisor: &'a dyn Fn(&str) -> String,
}

/// [`render`] of a plan described by `of` (a fleet's host has no `LoadedHost`).
pub(crate) fn render_of(
    out: &mut impl Write,
    plan: &Plan,
    of: &PlanOf<'_>,
    landing: &[pinctl_plan::InterruptLanding],
    verbose: bool,
) -> io::Result<()> {
    let loaded = of.loaded;
    let files: Vec<String> =
        of.files.iter().map(|p| format!("`{}`", escaped(&p.display().to_string()))).collect();
    writeln!(out, "plan for {} on {}", files.join(", "), escaped(&loaded.source.to_string()))?;
    let others = &of.others;
    if !others.is_empty() {
        writeln!(out, "planned with the host's other files: {}", escaped(&others.join(", ")))?;
    }
    if let Some(line) = distances_line(&plan.distances) {
        writeln!(out, "{}", escaped(&line))?;
    }
    writeln!(out)?;
    // Several files: each instance's supervisor (`[host] name`) says whose it is.
    let supervisor = of.supervisor;
    let several = of.files.len() > 1;
    let rows: Vec<[String; 4]> = plan
        .placements
        .iter()
        .map(|p| {
            let name = if several {
                format!("{} ({})", escaped(&p.instance), escaped(&supervisor(&p.instance)))
            } else {
                escaped(&p.instance)
            };
            [
                name,
                p.placement.nodes.to_string(),
                p.placement.cpus.to_string(),
                memory(&p.placement),
            ]
        })
        .collect();
    let header =
        [if several { "INSTANCE (SUPERVISOR)" } else { "INSTANCE" }, "NODES", "CPUS", "MEMORY"];
    let mut width = header.map(str::len);
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Padding by hand: `{:<w$}` panics on a width above 65,535 (a long name or CPU list).
    let line = |cells: [&str; 4]| {
        let mut s = String::new();
        for (k, cell) in cells.iter().enumerate() {
            s.push_str(cell);
            if k + 1 < cells.len() {
                let pad = width[k] - cell.chars().count() + 2;
                s.extend(std::iter::repeat_n(' ', pad));
            }
        }
        s
    };
    writeln!(out, "{}", line(header))?;
    for (row, placement) in rows.iter().zip(&plan.placements) {
        writeln!(out, "{}", line([&row[0], &row[1], &row[2], &row[3]]))?;
        for reason in &placement.reasons {
            writeln!(out, "    - {}", escaped(reason))?;
        }
    }
    writeln!(out)?;
    let none = |s: String| if s.is_empty() { "none".to_string() } else { s };
    writeln!(out, "free nodes: {}", none(plan.free_nodes.to_string()))?;
    let kept: Vec<String> = plan
        .kept_free_nodes
        .iter()
        .map(|n| match plan.kept_free_for.get(&n) {
            Some(why) => format!("{n} (for {})", why.join(", ")),
            None => n.to_string(),
        })
        .collect();
    writeln!(out, "kept free:  {}", escaped(&none(kept.join(", "))))?;
    let shared: Vec<&pinctl_plan::NodeUse> =
        plan.node_use.iter().filter(|u| u.overlaps(&plan.sharing_groups)).collect();
    if !shared.is_empty() {
        writeln!(out, "shared CPUs:")?;
        for u in shared {
            writeln!(
                out,
                "  node {}: {} ({} CPUs of instances on {} usable CPUs: {} per CPU)",
                u.node,
                escaped(&u.instances.join(", ")),
                u.cpus_given,
                u.usable_cpus,
                u.cpus_per_cpu()
            )?;
        }
    }
    if !plan.sharing_groups.is_empty() {
        writeln!(out, "sharing groups (instances whose CPUs overlap):")?;
        for (g, group) in plan.sharing_groups.iter().enumerate() {
            writeln!(
                out,
                "  {g}: CPUs {} of node{} {}: {}",
                group.cpus,
                if group.nodes.len() == 1 { "" } else { "s" },
                group.nodes,
                escaped(&group.members.join(", "))
            )?;
        }
    }
    super::irq::render_landing(out, &loaded.topology, landing, verbose)?;
    let host = &loaded.topology.warnings;
    if !plan.warnings.is_empty() || !host.is_empty() {
        writeln!(out)?;
        for w in &plan.warnings {
            writeln!(out, "warning: {}", escaped(w))?;
        }
        for w in host {
            writeln!(out, "warning: host: {}", escaped(w))?;
        }
    }
    Ok(())
}

/// `distances: measured idle latency (...)`: what the plan compared nodes by, when that is
/// not simply the SLIT table of a topology that has nothing better.
fn distances_line(d: &pinctl_plan::DistanceReport) -> Option<String> {
    use pinctl_plan::DistanceMeasure;
    let note = d.note.as_deref()?;
    Some(match d.measure {
        DistanceMeasure::Measured | DistanceMeasure::Hmat => format!("distances: {note}"),
        DistanceMeasure::Slit => format!("distances: SLIT ({note})"),
        DistanceMeasure::Assumed => format!("distances: unknown ({note})"),
    })
}

/// A diagnostic on one line; `pinctl run` names it here.
pub(crate) fn one_line(d: &pinctl_config::Diagnostic) -> String {
    d.one_line()
}

/// `bind 2`, `preferred 2-3`, `local`.
fn memory(p: &Placement) -> String {
    if p.memory_nodes.is_empty() {
        p.memory_policy.to_string()
    } else {
        format!("{} {}", p.memory_policy, p.memory_nodes)
    }
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
