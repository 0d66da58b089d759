//! `pinctl status --host`: every supervisor of the host (each control socket of the runtime
//! folder, trusted as every client trusts one) with its service file, its instances, their
//! placements and states; the processes pinned outside pinctl; then the nodes no running
//! instance uses, and those the host's plan keeps free. One question per supervisor, each bounded in time: a supervisor that does not
//! answer is reported, not waited for.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use pinctl_supervise::protocol::{InstanceStatus, Request};
use pinctl_topology::NodeSet;
use serde::Serialize;

use crate::error::{CmdResult, Error};

/// One supervisor of the host as it answered.
#[derive(Debug, Serialize)]
struct HostSupervisor {
    name: String,
    /// Its service file; `None` from a supervisor too old to say.
    file: Option<String>,
    pid: Option<u32>,
    socket: PathBuf,
    instances: Vec<InstanceStatus>,
}

/// A control socket that did not answer.
#[derive(Debug, Serialize)]
struct Unreachable {
    socket: PathBuf,
    error: String,
}

/// The whole answer (`--json`).
#[derive(Debug, Serialize)]
struct HostStatus {
    supervisors: Vec<HostSupervisor>,
    unreachable: Vec<Unreachable>,
    /// Nodes with CPUs that no running instance's placement uses.
    free_nodes: Vec<u32>,
    /// Nodes the plan of the supervisors' files keeps free, and for what.
    kept_free_for: BTreeMap<u32, Vec<String>>,
    /// Processes pinned outside pinctl (taskset, `CPUAffinity=`, a cpuset).
    pinned_processes: Vec<Pinned>,
    warnings: Vec<String>,
}

/// A process pinned by someone else.
#[derive(Debug, Serialize)]
struct Pinned {
    pid: u32,
    name: String,
    cpus: String,
    nodes: String,
    /// The instance a `pinctl exec -c FILE --service NAME` runs it for (its mark).
    instance: Option<String>,
}

pub(crate) fn run(dir: &Path, json: bool) -> CmdResult {
    let sockets = pinctl_supervise::socket::supervisors_in(dir)
        .map_err(|e| Error::failure(anyhow::anyhow!(e)))?;
    let mut supervisors = Vec::new();
    let mut unreachable = Vec::new();
    for socket in sockets {
        let request = Request::Status { names: Vec::new() };
        let wait = Some(super::control::HOST_STATUS_WAIT);
        match super::control::ask_at(&socket, &request, wait) {
            Ok(r) => {
                let who = r.supervisor;
                let stem = socket.file_stem().map(|s| s.to_string_lossy().into_owned());
                supervisors.push(HostSupervisor {
                    name: who.as_ref().map(|w| w.name.clone()).or(stem).unwrap_or_default(),
                    file: who.as_ref().and_then(|w| w.file.clone()),
                    pid: who.as_ref().map(|w| w.pid),
                    socket,
                    instances: r.instances.unwrap_or_default(),
                });
            }
            Err(e) => {
                let error = e.message().unwrap_or_default();
                let error = error.strip_prefix("error: ").unwrap_or(&error).to_string();
                unreachable.push(Unreachable { socket, error });
            }
        }
    }
    let mut status = HostStatus {
        supervisors,
        unreachable,
        free_nodes: Vec::new(),
        kept_free_for: BTreeMap::new(),
        pinned_processes: Vec::new(),
        warnings: Vec::new(),
    };
    nodes(&mut status);
    let mut out = io::BufWriter::new(io::stdout().lock());
    if json {
        serde_json::to_writer_pretty(&mut out, &status).context("writing JSON")?;
        writeln!(out).context("writing to stdout")?;
    } else {
        render(&mut out, &status).context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// Fills the free nodes (of this machine, beside the running instances) and the kept-free
/// ones (of the plan of the supervisors' files).
fn nodes(status: &mut HostStatus) {
    let files: Vec<PathBuf> =
        status.supervisors.iter().filter_map(|s| s.file.as_ref().map(PathBuf::from)).collect();
    let mut used = NodeSet::new();
    for i in status.supervisors.iter().flat_map(|s| &s.instances) {
        used = used.union(&i.placement.nodes);
    }
    let loaded = match pinctl_launch::live_topology() {
        Ok(loaded) => loaded,
        Err(e) => {
            status.warnings.push(format!("cannot read this machine's topology: {e}"));
            return;
        }
    };
    let ours: Vec<u32> = status
        .supervisors
        .iter()
        .flat_map(|s| s.instances.iter().filter_map(|i| i.pid).map(|p| p as u32).chain(s.pid))
        .collect();
    status.pinned_processes = pinctl_launch::pinned_on(&loaded)
        .into_iter()
        .filter(|p| !ours.contains(&p.pid))
        .map(|p| Pinned {
            pid: p.pid,
            name: p.name,
            cpus: p.cpus.to_string(),
            nodes: p.nodes.to_string(),
            instance: p.mark,
        })
        .collect();
    let topology = loaded.topology;
    status.free_nodes = topology
        .nodes
        .iter()
        .filter(|n| !n.cpus.is_empty() && !used.contains(n.id))
        .map(|n| n.id)
        .collect();
    if files.is_empty() {
        return;
    }
    match super::host::load(&files, None, false).and_then(|h| h.plan()) {
        Ok((plan, _)) => {
            status.kept_free_for = plan.kept_free_for.into_iter().collect();
        }
        Err(e) => status.warnings.push(format!(
            "the supervisors' files cannot be planned, so no node is said to be kept free: {}",
            e.message().unwrap_or_default()
        )),
    }
}

fn render(out: &mut impl Write, status: &HostStatus) -> io::Result<()> {
    if status.supervisors.is_empty() && status.unreachable.is_empty() {
        writeln!(out, "no supervisor runs on this host")?;
    }
    for s in &status.supervisors {
        let file = s.file.as_deref().unwrap_or("its file unknown");
        let pid = s.pid.map_or(String::new(), |p| format!("PID {p}, "));
        writeln!(out, "supervisor `{}` ({pid}{file}, {})", s.name, s.socket.display())?;
        super::control::render(out, &s.instances)?;
        writeln!(out)?;
    }
    for u in &status.unreachable {
        writeln!(out, "supervisor at {}: no answer: {}", u.socket.display(), u.error)?;
    }
    let ids = |v: &[u32]| {
        let set: NodeSet = v.iter().copied().collect();
        if set.is_empty() { "none".to_string() } else { set.to_string() }
    };
    writeln!(out, "free nodes: {}", ids(&status.free_nodes))?;
    let kept: Vec<String> = status
        .kept_free_for
        .iter()
        .map(|(n, why)| format!("{n} (for {})", why.join(", ")))
        .collect();
    writeln!(out, "kept free:  {}", if kept.is_empty() { "none".into() } else { kept.join(", ") })?;
    if !status.pinned_processes.is_empty() {
        writeln!(out, "pinned outside pinctl:")?;
        for p in &status.pinned_processes {
            let name = pinctl_topology::text::escaped(&p.name);
            let unit = p.instance.as_deref().map_or(String::new(), |i| {
                format!(" (`pinctl exec` of instance {})", pinctl_topology::text::escaped(i))
            });
            writeln!(out, "  PID {} ({name}): CPUs {}, nodes {}{unit}", p.pid, p.cpus, p.nodes)?;
        }
    }
    for w in &status.warnings {
        writeln!(out, "warning: {w}")?;
    }
    Ok(())
}
