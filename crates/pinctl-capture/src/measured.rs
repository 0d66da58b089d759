//! A `pinctl probe` result carried with a topology: inside a snapshot it is
//! `memory_performance.measured`; inside a capture (a tarball or its unpacked tree) it is the
//! file [`PROBE_FILE`] beside `sys/` and `proc/`, which `--topology` reads back with the
//! tree. Either way it is checked against the topology it came with: every pair names nodes of
//! that topology, every figure is a finite positive number.

use std::collections::HashMap;

use pinctl_sysfs::FsRoot;
use pinctl_topology::text::has_control;
use pinctl_topology::{MAX_NODE_ID, Measurement, MemoryPerformance, Topology, implausible_latency};

use crate::error::{Invalid, SourceError, bad};

/// Where a capture keeps the probe result, relative to its root.
pub const PROBE_FILE: &str = "pinctl/probe.json";

/// The probe result of the tree under `fs`, checked against `topology`; `None` when the tree
/// has none. Reading it through `fs` records it, so a capture of a capture keeps it.
pub(crate) fn read_probe_file(
    fs: &mut FsRoot,
    topology: &Topology,
) -> Result<Option<Measurement>, SourceError> {
    let path = fs.full(PROBE_FILE);
    let Some(text) = fs.read(PROBE_FILE)? else {
        return Ok(None);
    };
    if text.len() > crate::MAX_SNAPSHOT_BYTES {
        return Err(SourceError::MeasurementInvalid {
            path,
            at: String::new(),
            what: format!("larger than {} bytes", crate::MAX_SNAPSHOT_BYTES),
        });
    }
    let mut measurement: Measurement = serde_json::from_str(text)
        .map_err(|source| SourceError::Measurement { path: path.clone(), source })?;
    let node_at: HashMap<u32, usize> =
        topology.nodes.iter().enumerate().map(|(i, n)| (n.id, i)).collect();
    check_measurement(&measurement, &node_at, "")
        .map_err(|(at, what)| SourceError::MeasurementInvalid { path, at, what })?;
    measurement.pairs.sort_by_key(|p| (p.cpu_node, p.memory_node));
    measurement.not_measured.sort_by_key(|n| n.node);
    Ok(Some(measurement))
}

/// Reads the probe result of the tree under `fs` into `topology`, if it has one.
pub(crate) fn attach_probe_file(
    fs: &mut FsRoot,
    topology: &mut Topology,
) -> Result<(), SourceError> {
    if let Some(m) = read_probe_file(fs, topology)? {
        topology.memory_performance.measured = Some(m);
    }
    Ok(())
}

/// `prefix.field` (or `field` without a prefix).
fn at(prefix: &str, field: impl std::fmt::Display) -> String {
    if prefix.is_empty() { field.to_string() } else { format!("{prefix}.{field}") }
}

fn known_node(
    node: u32,
    node_at: &HashMap<u32, usize>,
    at: impl FnOnce() -> String,
) -> Result<(), Invalid> {
    if node_at.contains_key(&node) {
        Ok(())
    } else {
        bad(at(), format!("node `{node}` is not in `nodes`"))
    }
}

fn plain_text(text: &str, at: impl FnOnce() -> String) -> Result<(), Invalid> {
    if has_control(text) { bad(at(), "holds control characters".into()) } else { Ok(()) }
}

/// HMAT entries name nodes of the topology, once per class and initiators, and latencies
/// inside [`pinctl_topology::LATENCY_NS_RANGE`] (a firmware's `0` is written as unknown, never
/// as 0 ns); tiers once each; the measurement as [`check_measurement`] says.
pub(crate) fn check_performance(
    p: &MemoryPerformance,
    node_at: &HashMap<u32, usize>,
    prefix: &str,
) -> Result<(), Invalid> {
    let mut seen = HashMap::new();
    for (i, a) in p.hmat.iter().enumerate() {
        let here = || at(prefix, format!("hmat[{i}]"));
        known_node(a.node, node_at, || format!("{}.node", here()))?;
        for (field, ns) in
            [("read_latency_ns", a.read_latency_ns), ("write_latency_ns", a.write_latency_ns)]
        {
            if let Some(why) = ns.and_then(|ns| implausible_latency(f64::from(ns))) {
                return bad(format!("{}.{field}", here()), why);
            }
        }
        if let Some(j) = seen.insert((a.node, a.class, a.initiators.to_string()), i) {
            return bad(here(), format!("repeats `{}`", at(prefix, format!("hmat[{j}]"))));
        }
    }
    let mut tiers = HashMap::new();
    for (i, t) in p.memory_tiers.iter().enumerate() {
        if let Some(j) = tiers.insert(t.tier, i) {
            return bad(
                at(prefix, format!("memory_tiers[{i}].tier")),
                format!("tier `{}` is also `memory_tiers[{j}]`", t.tier),
            );
        }
    }
    match &p.measured {
        Some(m) => check_measurement(m, node_at, &at(prefix, "measured")),
        None => Ok(()),
    }
}

/// Every pair names two nodes of the topology, once; latencies are inside
/// [`pinctl_topology::LATENCY_NS_RANGE`], bandwidths finite and not negative; nodes left out
/// have ids within [`MAX_NODE_ID`]; texts hold no control characters.
pub(crate) fn check_measurement(
    m: &Measurement,
    node_at: &HashMap<u32, usize>,
    prefix: &str,
) -> Result<(), Invalid> {
    plain_text(&m.tool, || at(prefix, "tool"))?;
    plain_text(&m.measured_at, || at(prefix, "measured_at"))?;
    if let Some(k) = &m.kernel {
        plain_text(k, || at(prefix, "kernel"))?;
    }
    let mut seen = HashMap::new();
    for (i, p) in m.pairs.iter().enumerate() {
        let here = |field: &str| at(prefix, format!("pairs[{i}].{field}"));
        known_node(p.cpu_node, node_at, || here("cpu_node"))?;
        known_node(p.memory_node, node_at, || here("memory_node"))?;
        if let Some(j) = seen.insert((p.cpu_node, p.memory_node), i) {
            return bad(
                at(prefix, format!("pairs[{i}]")),
                format!(
                    "CPU node {} to memory node {} is also `pairs[{j}]`",
                    p.cpu_node, p.memory_node
                ),
            );
        }
        if let Some(why) = implausible_latency(p.latency_ns) {
            return bad(here("latency_ns"), why);
        }
        if !(p.read_bandwidth_gb_s.is_finite() && p.read_bandwidth_gb_s >= 0.0) {
            return bad(
                here("read_bandwidth_gb_s"),
                format!("`{}` is not a bandwidth", p.read_bandwidth_gb_s),
            );
        }
    }
    for (i, n) in m.not_measured.iter().enumerate() {
        if n.node > MAX_NODE_ID {
            let why = pinctl_topology::ParseIdSetError::NodeTooLarge(n.node);
            return bad(at(prefix, format!("not_measured[{i}].node")), why.to_string());
        }
        plain_text(&n.why, || at(prefix, format!("not_measured[{i}].why")))?;
    }
    Ok(())
}
