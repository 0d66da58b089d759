//! Memory performance beyond SLIT, for people: HMAT and memory tiers in `pinctl topology`,
//! and what `pinctl probe` measured (matrices, ratios, the pairs beside SLIT and HMAT, the
//! rankings that disagree with SLIT) in both commands.

use std::io::{self, Write};

use pinctl_probe::{ProbeDocument, ProbePlan};
use pinctl_topology::text::escaped;
use pinctl_topology::{AccessClass, Measurement, MemoryPerformance, NodeId, Topology};

/// `probing 2 CPU nodes x 2 memory nodes (4 pairs) within 9.0 s: a 256 MiB buffer on each
/// memory node (8.0x the largest last-level cache, 32 MiB)`.
pub(crate) fn plan_line(plan: &ProbePlan) -> String {
    let cache = match plan.last_level_cache_bytes {
        Some(llc) if llc > 0 => format!(
            " ({:.1}x the largest last-level cache, {})",
            plan.buffer_bytes as f64 / llc as f64,
            mib(llc)
        ),
        _ => " (last-level cache unknown)".to_string(),
    };
    format!(
        "probing {} CPU node{} x {} memory node{} ({} pair{}) within {:.1} s{}: a {} buffer \
         on each memory node{cache}",
        plan.cpu_sides.len(),
        plural(plan.cpu_sides.len()),
        plan.memory_nodes.len(),
        plural(plan.memory_nodes.len()),
        plan.pairs(),
        plural(plan.pairs()),
        plan.budget.as_secs_f64(),
        if plan.quick { ", --quick" } else { "" },
        mib(plan.buffer_bytes),
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes >> 20)
}

/// `pinctl probe`'s report: what was measured and how, the latency, bandwidth and ratio
/// matrices, every pair beside SLIT and HMAT, the rankings that disagree with SLIT, and the
/// nodes left out.
pub(crate) fn render_probe(
    out: &mut impl Write,
    t: &Topology,
    doc: &ProbeDocument,
) -> io::Result<()> {
    let m = &doc.measured;
    header(out, m)?;
    writeln!(out)?;
    matrices(out, m)?;
    writeln!(out)?;
    let rows: Vec<[String; 6]> = doc
        .pairs
        .iter()
        .map(|p| {
            let hmat = match (p.hmat_latency_ns, p.hmat_read_bandwidth_mb_s) {
                (None, None) => "-".to_string(),
                (l, b) => [l.map(|l| format!("{l} ns")), b.map(|b| format!("{b} MB/s"))]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            [
                format!("{} -> {}", p.cpu_node, p.memory_node),
                format!("{:.1} ns", p.latency_ns),
                format!("{:.2}", p.remote_ratio),
                format!("{:.2} GB/s", p.read_bandwidth_gb_s),
                p.slit.map_or_else(|| "-".to_string(), |d| d.to_string()),
                hmat,
            ]
        })
        .collect();
    super::table(out, ["CPU -> MEMORY", "LATENCY", "RATIO", "BANDWIDTH", "SLIT", "HMAT"], &rows)?;
    writeln!(out)?;
    if t.distances.is_empty() {
        writeln!(out, "rankings that disagree with SLIT: none to compare (no SLIT table)")?;
    } else if doc.disagreements.is_empty() {
        writeln!(
            out,
            "rankings that disagree with SLIT: none (latencies within {:.0} % are ties)",
            pinctl_probe::TIE_FRACTION * 100.0
        )?;
    } else {
        writeln!(out, "rankings that disagree with SLIT:")?;
        for d in &doc.disagreements {
            writeln!(out, "  - {d}")?;
        }
    }
    not_measured(out, m)?;
    if m.quick {
        writeln!(
            out,
            "\nnote: --quick: small buffers and short passes; these figures show that the probe \
             works, they are not for planning"
        )?;
    }
    Ok(())
}

fn header(out: &mut impl Write, m: &Measurement) -> io::Result<()> {
    let cpus = m.cpu_nodes();
    let memory = m.memory_nodes();
    writeln!(
        out,
        "measured {} pair{} (CPU nodes {cpus} x memory nodes {memory}) in {:.1} s of a {:.1} s \
         budget{}",
        m.pairs.len(),
        plural(m.pairs.len()),
        m.elapsed_ms as f64 / 1000.0,
        m.budget_ms as f64 / 1000.0,
        if m.quick { ", --quick" } else { "" }
    )?;
    let huge = m.pairs.iter().map(|p| p.huge_page_bytes).min().unwrap_or(0);
    let cache = m.last_level_cache_bytes.filter(|&c| c > 0).map_or_else(String::new, |c| {
        format!(", {:.1}x the last-level cache", m.buffer_bytes as f64 / c as f64)
    });
    writeln!(
        out,
        "buffer: {} per memory node{cache}; huge pages: {} of it (the least of any node)",
        mib(m.buffer_bytes),
        mib(huge)
    )?;
    writeln!(
        out,
        "by {} at {} on kernel {}",
        escaped(&m.tool),
        escaped(&m.measured_at),
        escaped(m.kernel.as_deref().unwrap_or("unknown"))
    )
}

/// The latency, bandwidth and ratio matrices: rows CPU nodes, columns memory nodes.
fn matrices(out: &mut impl Write, m: &Measurement) -> io::Result<()> {
    let cpus: Vec<NodeId> = m.cpu_nodes().iter().collect();
    let memory: Vec<NodeId> = m.memory_nodes().iter().collect();
    let grid = |out: &mut dyn Write,
                title: &str,
                cell: &dyn Fn(NodeId, NodeId) -> Option<String>|
     -> io::Result<()> {
        writeln!(out, "{title}")?;
        let cells: Vec<Vec<String>> = cpus
            .iter()
            .map(|&c| memory.iter().map(|&j| cell(c, j).unwrap_or_else(|| "-".into())).collect())
            .collect();
        let width = cells.iter().flatten().map(String::len).max().unwrap_or(1).max(4);
        write!(out, "node")?;
        for j in &memory {
            write!(out, " {j:>width$}")?;
        }
        writeln!(out)?;
        for (c, row) in cpus.iter().zip(&cells) {
            write!(out, "{c:>3}:")?;
            for v in row {
                write!(out, " {v:>width$}")?;
            }
            writeln!(out)?;
        }
        Ok(())
    };
    grid(out, "latency (ns), idle, one thread; rows: CPU node, columns: memory node", &|c, j| {
        m.latency_ns(c, j).map(|v| format!("{v:.1}"))
    })?;
    grid(out, "read bandwidth (GB/s), one thread per core of the CPU node", &|c, j| {
        m.pair(c, j).map(|p| format!("{:.2}", p.read_bandwidth_gb_s))
    })?;
    grid(out, "latency over the CPU node's local latency", &|c, j| {
        m.remote_ratio(c, j).map(|v| format!("{v:.2}"))
    })
}

fn not_measured(out: &mut impl Write, m: &Measurement) -> io::Result<()> {
    if m.not_measured.is_empty() {
        return Ok(());
    }
    writeln!(out, "not measured:")?;
    for n in &m.not_measured {
        writeln!(out, "  node {}: {}", n.node, escaped(&n.why))?;
    }
    Ok(())
}

/// `pinctl topology`'s section: HMAT, memory tiers and a saved measurement; nothing when
/// the source has none of them.
pub(crate) fn render_performance(out: &mut impl Write, t: &Topology) -> io::Result<()> {
    let p: &MemoryPerformance = &t.memory_performance;
    if !p.hmat.is_empty() {
        writeln!(out, "HMAT (each memory node's best initiators, as the firmware rated them):")?;
        for a in &p.hmat {
            let class = match a.class {
                AccessClass::Access0 => "access0",
                AccessClass::Access1 => "access1",
                AccessClass::Hwloc => "hwloc",
            };
            let figures: Vec<String> = [
                a.read_latency_ns.map(|v| format!("read {v} ns")),
                a.write_latency_ns.map(|v| format!("write {v} ns")),
                a.read_bandwidth_mb_s.map(|v| format!("read {v} MB/s")),
                a.write_bandwidth_mb_s.map(|v| format!("write {v} MB/s")),
            ]
            .into_iter()
            .flatten()
            .collect();
            let figures = if figures.is_empty() {
                "no figures given".to_string()
            } else {
                figures.join(", ")
            };
            let from = if a.initiators.is_empty() {
                "no initiator named".to_string()
            } else {
                format!("from node{} {}", plural(a.initiators.len()), a.initiators)
            };
            writeln!(out, "  node {} {class}: {from}: {figures}", a.node)?;
        }
    }
    if !p.memory_tiers.is_empty() {
        let tiers: Vec<String> =
            p.memory_tiers.iter().map(|t| format!("{} (nodes {})", t.tier, t.nodes)).collect();
        writeln!(out, "memory tiers: {}", tiers.join(", "))?;
    }
    if let Some(m) = &p.measured {
        writeln!(out, "measured by `pinctl probe`:")?;
        header(out, m)?;
        matrices(out, m)?;
        not_measured(out, m)?;
    }
    Ok(())
}
