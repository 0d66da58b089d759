//! `pinctl topology`: the machine as pinctl sees it, for people (in the spirit of
//! `numactl --hardware`, plus devices) or as the JSON contract of docs/topology.md.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use pinctl_capture::{capture_topology, load_topology};
use pinctl_sysfs::TopologySource;
use pinctl_topology::text::escaped;
use pinctl_topology::{Device, Locality, PolicySupport, Topology};

use crate::error::{CmdResult, Error};

/// Arguments of `pinctl topology`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopologyArgs {
    /// Read this instead of the live machine: a sysfs/procfs directory, a tarball of one
    /// (.tar, .tar.gz, .tar.bz2, .tar.xz), a `pinctl topology --json` snapshot, or an hwloc XML
    /// file (`lstopo --of xml`, formats 2.x and 3.x).
    #[arg(long, value_name = "SRC")]
    topology: Option<PathBuf>,
    /// Print the topology as JSON (the format docs/topology.md specifies).
    #[arg(long, conflicts_with = "capture")]
    json: bool,
    /// Write every file pinctl reads on this host into FILE (a .tar.gz) that `--topology`
    /// accepts on any other machine.
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,
}

pub(crate) fn run(args: TopologyArgs) -> CmdResult {
    let source = TopologySource::from_arg(args.topology.as_deref()).map_err(Error::failure)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if let Some(file) = &args.capture {
        let root = match &source {
            TopologySource::Live | TopologySource::Root(_) => source.path().to_path_buf(),
            other => {
                let e = pinctl_capture::SourceError::NotCapturable { what: other.to_string() };
                return Err(Error::failure(e));
            }
        };
        let summary = capture_topology(&root, file).map_err(Error::failure)?;
        writeln!(
            out,
            "captured {} files, {} links and {} folders of {source} into `{}`",
            summary.files,
            summary.links,
            summary.dirs,
            file.display()
        )
        .context("writing to stdout")?;
        out.flush().context("writing to stdout")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut loaded = load_topology(&source).map_err(Error::failure)?;
    pinctl_launch::probe_memory_policies(&pinctl_sys::LinuxKernel, &mut loaded);
    if loaded.is_live {
        super::host::ask_irqbalance(&mut loaded.topology);
    }
    if args.json {
        serde_json::to_writer_pretty(&mut out, &loaded.topology).context("writing JSON")?;
        writeln!(out).context("writing to stdout")?;
    } else {
        render(&mut out, &loaded.topology, &source).context("writing to stdout")?;
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// The human form: header facts, each node with its CPUs, memory and devices, the distance
/// matrix, devices on several nodes or none, then warnings.
pub(crate) fn render(
    out: &mut impl Write,
    t: &Topology,
    source: &TopologySource,
) -> io::Result<()> {
    // Names, paths and warnings come from the source: their control characters are escaped so
    // a device named `\e[31m\nnode 9 cpus: ...` cannot colour the terminal or forge a line.
    writeln!(out, "topology of {}", escaped(&source.to_string()))?;
    let h = &t.host;
    let opt = |v: Option<u32>| v.map_or_else(|| "unknown".to_string(), |v| v.to_string());
    writeln!(
        out,
        "kernel: {}, numa_balancing: {}, zone_reclaim_mode: {}",
        escaped(h.kernel.as_deref().unwrap_or("unknown")),
        opt(h.numa_balancing),
        opt(h.zone_reclaim_mode)
    )?;
    fn set<K: pinctl_topology::IdKind>(s: &Option<pinctl_topology::IdSet<K>>) -> String {
        s.as_ref().map_or_else(|| "unknown".to_string(), |s| s.to_string())
    }
    writeln!(out, "allowed: cpus {}, nodes {}", set(&h.allowed_cpus), set(&h.allowed_nodes))?;
    writeln!(out, "memory policies: {}", policies(h.memory_policies.as_ref()))?;
    writeln!(out, "available: {} nodes ({})", t.nodes.len(), t.node_ids())?;
    if !h.offline_nodes.is_empty() {
        writeln!(out, "offline nodes: {}", h.offline_nodes)?;
    }
    let offline: pinctl_topology::CpuSet =
        t.cpus.iter().filter(|c| !c.online).map(|c| c.id).collect();
    if !offline.is_empty() {
        writeln!(out, "offline cpus: {offline}")?;
    }
    for n in &t.nodes {
        node(out, t, n)?;
    }
    distances(out, t)?;
    super::render::performance::render_performance(out, t)?;
    odd_devices(out, t)?;
    super::render::interrupts::render(out, t)?;
    if !t.warnings.is_empty() {
        writeln!(out, "warnings:")?;
        for w in &t.warnings {
            writeln!(out, "  - {}", escaped(w))?;
        }
    }
    Ok(())
}

/// A node's lines: its CPUs (and what it lacks), memory, last-level caches and devices.
fn node(out: &mut impl Write, t: &Topology, n: &pinctl_topology::Node) -> io::Result<()> {
    let mut notes = Vec::new();
    if let Some(p) = t.package_of_node(n.id) {
        notes.push(format!("package {p}"));
    }
    match (n.has_cpu, n.has_memory) {
        (true, true) => {}
        (true, false) => notes.push("CPU-only: no memory".to_string()),
        (false, true) => notes.push("memory-only".to_string()),
        (false, false) => notes.push("no CPUs, no memory".to_string()),
    }
    let notes = if notes.is_empty() { String::new() } else { format!(" [{}]", notes.join(", ")) };
    let cpus = if n.cpus.is_empty() { "none".to_string() } else { n.cpus.to_string() };
    writeln!(out, "node {} cpus: {cpus} ({} CPUs){notes}", n.id, n.cpus.len())?;
    writeln!(out, "node {} size: {}", n.id, mib(n.memory_bytes))?;
    writeln!(out, "node {} free: {}", n.id, mib(n.memory_free_bytes))?;
    let caches: Vec<String> = t
        .caches
        .iter()
        .filter(|c| !c.cpus.is_disjoint(&n.cpus))
        .map(|c| match c.size_bytes {
            Some(size) => format!("L{} {} ({})", c.level, c.cpus, cache_size(size)),
            None => format!("L{} {}", c.level, c.cpus),
        })
        .collect();
    if !caches.is_empty() {
        writeln!(out, "node {} last-level caches: {}", n.id, caches.join("; "))?;
    }
    let devs: Vec<String> =
        t.devices.iter().filter(|d| d.node == Some(n.id)).map(describe).collect();
    if !devs.is_empty() {
        writeln!(out, "node {} devices: {}", n.id, devs.join(", "))?;
    }
    Ok(())
}

/// The distance matrix, as `numactl --hardware` prints it.
fn distances(out: &mut impl Write, t: &Topology) -> io::Result<()> {
    if !t.distances.is_empty() {
        writeln!(out, "node distances:")?;
        write!(out, "node")?;
        for n in &t.nodes {
            write!(out, " {:>3}", n.id)?;
        }
        writeln!(out)?;
        for (n, row) in t.nodes.iter().zip(&t.distances) {
            write!(out, "{:>3}:", n.id)?;
            for d in row {
                write!(out, " {d:>3}")?;
            }
            writeln!(out)?;
        }
    } else if !t.nodes.is_empty() {
        writeln!(out, "node distances: unknown (the source has no distance files)")?;
    }
    Ok(())
}

/// Devices on nodes the topology does not list, on several nodes, or on none known.
fn odd_devices(out: &mut impl Write, t: &Topology) -> io::Result<()> {
    let elsewhere: Vec<&Device> =
        t.devices.iter().filter(|d| d.node.is_some_and(|n| t.node(n).is_none())).collect();
    if !elsewhere.is_empty() {
        writeln!(out, "devices on nodes this topology does not list:")?;
        for d in elsewhere {
            writeln!(out, "  node {}: {}", d.nodes, describe(d))?;
        }
    }
    let spanning: Vec<&Device> = t.devices.iter().filter(|d| d.nodes.len() > 1).collect();
    if !spanning.is_empty() {
        writeln!(out, "devices on several nodes:")?;
        for d in spanning {
            writeln!(out, "  nodes {}: {}", d.nodes, describe(d))?;
        }
    }
    let unknown: Vec<&Device> = t.devices.iter().filter(|d| d.nodes.is_empty()).collect();
    if !unknown.is_empty() {
        writeln!(out, "devices of unknown locality:")?;
        for d in unknown {
            writeln!(out, "  {}", describe(d))?;
        }
    }
    Ok(())
}

/// The newer policies the kernel accepts, as probed: `preferred-many yes, weighted-interleave
/// yes (weights 0:1 1:1), numa-balancing flag yes`.
fn policies(support: Option<&PolicySupport>) -> String {
    let Some(s) = support else {
        return "not probed (not the machine pinctl runs on)".to_string();
    };
    let yes = |b: bool| if b { "yes" } else { "no" };
    let weights = if s.interleave_weights.is_empty() {
        String::new()
    } else {
        let w: Vec<String> =
            s.interleave_weights.iter().map(|w| format!("{}:{}", w.node, w.weight)).collect();
        format!(" (weights {})", w.join(" "))
    };
    format!(
        "preferred-many {}, weighted-interleave {}{weights}, numa-balancing flag {}",
        yes(s.preferred_many),
        yes(s.weighted_interleave),
        yes(s.numa_balancing_flag)
    )
}

/// `32 MiB`, `512 KiB`: cache sizes are whole KiB.
fn cache_size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "unknown".to_string(), |b| format!("{} MiB", b >> 20))
}

/// `nvme0n1 (nvme 0000:00:02.0, via local_cpulist)`, `bond0 (nic, members eth0 eth1)`.
fn describe(d: &Device) -> String {
    let kind = serde_json::to_value(d.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut parts = vec![kind];
    if let Some(pci) = &d.pci {
        parts[0] = format!("{} {pci}", parts[0]);
    }
    match d.locality {
        Locality::NumaNode | Locality::Unknown => {}
        Locality::LocalCpulist => parts.push("via local_cpulist".to_string()),
        Locality::Hwloc => parts.push("via hwloc".to_string()),
        Locality::MultipathControllers => {
            parts.push(format!("controllers {}", d.members.join(" ")));
        }
        Locality::Members => parts.push(format!("members {}", d.members.join(" "))),
    }
    if d.locality == Locality::Unknown && !d.members.is_empty() {
        parts.push(format!("members {}", d.members.join(" ")));
    }
    escaped(&format!("{} ({})", d.name, parts.join(", ")))
}
