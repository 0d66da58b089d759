//! Reads hwloc XML files through libhwloc and through pinctl's own reader (pinctl-hwloc-xml,
//! the one pinctl uses) and prints how long each took and what came out:
//! `cargo run --release -p pinctl-hwloc --example read-hwloc-xml -- [--json] FILE...`
//! Each file is read a few times by each; the best time is shown (the first read through
//! libhwloc also loads its XML plugin, which later reads skip).

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
        let mut best = [Duration::MAX; 2];
        let mut first = [Duration::ZERO; 2];
        let mut topology = [None, None];
        for round in 0..20 {
            for reader in 0..2 {
                let start = Instant::now();
                let t = match reader {
                    0 => pinctl_hwloc::read_hwloc_xml(path)?,
                    _ => pinctl_hwloc_xml::read_hwloc_xml(path)?,
                };
                let took = start.elapsed();
                if round == 0 {
                    first[reader] = took;
                }
                best[reader] = best[reader].min(took);
                topology[reader] = Some(t);
            }
        }
        let [Some(t), Some(ours)] = topology else { anyhow::bail!("no round ran") };
        writeln!(
            out,
            "{}: {} nodes, {} cpus, {} devices, {} warnings; libhwloc: first read {:.2} ms, best \
             of 20 {:.2} ms; pinctl-hwloc-xml: first {:.2} ms, best {:.2} ms ({:.2}x); same \
             topology: {}",
            path.display(),
            t.nodes.len(),
            t.cpus.len(),
            t.devices.len(),
            t.warnings.len(),
            first[0].as_secs_f64() * 1e3,
            best[0].as_secs_f64() * 1e3,
            first[1].as_secs_f64() * 1e3,
            best[1].as_secs_f64() * 1e3,
            best[1].as_secs_f64() / best[0].as_secs_f64(),
            t == ours,
        )?;
        if json {
            writeln!(out, "{}", serde_json::to_string_pretty(&t)?)?;
        }
    }
    Ok(())
}
