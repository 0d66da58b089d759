//! `pinctl plan`: where every service instance would run on a topology, and why: a table, the
//! `--json` contract of docs/planning.md, or drop-ins / command lines that apply it
//! (`--emit systemd DIR`, `--emit numactl`). A dry run: it changes nothing on the host.
//!
//! The files and the topology come through the route every planning command shares
//! (`super::host`).

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use pinctl_capture::StagedFile;
use pinctl_config::Config;
use pinctl_plan::{Placement, Plan};
use pinctl_topology::MemoryPolicy;
use pinctl_topology::text::{escaped, shown};

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
                host.files.iter().flat_map(|f| &f.diagnostics).map(one_line).collect();
            let mut document = plan.document(&loaded.topology.warnings, &config_warnings);
            for p in &mut document.services {
                if let Some(f) = host.file_of(&p.name) {
                    p.file = Some(f.config.path.display().to_string());
                    p.supervisor = Some(pinctl_launch::Host::supervisor_of(f));
                }
            }
            document.interrupts_on_service_cpus = super::irq::landing(&host.joint, &plan);
            serde_json::to_writer_pretty(&mut out, &document).context("writing JSON")?;
            writeln!(out).context("writing to stdout")?;
        }
        None => {
            let landing = super::irq::landing(&host.joint, &plan);
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

/// A diagnostic of the service file on one line, for `config_warnings`: `FILE:LINE:COLUMN:
/// message`, or `FILE: message` when it has no place.
pub(crate) fn one_line(d: &pinctl_config::Diagnostic) -> String {
    match (&d.location, &d.path) {
        (Some(l), _) => {
            format!("{}:{}:{}: {}", l.path().display(), l.line(), l.column(), d.message)
        }
        (None, Some(path)) => format!("{}: {}", path.display(), d.message),
        (None, None) => d.message.clone(),
    }
}

/// `bind 2`, `preferred 2-3`, `local`.
fn memory(p: &Placement) -> String {
    if p.memory_nodes.is_empty() {
        p.memory_policy.to_string()
    } else {
        format!("{} {}", p.memory_policy, p.memory_nodes)
    }
}

/// A drop-in per instance: `DIR/<unit>.d/50-pinctl.conf` with `CPUAffinity=`, `NUMAPolicy=`,
/// `NUMAMask=`. Units default to `<instance>.service`. All drop-ins or none: each is staged
/// beside its destination and synced, and only when every one is staged are they renamed into
/// place (a symbolic link at a drop-in's path is replaced, never followed). Text from input
/// (the `-c` path, instance and service names) has its control characters escaped, so it
/// cannot end the comment line it is written in; a unit name systemd would not accept is
/// refused.
fn emit_systemd(
    out: &mut impl Write,
    config: &Config,
    plan: &Plan,
    config_path: &Path,
    dir: &Path,
) -> Result<(), Error> {
    let drop_ins: Vec<(PathBuf, String)> = drop_ins(config, plan, config_path)?
        .into_iter()
        .map(|d| (dir.join(d.path), d.text))
        .collect();
    let mut staged = Vec::with_capacity(drop_ins.len());
    for (file, text) in &drop_ins {
        let unit_dir = file.parent().unwrap_or(dir);
        fs::create_dir_all(unit_dir)
            .with_context(|| format!("cannot create `{}`", unit_dir.display()))?;
        let file_staged = StagedFile::with_contents(file, text.as_bytes())
            .with_context(|| format!("cannot write `{}`", file.display()))?;
        staged.push(file_staged);
    }
    for ((file, _), file_staged) in drop_ins.iter().zip(staged) {
        file_staged.commit().with_context(|| format!("cannot write `{}`", file.display()))?;
        writeln!(out, "{}", escaped(&file.display().to_string())).context("writing to stdout")?;
    }
    let current: Vec<&Path> = drop_ins.iter().map(|(f, _)| f.as_path()).collect();
    for stale in stale_drop_ins(dir, config_path, &current) {
        fs::remove_file(&stale).with_context(|| format!("cannot remove `{}`", stale.display()))?;
        // The unit's `.d` folder goes too when the drop-in was all it held.
        if let Some(unit_dir) = stale.parent() {
            let _ = fs::remove_dir(unit_dir);
        }
        writeln!(out, "removed {}", escaped(&stale.display().to_string()))
            .context("writing to stdout")?;
    }
    Ok(())
}

/// One drop-in of `--emit systemd`: `<unit>.d/50-pinctl.conf` (relative to the folder it is
/// written in) and its text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct DropIn {
    pub(crate) unit: String,
    pub(crate) path: PathBuf,
    #[serde(rename = "content")]
    pub(crate) text: String,
}

/// The drop-ins that apply `plan`, one per instance, or why systemd cannot apply it (a memory
/// policy it has no `NUMAPolicy=` for, a unit name it would not accept): what `--emit systemd`
/// writes, and what `pinctl fleet --json` hands to a configuration manager.
pub(crate) fn drop_ins(
    config: &Config,
    plan: &Plan,
    config_path: &Path,
) -> Result<Vec<DropIn>, Error> {
    // Refuse before writing anything: systemd has no NUMAPolicy= for these.
    for p in &plan.placements {
        if matches!(
            p.placement.memory_policy,
            MemoryPolicy::PreferredMany | MemoryPolicy::WeightedInterleave
        ) {
            return Err(Error::failure(anyhow::anyhow!(
                "{}: systemd's NUMAPolicy= has no `{}`; use `--emit numactl` or `pinctl exec`",
                shown(&p.instance),
                p.placement.memory_policy
            )));
        }
    }
    let mut drop_ins = Vec::with_capacity(plan.placements.len());
    for p in &plan.placements {
        let unit = config
            .instance(&p.instance)
            .and_then(|(_, i)| i.unit.clone())
            .unwrap_or_else(|| format!("{}.service", p.instance));
        if !pinctl_config::is_service_unit_name(&unit) {
            return Err(Error::failure(anyhow::anyhow!(
                "`{}` is not a systemd service unit name: set `unit` for instance `{}`",
                shown(&unit),
                shown(&p.instance)
            )));
        }
        let mut text = format!(
            "{} instance `{}` of service `{}`.\n\
             [Service]\nCPUAffinity={}\nNUMAPolicy={}\n",
            written_by(config_path),
            escaped(&p.instance),
            escaped(&p.service),
            p.placement.cpus,
            p.placement.memory_policy
        );
        if !p.placement.memory_nodes.is_empty() {
            let _ = writeln!(text, "NUMAMask={}", p.placement.memory_nodes);
        }
        let path = Path::new(&format!("{unit}.d")).join("50-pinctl.conf");
        drop_ins.push(DropIn { unit, path, text });
    }
    Ok(drop_ins)
}

/// The first line of every drop-in written for the service file at `config_path`.
fn written_by(config_path: &Path) -> String {
    format!(
        "# Written by `pinctl plan -c {} --emit systemd`:",
        escaped(&config_path.display().to_string())
    )
}

/// The drop-ins in `dir` that an earlier `--emit systemd` of the same file wrote for instances
/// the plan no longer has (a service scaled down or removed): `<unit>.d/50-pinctl.conf` whose
/// first line names the same `-c` path, a regular file of this user in a real folder (a link
/// is never followed). Anything else is left alone, another file's drop-ins included.
fn stale_drop_ins(dir: &Path, config_path: &Path, current: &[&Path]) -> Vec<PathBuf> {
    use std::io::{BufRead as _, BufReader};
    use std::os::unix::fs::MetadataExt as _;
    let header = written_by(config_path);
    let me = pinctl_sysfs::trust::euid();
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut stale: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".service.d"))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path().join("50-pinctl.conf"))
        .filter(|f| !current.contains(&f.as_path()))
        .filter(|f| fs::symlink_metadata(f).is_ok_and(|m| m.file_type().is_file() && m.uid() == me))
        .filter(|f| {
            // Only the first line is read, and at most 4 KiB of it.
            let Ok(file) = fs::File::open(f) else { return false };
            let mut first = String::new();
            let read = BufReader::new(io::Read::take(file, 4096)).read_line(&mut first);
            read.is_ok() && first.starts_with(&header)
        })
        .collect();
    stale.sort();
    stale
}

/// A numactl command line per instance, preceded by a comment naming it, and by one naming
/// the settings a numactl line cannot carry (also said on `err`): they belong to whatever runs
/// the line, or to `pinctl exec -c`, which applies them.
fn emit_numactl(
    out: &mut impl Write,
    err: &mut impl Write,
    config: &Config,
    plan: &Plan,
) -> io::Result<()> {
    for p in &plan.placements {
        if let Some((service, instance)) = config.instance(&p.instance) {
            let limits = &service.limits;
            let dropped: Vec<&str> = [
                (!instance.env.is_empty(), "env"),
                (service.user.is_some(), "user"),
                (service.group.is_some(), "group"),
                (instance.working_dir.is_some(), "working-dir"),
                (instance.output.is_some(), "output"),
                (
                    [limits.nofile, limits.nproc, limits.memlock, limits.core, limits.stack]
                        .iter()
                        .any(Option::is_some),
                    "limits",
                ),
            ]
            .into_iter()
            .filter_map(|(set, key)| set.then_some(key))
            .collect();
            if !dropped.is_empty() {
                let what = format!(
                    "{}: a numactl line does not carry `{}`: set them where the line runs, or \
                     start it with `pinctl exec -c FILE --service {}`",
                    escaped(&p.instance),
                    dropped.join("`, `"),
                    escaped(&p.instance)
                );
                writeln!(err, "warning: {what}")?;
                writeln!(out, "# warning: {what}")?;
            }
        }
        let nodes = p.placement.memory_nodes.to_string();
        let policy = match p.placement.memory_policy {
            MemoryPolicy::Default => String::new(),
            MemoryPolicy::Local => " --localalloc".to_string(),
            MemoryPolicy::Bind => format!(" --membind={nodes}"),
            MemoryPolicy::Preferred => format!(" --preferred={nodes}"),
            MemoryPolicy::PreferredMany => format!(" --preferred-many={nodes}"),
            MemoryPolicy::Interleave => format!(" --interleave={nodes}"),
            MemoryPolicy::WeightedInterleave => format!(" --weighted-interleave={nodes}"),
        };
        let command = config
            .instance(&p.instance)
            .map(|(_, i)| i.command.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        writeln!(out, "# {}", p.instance)?;
        writeln!(out, "numactl --physcpubind={}{policy} -- {command}", p.placement.cpus)?;
    }
    Ok(())
}

/// `arg` as one POSIX shell word.
fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg.bytes().all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if plain { arg.to_string() } else { format!("'{}'", arg.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        assert_eq!(shell_quote("/usr/bin/x"), "/usr/bin/x");
        assert_eq!(shell_quote("daemon off;"), "'daemon off;'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
