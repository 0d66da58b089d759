//! What applies a plan outside pinctl (`pinctl plan --emit`): a systemd drop-in per instance
//! (`CPUAffinity=`, `NUMAPolicy=`, `NUMAMask=`), written all or none and the stale ones of the
//! same file removed, or a numactl command line per instance with the settings such a line
//! cannot carry named. `pinctl fleet --json` hands the same drop-ins to a configuration
//! manager.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use pinctl_config::Config;
use pinctl_plan::Plan;
use pinctl_topology::MemoryPolicy;
use pinctl_topology::text::{escaped, shown};
use pinctl_trust::atomic::StagedFile;

/// Why a plan's drop-ins cannot be made or written.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// systemd has no `NUMAPolicy=` for the instance's memory policy.
    #[error(
        "{}: systemd's NUMAPolicy= has no `{policy}`; use `--emit numactl` or `pinctl exec`",
        shown(instance)
    )]
    NoNumaPolicy { instance: String, policy: MemoryPolicy },
    /// The instance's unit is not a name systemd accepts for a service.
    #[error(
        "`{}` is not a systemd service unit name: set `unit` for instance `{}`",
        shown(unit),
        shown(instance)
    )]
    UnitName { unit: String, instance: String },
    #[error("cannot create `{}`", path.display())]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("cannot write `{}`", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot remove `{}`", path.display())]
    Remove { path: PathBuf, source: io::Error },
    /// Saying a step failed (stdout closed).
    #[error("writing to stdout")]
    Say(#[source] io::Error),
}

/// One drop-in of `--emit systemd`: `<unit>.d/50-pinctl.conf` (relative to the folder it is
/// written in) and its text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DropIn {
    pub unit: String,
    pub path: PathBuf,
    #[serde(rename = "content")]
    pub text: String,
}

/// The drop-ins that apply `plan`, one per instance, or why systemd cannot apply it (a memory
/// policy it has no `NUMAPolicy=` for, a unit name it would not accept). Units default to
/// `<instance>.service`. Text from input (the `-c` path, instance and service names) has its
/// control characters escaped, so it cannot end the comment line it is written in.
pub fn drop_ins(
    config: &Config,
    plan: &Plan,
    config_path: &Path,
) -> Result<Vec<DropIn>, EmitError> {
    // Refuse before writing anything: systemd has no NUMAPolicy= for these.
    for p in &plan.placements {
        let policy = p.placement.memory_policy;
        if matches!(policy, MemoryPolicy::PreferredMany | MemoryPolicy::WeightedInterleave) {
            return Err(EmitError::NoNumaPolicy { instance: p.instance.clone(), policy });
        }
    }
    let mut drop_ins = Vec::with_capacity(plan.placements.len());
    for p in &plan.placements {
        let unit = config
            .instance(&p.instance)
            .and_then(|(_, i)| i.unit.clone())
            .unwrap_or_else(|| format!("{}.service", p.instance));
        if !pinctl_config::is_service_unit_name(&unit) {
            return Err(EmitError::UnitName { unit, instance: p.instance.clone() });
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

/// A step [`write_drop_ins`] took, said as it is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrote<'a> {
    /// A drop-in put in place.
    Written(&'a Path),
    /// A stale drop-in removed.
    Removed(&'a Path),
}

/// Writes `drop_ins` under `dir`, all or none: each is staged beside its destination and
/// synced, and only when every one is staged are they renamed into place (a symbolic link at
/// a drop-in's path is replaced, never followed). Then removes the drop-ins an earlier run
/// for the same file wrote for instances the plan no longer has. `say` hears each step.
pub fn write_drop_ins(
    dir: &Path,
    drop_ins: &[DropIn],
    config_path: &Path,
    say: &mut dyn FnMut(Wrote<'_>) -> io::Result<()>,
) -> Result<(), EmitError> {
    let files: Vec<PathBuf> = drop_ins.iter().map(|d| dir.join(&d.path)).collect();
    let mut staged = Vec::with_capacity(files.len());
    for (file, d) in files.iter().zip(drop_ins) {
        let unit_dir = file.parent().unwrap_or(dir);
        fs::create_dir_all(unit_dir)
            .map_err(|source| EmitError::CreateDir { path: unit_dir.to_path_buf(), source })?;
        let write = |source| EmitError::Write { path: file.clone(), source };
        staged.push(StagedFile::with_contents(file, d.text.as_bytes()).map_err(write)?);
    }
    for (file, file_staged) in files.iter().zip(staged) {
        file_staged.commit().map_err(|source| EmitError::Write { path: file.clone(), source })?;
        say(Wrote::Written(file)).map_err(EmitError::Say)?;
    }
    let current: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    for stale in stale_drop_ins(dir, config_path, &current) {
        fs::remove_file(&stale)
            .map_err(|source| EmitError::Remove { path: stale.clone(), source })?;
        // The unit's `.d` folder goes too when the drop-in was all it held.
        if let Some(unit_dir) = stale.parent() {
            let _ = fs::remove_dir(unit_dir);
        }
        say(Wrote::Removed(&stale)).map_err(EmitError::Say)?;
    }
    Ok(())
}

/// The drop-ins in `dir` that an earlier `--emit systemd` of the same file wrote for instances
/// the plan no longer has (a service scaled down or removed): `<unit>.d/50-pinctl.conf` whose
/// first line names the same `-c` path, a regular file of this user in a real folder (a link
/// is never followed). Anything else is left alone, another file's drop-ins included.
fn stale_drop_ins(dir: &Path, config_path: &Path, current: &[&Path]) -> Vec<PathBuf> {
    use std::io::{BufRead as _, BufReader};
    use std::os::unix::fs::MetadataExt as _;
    let header = written_by(config_path);
    let me = pinctl_trust::euid();
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

/// One instance's numactl command line (`numactl --physcpubind=0-3 --membind=0 -- cmd`) and
/// the keys of its settings the line does not carry (`env`, `user`, `limits`, ...): they
/// belong to whatever runs the line, or to `pinctl exec -c`, which applies them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumactlLine {
    pub instance: String,
    pub dropped: Vec<&'static str>,
    pub line: String,
}

/// A numactl command line per instance of `plan`.
pub fn numactl_lines(config: &Config, plan: &Plan) -> Vec<NumactlLine> {
    plan.placements
        .iter()
        .map(|p| {
            let instance = config.instance(&p.instance);
            let dropped = instance.map(|(s, i)| not_carried(s, i)).unwrap_or_default();
            let command = instance
                .map(|(_, i)| i.command.iter().map(|a| shell_quote(a)).collect::<Vec<_>>())
                .unwrap_or_default()
                .join(" ");
            let policy = numactl_policy(p.placement.memory_policy, &p.placement.memory_nodes);
            let line = format!("numactl --physcpubind={}{policy} -- {command}", p.placement.cpus);
            NumactlLine { instance: p.instance.clone(), dropped, line }
        })
        .collect()
}

/// The keys of an instance's settings a numactl line cannot carry.
fn not_carried(
    service: &pinctl_config::Service,
    instance: &pinctl_config::Instance,
) -> Vec<&'static str> {
    let limits = &service.limits;
    [
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
    .collect()
}

/// numactl's option for `policy` over `nodes` (` --membind=0-1`), empty for the default.
fn numactl_policy(policy: MemoryPolicy, nodes: &pinctl_topology::NodeSet) -> String {
    match policy {
        MemoryPolicy::Default => String::new(),
        MemoryPolicy::Local => " --localalloc".to_string(),
        MemoryPolicy::Bind => format!(" --membind={nodes}"),
        MemoryPolicy::Preferred => format!(" --preferred={nodes}"),
        MemoryPolicy::PreferredMany => format!(" --preferred-many={nodes}"),
        MemoryPolicy::Interleave => format!(" --interleave={nodes}"),
        MemoryPolicy::WeightedInterleave => format!(" --weighted-interleave={nodes}"),
    }
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
