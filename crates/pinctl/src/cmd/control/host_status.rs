//! `pinctl status --host`: every supervisor of the host with its service file, its instances,
//! their placements and states; the processes pinned outside pinctl; then the nodes no running
//! instance uses, and those the host's plan keeps free. The answers are gathered, each bounded
//! in time, by [`HostStatus`]; this module plans the supervisors' files and renders.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use pinctl_supervise::client::HostStatus;
use pinctl_topology::NodeSet;

use crate::error::{CmdResult, Error};

pub(crate) fn run(dir: &Path, json: bool) -> CmdResult {
    let mut status = HostStatus::gather(dir).map_err(|e| Error::failure(anyhow::anyhow!(e)))?;
    status.nodes(|files| {
        let plan = super::super::host::load(files, None, false).and_then(|h| h.plan());
        plan.map(|(plan, _)| plan.kept_free_for.into_iter().collect())
            .map_err(|e| e.message().unwrap_or_default())
    });
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

fn render(out: &mut impl Write, status: &HostStatus) -> io::Result<()> {
    if status.supervisors.is_empty() && status.unreachable.is_empty() {
        writeln!(out, "no supervisor runs on this host")?;
    }
    for s in &status.supervisors {
        let file = s.file.as_deref().unwrap_or("its file unknown");
        let pid = s.pid.map_or(String::new(), |p| format!("PID {p}, "));
        writeln!(out, "supervisor `{}` ({pid}{file}, {})", s.name, s.socket.display())?;
        pinctl_supervise::client::table::render(out, &s.instances)?;
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
