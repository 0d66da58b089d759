//! Reads hwloc XML files and prints how long each took and what came out:
//! `cargo run --release -p pinctl-hwloc --example read-hwloc-xml -- [--json] FILE...`
//! Each file is read a few times; the best time is shown (the first read also loads
//! libhwloc's XML plugin, which later reads skip).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let mut json = false;
    let mut files = Vec::new();
    for arg in std::env::args_os().skip(1) {
        if arg == "--json" {
            json = true;
        } else {
            files.push(arg);
        }
    }
    anyhow::ensure!(!files.is_empty(), "usage: read-hwloc-xml [--json] FILE...");
    let mut out = std::io::stdout().lock();
    for file in &files {
        let path = Path::new(file);
        let mut best = Duration::MAX;
        let mut first = Duration::ZERO;
        let mut topology = None;
        for round in 0..20 {
            let start = Instant::now();
            let t = pinctl_hwloc::read_hwloc_xml(path)?;
            let took = start.elapsed();
            if round == 0 {
                first = took;
            }
            best = best.min(took);
            topology = Some(t);
        }
        let t = topology.expect("at least one round");
        writeln!(
            out,
            "{}: {} nodes, {} cpus, {} devices, {} warnings; first read {:.2} ms, best of 20 {:.2} ms",
            path.display(),
            t.nodes.len(),
            t.cpus.len(),
            t.devices.len(),
            t.warnings.len(),
            first.as_secs_f64() * 1e3,
            best.as_secs_f64() * 1e3,
        )?;
        if json {
            writeln!(out, "{}", serde_json::to_string_pretty(&t)?)?;
        }
    }
    Ok(())
}
