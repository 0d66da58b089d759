//! `pinctl status`'s table of instances (the answer's [`InstanceStatus`]es), as `status`,
//! `start`, `restart`, `reload` and `status --host` print it: one row each, aligned, with a
//! line below a row for why it failed, was not sampled or its locality was not judged.

use std::io::{self, Write};

use crate::protocol::{DriftState, InstanceStatus};

fn uptime(s: f64) -> String {
    let s = s as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// Resident memory the way `ps` and `top` readers scan it: `5.7MiB`, `812KiB`, `1.2GiB`.
fn rss(bytes: u64) -> String {
    match bytes {
        0..1_048_576 => format!("{}KiB", bytes / 1024),
        1_048_576..1_073_741_824 => format!("{:.1}MiB", bytes as f64 / 1_048_576.0),
        _ => format!("{:.1}GiB", bytes as f64 / 1_073_741_824.0),
    }
}

/// The share of memory on the planned nodes at the watcher's last sample.
/// `<min` where the instance holds less than `min-memory` (the reason is on a line below).
fn local(drift: Option<&DriftState>) -> String {
    match drift {
        Some(d) if d.locality_not_judged.is_some() => "<min".into(),
        d => d.and_then(|d| d.local_fraction).map_or("-".into(), |f| format!("{:.1}%", f * 100.0)),
    }
}

/// `in-place`, the kinds of drift going on, or `-` where nothing watched the instance.
fn drift(drift: Option<&DriftState>) -> String {
    match drift {
        None => "-".into(),
        Some(d) if d.error.is_some() => "unsampled".into(),
        Some(d) if d.drifting.is_empty() => "in-place".into(),
        Some(d) => d.drifting.join(","),
    }
}

/// The table of `instances`, a header first.
pub fn render(out: &mut impl Write, instances: &[InstanceStatus]) -> io::Result<()> {
    let header = [
        "INSTANCE",
        "STATE",
        "PID",
        "UPTIME",
        "RESTARTS",
        "CPU TIME",
        "RSS",
        "NODES",
        "CPUS",
        "MEMORY",
        "LOCAL",
        "DRIFT",
        "LAST EXIT",
    ];
    let rows: Vec<[String; 13]> = instances
        .iter()
        .map(|i| {
            let p = &i.placement;
            let memory = if p.memory_nodes.is_empty() {
                p.memory_policy.to_string()
            } else {
                format!("{} {}", p.memory_policy, p.memory_nodes)
            };
            [
                i.name.clone(),
                if i.adopted { format!("{} (adopted)", i.state) } else { i.state.clone() },
                i.pid.map_or("-".into(), |p| p.to_string()),
                i.uptime_s.map_or("-".into(), uptime),
                i.restarts.to_string(),
                i.cpu_s.map_or("-".into(), |s| format!("{s:.2}s")),
                i.rss_bytes.map_or("-".into(), rss),
                p.nodes.to_string(),
                p.cpus.to_string(),
                memory,
                local(i.drift.as_ref()),
                drift(i.drift.as_ref()),
                i.last_exit.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut width = header.map(str::len);
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (k, cell) in cells.iter().enumerate() {
            if k + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = width[k]));
            }
        }
        s
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for (row, i) in rows.iter().zip(instances) {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
        if let Some(reason) = &i.reason {
            writeln!(out, "    failed: {reason}")?;
        }
        if let Some(error) = i.drift.as_ref().and_then(|d| d.error.as_ref()) {
            writeln!(out, "    not sampled: {error}")?;
        }
        if let Some(why) = i.drift.as_ref().and_then(|d| d.locality_not_judged.as_ref()) {
            writeln!(out, "    locality not judged: {why}")?;
        }
    }
    Ok(())
}
