//! `pinctl topology --json` snapshots read back: parsed, then checked as strictly as a service
//! file (every error names the JSON path of the offending value), then put in the model's
//! order so the order of the file does not matter. Every `schema_version` up to
//! [`TOPOLOGY_SCHEMA_VERSION`] is read, and documents without one (older pinctl); a newer one
//! is refused by name before anything else is read, since its fields may mean other things.

use std::collections::HashMap;
use std::path::Path;

use pinctl_topology::text::{has_control, shown};
use pinctl_topology::{MAX_CPU_ID, MAX_NODE_ID, NodeSet, TOPOLOGY_SCHEMA_VERSION, Topology};

use crate::error::{Invalid, SourceError, bad};

/// Parses and checks a snapshot; `path` only names it in errors. A UTF-8 byte-order mark is
/// accepted, as in service files.
pub(crate) fn parse_snapshot(bytes: &[u8], path: &Path) -> Result<Topology, SourceError> {
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
    if let Some(version) = newer_version(bytes) {
        return Err(SourceError::SnapshotNewer {
            path: path.to_path_buf(),
            version,
            known: TOPOLOGY_SCHEMA_VERSION,
        });
    }
    let mut topo: Topology = serde_json::from_slice(bytes)
        .map_err(|source| SourceError::Snapshot { path: path.to_path_buf(), source })?;
    check(&topo).map_err(|(at, what)| SourceError::SnapshotInvalid {
        path: path.to_path_buf(),
        at,
        what,
    })?;
    put_in_order(&mut topo);
    // The warnings are the model's consequences, not facts of the host: said again by this
    // pinctl's rules (a snapshot of an older one lacks the newer warnings).
    topo.refresh_warnings();
    Ok(topo)
}

/// The `schema_version` of a document newer than this pinctl reads, as written (`7`, `1.5`).
/// Read on its own first: a newer document may fail the strict parse on a field it added, and
/// its version is the useful thing to report then. Anything unreadable is left to the parse.
fn newer_version(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Versioned {
        schema_version: Option<serde_json::Number>,
    }
    let v: Versioned = serde_json::from_slice(bytes).ok()?;
    let n = v.schema_version?;
    let known = u64::from(TOPOLOGY_SCHEMA_VERSION);
    let newer = match n.as_u64() {
        Some(u) => u > known,
        // 1.5, 2e3: not a version this pinctl wrote; newer when above the one it knows.
        None => n.as_f64().is_some_and(|f| f > known as f64),
    };
    newer.then(|| n.to_string())
}

fn check_nodes(set: &NodeSet, at: impl FnOnce() -> String) -> Result<(), Invalid> {
    set.check_node_ids().or_else(|e| bad(at(), e.to_string()))
}

fn check_name(name: &str, at: impl FnOnce() -> String) -> Result<(), Invalid> {
    if name.is_empty() || has_control(name) || name.contains('/') {
        return bad(at(), format!("`{}` is not a device name", shown(name)));
    }
    Ok(())
}

/// Every rule a snapshot must keep; `Err((json path, what is wrong))` at the first broken one.
fn check(t: &Topology) -> Result<(), Invalid> {
    let (node_at, cpu_owner) = check_node_list(t)?;
    check_distances(t)?;
    let cpu_at = check_cpus(t, &node_at, &cpu_owner)?;
    check_devices(t)?;
    check_caches(t, &cpu_at)?;
    check_host_and_texts(t)?;
    crate::measured::check_performance(&t.memory_performance, &node_at, "memory_performance")?;
    crate::interrupts::check(&t.interrupts)
}

/// Ids and where they are listed: an index into `nodes` or `cpus`.
type Positions = HashMap<u32, usize>;

/// Each node listed once with its own CPUs: where each node id is in `nodes`, and which node
/// lists each CPU.
fn check_node_list(t: &Topology) -> Result<(Positions, Positions), Invalid> {
    let mut node_at: HashMap<u32, usize> = HashMap::new();
    let mut cpu_owner: HashMap<u32, usize> = HashMap::new();
    for (i, n) in t.nodes.iter().enumerate() {
        if n.id > MAX_NODE_ID {
            return bad(
                format!("nodes[{i}].id"),
                format!("node id `{}` is above {MAX_NODE_ID}", n.id),
            );
        }
        if let Some(j) = node_at.insert(n.id, i) {
            return bad(format!("nodes[{i}].id"), format!("node `{}` is also `nodes[{j}]`", n.id));
        }
        for c in n.cpus.iter() {
            if let Some(j) = cpu_owner.insert(c, i) {
                let other = t.nodes[j].id;
                return bad(
                    format!("nodes[{i}].cpus"),
                    format!("CPU `{c}` is also in node `{other}` (`nodes[{j}].cpus`)"),
                );
            }
        }
        if let (Some(total), Some(free)) = (n.memory_bytes, n.memory_free_bytes) {
            if free > total {
                return bad(
                    format!("nodes[{i}].memory_free_bytes"),
                    format!("free memory `{free}` is above the total `{total}`"),
                );
            }
        }
    }
    Ok((node_at, cpu_owner))
}

/// A SLIT-like matrix, one row and column per node, or none.
fn check_distances(t: &Topology) -> Result<(), Invalid> {
    let n = t.nodes.len();
    if !t.distances.is_empty() {
        if t.distances.len() != n {
            return bad(
                "distances".into(),
                format!(
                    "{} rows for {n} nodes (expected {n}, or `[]` when unknown)",
                    t.distances.len()
                ),
            );
        }
        for (i, row) in t.distances.iter().enumerate() {
            if row.len() != n {
                return bad(
                    format!("distances[{i}]"),
                    format!("{} columns for {n} nodes", row.len()),
                );
            }
            if let Some(j) = row.iter().position(|&d| d == 0) {
                return bad(
                    format!("distances[{i}][{j}]"),
                    "distance `0` is not a SLIT distance (a node's own is 10, others more)".into(),
                );
            }
        }
    }
    Ok(())
}

/// Each CPU listed once, on a node that lists it: where each CPU id is in `cpus`.
fn check_cpus(
    t: &Topology,
    node_at: &Positions,
    cpu_owner: &Positions,
) -> Result<Positions, Invalid> {
    let mut cpu_at: HashMap<u32, usize> = HashMap::new();
    for (i, c) in t.cpus.iter().enumerate() {
        if c.id > MAX_CPU_ID {
            return bad(
                format!("cpus[{i}].id"),
                format!("CPU id `{}` is above {MAX_CPU_ID}", c.id),
            );
        }
        if let Some(j) = cpu_at.insert(c.id, i) {
            return bad(format!("cpus[{i}].id"), format!("CPU `{}` is also `cpus[{j}]`", c.id));
        }
        if let Some(node) = c.node {
            let Some(&j) = node_at.get(&node) else {
                return bad(format!("cpus[{i}].node"), format!("node `{node}` is not in `nodes`"));
            };
            if let Some(&owner) = cpu_owner.get(&c.id) {
                if owner != j {
                    return bad(
                        format!("cpus[{i}].node"),
                        format!(
                            "CPU `{}` is on node `{node}` here but in `nodes[{owner}].cpus`",
                            c.id
                        ),
                    );
                }
            }
        }
    }
    Ok(cpu_at)
}

/// Each device named once, by its name or an alias, with nodes that agree.
fn check_devices(t: &Topology) -> Result<(), Invalid> {
    let mut device_at: HashMap<&str, usize> = HashMap::new();
    for (i, d) in t.devices.iter().enumerate() {
        check_name(&d.name, || format!("devices[{i}].name"))?;
        if let Some(j) = device_at.insert(&d.name, i) {
            return bad(
                format!("devices[{i}].name"),
                format!("device `{}` is also `devices[{j}]`", d.name),
            );
        }
        check_nodes(&d.nodes, || format!("devices[{i}].nodes"))?;
        if let Some(node) = d.node {
            if d.nodes.len() != 1 || !d.nodes.contains(node) {
                return bad(
                    format!("devices[{i}].node"),
                    format!("node `{node}` disagrees with `nodes` `{}`", d.nodes),
                );
            }
        }
        for (k, m) in d.members.iter().enumerate() {
            check_name(m, || format!("devices[{i}].members[{k}]"))?;
        }
        if let Some(pci) = &d.pci {
            if has_control(pci) {
                return bad(
                    format!("devices[{i}].pci"),
                    format!("`{}` is not a PCI address", shown(pci)),
                );
            }
        }
    }
    // An alias is a name `near` accepts: it must lead to one device only.
    let mut alias_at: HashMap<&str, usize> = HashMap::new();
    for (i, d) in t.devices.iter().enumerate() {
        for (k, a) in d.aliases.iter().enumerate() {
            let at = || format!("devices[{i}].aliases[{k}]");
            check_name(a, at)?;
            if let Some(j) = device_at.get(a.as_str()).or_else(|| alias_at.get(a.as_str())) {
                return bad(at(), format!("`{a}` also names `devices[{j}]`"));
            }
            alias_at.insert(a, i);
        }
    }
    Ok(())
}

/// Each cache shared by CPUs of `cpus`, a CPU in one last-level cache.
fn check_caches(t: &Topology, cpu_at: &Positions) -> Result<(), Invalid> {
    let mut cache_of: HashMap<u32, usize> = HashMap::new();
    for (i, cache) in t.caches.iter().enumerate() {
        if cache.level == 0 {
            return bad(format!("caches[{i}].level"), "level `0` is not a cache level".into());
        }
        if cache.cpus.is_empty() {
            return bad(format!("caches[{i}].cpus"), "a cache shared by no CPU".into());
        }
        for c in cache.cpus.iter() {
            if !cpu_at.contains_key(&c) {
                return bad(format!("caches[{i}].cpus"), format!("CPU `{c}` is not in `cpus`"));
            }
            if let Some(j) = cache_of.insert(c, i) {
                return bad(
                    format!("caches[{i}].cpus"),
                    format!(
                        "CPU `{c}` is also in `caches[{j}].cpus` (a CPU has one last-level cache)"
                    ),
                );
            }
        }
    }
    Ok(())
}

/// Host facts and every text shown to a person: no control characters.
fn check_host_and_texts(t: &Topology) -> Result<(), Invalid> {
    let h = &t.host;
    if let Some(set) = &h.allowed_nodes {
        check_nodes(set, || "host.allowed_nodes".into())?;
    }
    check_nodes(&h.offline_nodes, || "host.offline_nodes".into())?;
    if let Some(k) = &h.kernel {
        if has_control(k) {
            return bad("host.kernel".into(), format!("`{}` holds control characters", shown(k)));
        }
    }
    if let Some((i, _)) = t.warnings.iter().enumerate().find(|(_, w)| has_control(w)) {
        return bad(format!("warnings[{i}]"), "holds control characters".into());
    }
    for (i, w) in t.discovery_warnings.iter().enumerate() {
        for (key, text) in [("file", &w.file), ("problem", &w.problem), ("assumed", &w.assumed)] {
            if has_control(text) {
                return bad(
                    format!("discovery_warnings[{i}].{key}"),
                    "holds control characters".into(),
                );
            }
        }
    }
    Ok(())
}

/// Nodes and CPUs ascending by id (distance rows and columns follow the nodes), devices by
/// name: the order the model promises, whatever the file's.
fn put_in_order(t: &mut Topology) {
    let mut order: Vec<usize> = (0..t.nodes.len()).collect();
    order.sort_by_key(|&i| t.nodes[i].id);
    if order.iter().enumerate().any(|(k, &i)| k != i) {
        let nodes = order.iter().map(|&i| t.nodes[i].clone()).collect();
        if !t.distances.is_empty() {
            t.distances =
                order.iter().map(|&i| order.iter().map(|&j| t.distances[i][j]).collect()).collect();
        }
        t.nodes = nodes;
    }
    t.cpus.sort_by_key(|c| c.id);
    t.devices.sort_by(|a, b| a.name.cmp(&b.name));
    t.memory_performance.put_in_order();
    pinctl_topology::sort_caches(&mut t.caches);
    crate::interrupts::put_in_order(&mut t.interrupts);
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"nodes":[
        {"id":1,"cpus":"2-3","memory_bytes":100,"memory_free_bytes":50,"has_cpu":true,"has_memory":true},
        {"id":0,"cpus":"0-1","memory_bytes":100,"memory_free_bytes":50,"has_cpu":true,"has_memory":true}],
      "distances":[[10,21],[21,10]],
      "cpus":[{"id":2,"online":true,"package":1,"core":0,"node":1},
              {"id":0,"online":true,"package":0,"core":0,"node":0}],
      "devices":[{"name":"nvme0n1","kind":"nvme","pci":null,"node":1,"nodes":"1","locality":"numa-node"}],
      "host":{"kernel":null,"numa_balancing":null,"zone_reclaim_mode":null,"allowed_cpus":null,
              "allowed_nodes":null,"offline_nodes":""},
      "warnings":[]}"#;

    fn parse(text: &str) -> Result<Topology, String> {
        parse_snapshot(text.as_bytes(), Path::new("s.json")).map_err(|e| match e {
            SourceError::SnapshotInvalid { at, what, .. } => format!("{at}: {what}"),
            e => e.to_string(),
        })
    }

    #[test]
    fn order_does_not_matter_and_bom_is_accepted() {
        let t = parse(&format!("\u{feff}{GOOD}")).unwrap();
        assert_eq!(t.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(t.node(0).unwrap().cpus.to_string(), "0-1");
        assert_eq!(t.cpus.iter().map(|c| c.id).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(t.distances, [[10, 21], [21, 10]]);
        let cached = GOOD.replacen(
            r#""warnings":[]"#,
            r#""warnings":[],"caches":[{"level":3,"cpus":"2","size_bytes":null},{"level":3,"cpus":"0"}]"#,
            1,
        );
        let t = parse(&cached).unwrap();
        let caches: Vec<String> = t.caches.iter().map(|c| c.cpus.to_string()).collect();
        assert_eq!(caches, ["0", "2"], "ascending by their lowest CPU");
    }

    #[test]
    fn every_version_up_to_the_current_one_reads_and_newer_ones_are_refused() {
        // GOOD is what pinctl wrote before schema_version: device nodes as a list string.
        let old = parse(GOOD).unwrap();
        assert_eq!(old.devices[0].nodes.to_string(), "1");
        let current = serde_json::to_string(&old).unwrap();
        assert!(current.starts_with(&format!("{{\"schema_version\":{TOPOLOGY_SCHEMA_VERSION},")));
        assert!(current.contains(r#""nodes":[1]"#), "{current}");
        assert_eq!(parse(&current).unwrap(), old);
        let versioned = GOOD.replacen("{", r#"{"schema_version":1,"#, 1);
        assert_eq!(parse(&versioned).unwrap(), old);
        for (version, shown) in [("2", "2"), ("1.5", "1.5"), ("99999999999999999999", "1e+20")] {
            // A newer document may add fields: the version is still what gets reported.
            let newer =
                GOOD.replacen("{", &format!(r#"{{"schema_version":{version},"gpus":[],"#), 1);
            let e = parse_snapshot(newer.as_bytes(), Path::new("new.json")).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "snapshot `new.json` has schema_version {shown}, newer than 1, the newest \
                     this pinctl reads: use a newer pinctl, or write the snapshot again with \
                     this one's `pinctl topology --json`"
                )
            );
        }
        for bad in [r#""1""#, "-1", "null"] {
            let text = GOOD.replacen("{", &format!(r#"{{"schema_version":{bad},"#), 1);
            assert!(parse(&text).is_err(), "{bad}");
        }
    }

    #[test]
    fn warnings_are_this_pinctl_s_not_the_file_s() {
        let text = GOOD.replacen(r#""warnings":[]"#, r#""warnings":["stale"]"#, 1);
        assert!(parse(&text).unwrap().warnings.is_empty());
        let text =
            GOOD.replacen(r#""offline_nodes":"""#, r#""offline_nodes":"","memory_bytes":1000"#, 1);
        let w = parse(&text).unwrap().warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("the nodes' memory adds up to"), "{w:?}");
    }

    #[test]
    fn memory_performance_is_checked_against_the_nodes_and_put_in_order() {
        let pair = |c: u32, m: u32, ns: &str| {
            format!(
                r#"{{"cpu_node":{c},"memory_node":{m},"latency_ns":{ns},"read_bandwidth_gb_s":9.5,"threads":1,"latency_passes":3,"bandwidth_passes":3,"huge_page_bytes":0}}"#
            )
        };
        let with = |hmat: &str, pairs: &[String]| {
            GOOD.replacen(
                r#""warnings":[]"#,
                &format!(
                    r#""warnings":[],"memory_performance":{{"hmat":[{hmat}],"measured":{{"tool":"pinctl","measured_at":"2025-01-01T00:00:00Z","kernel":null,"quick":true,"budget_ms":1,"elapsed_ms":1,"buffer_bytes":1,"last_level_cache_bytes":null,"pairs":[{}]}}}}"#,
                    pairs.join(",")
                ),
                1,
            )
        };
        let hmat = r#"{"node":1,"class":"access1","initiators":[1],"read_latency_ns":80,"write_latency_ns":null,"read_bandwidth_mb_s":null,"write_bandwidth_mb_s":null}"#;
        let t = parse(&with(hmat, &[pair(1, 0, "120.5"), pair(0, 0, "80")])).unwrap();
        let m = t.memory_performance.measured.as_ref().unwrap();
        assert_eq!(
            m.pairs.iter().map(|p| (p.cpu_node, p.memory_node)).collect::<Vec<_>>(),
            [(0, 0), (1, 0)]
        );
        assert_eq!(
            t.memory_performance.hmat_latency(1, 1),
            Some((80, pinctl_topology::AccessClass::Access1))
        );
        let e = parse(&with(hmat, &[pair(0, 7, "80")])).unwrap_err();
        assert!(e.starts_with("memory_performance.measured.pairs[0].memory_node: node `7`"), "{e}");
        let e = parse(&with(&hmat.replace(r#""node":1"#, r#""node":3"#), &[])).unwrap_err();
        assert!(
            e.starts_with("memory_performance.hmat[0].node: node `3` is not in `nodes`"),
            "{e}"
        );
        let e = parse(&with(&format!("{hmat},{hmat}"), &[])).unwrap_err();
        assert!(e.starts_with("memory_performance.hmat[1]: repeats"), "{e}");
        let e = parse(&with(hmat, &[pair(0, 0, "-1")])).unwrap_err();
        assert!(e.contains("latency_ns: `-1` ns is not a memory latency"), "{e}");
    }

    /// Issue 26: one absurd number must be refused where it is read, by name, not planned on
    /// (1e308 ns made the planner pick the farthest node) nor shown as `0 ns`.
    #[test]
    fn absurd_latencies_and_node_ids_are_refused_by_value() {
        let pair = |ns: &str| {
            format!(
                r#"{{"cpu_node":0,"memory_node":1,"latency_ns":{ns},"read_bandwidth_gb_s":9.5,"threads":1,"latency_passes":3,"bandwidth_passes":3,"huge_page_bytes":0}}"#
            )
        };
        let with = |hmat_ns: &str, pairs: &str, not_measured: &str| {
            GOOD.replacen(
                r#""warnings":[]"#,
                &format!(
                    r#""warnings":[],"memory_performance":{{"hmat":[{{"node":1,"class":"access1","initiators":[1],"read_latency_ns":{hmat_ns},"write_latency_ns":null,"read_bandwidth_mb_s":null,"write_bandwidth_mb_s":null}}],"measured":{{"tool":"pinctl","measured_at":"2025-01-01T00:00:00Z","kernel":null,"quick":false,"budget_ms":1,"elapsed_ms":1,"buffer_bytes":1,"last_level_cache_bytes":null,"pairs":[{pairs}],"not_measured":[{not_measured}]}}}}"#
                ),
                1,
            )
        };
        assert!(parse(&with("80", &pair("120.5"), "")).is_ok());
        let cases = [
            (
                with("80", &pair("1e308"), ""),
                "measured.pairs[0].latency_ns: `1e308` ns is not a memory latency (pinctl believes 1 to 100000 ns)",
            ),
            (
                with("80", &pair("1e-300"), ""),
                "measured.pairs[0].latency_ns: `1e-300` ns is not a memory latency",
            ),
            (
                with("0", &pair("120.5"), ""),
                "hmat[0].read_latency_ns: `0` ns is not a memory latency",
            ),
            (with("4294967295", &pair("120.5"), ""), "hmat[0].read_latency_ns: `4294967295` ns"),
            (
                with("80", &pair("120.5"), r#"{"node":4294967295,"why":"offline"}"#),
                "measured.not_measured[0].node: node id `4294967295` is too large (at most 4095",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text).unwrap_err();
            assert!(e.contains(want), "want {want}\n got {e}");
        }
    }

    #[test]
    fn inconsistent_snapshots_name_the_json_path() {
        let cases = [
            (
                r#""cpus":"0-1","memory_bytes":100"#,
                r#""cpus":"0-2","memory_bytes":100"#,
                "nodes[1].cpus: CPU `2` is also in node `1`",
            ),
            (r#"{"id":0,"cpus""#, r#"{"id":1,"cpus""#, "nodes[1].id: node `1` is also `nodes[0]`"),
            ("[[10,21],[21,10]]", "[[10,21]]", "distances: 1 rows for 2 nodes"),
            ("[[10,21],[21,10]]", "[[10,21],[21]]", "distances[1]: 1 columns"),
            ("[[10,21],[21,10]]", "[[0,0],[0,0]]", "distances[0][0]: distance `0`"),
            (
                r#""node":1,"nodes":"1""#,
                r#""node":0,"nodes":"1""#,
                "devices[0].node: node `0` disagrees",
            ),
            (
                r#""core":0,"node":1}"#,
                r#""core":0,"node":7}"#,
                "cpus[0].node: node `7` is not in `nodes`",
            ),
            (
                r#""memory_free_bytes":50,"has_cpu":true,"has_memory":true}]"#,
                r#""memory_free_bytes":500,"has_cpu":true,"has_memory":true}]"#,
                "nodes[1].memory_free_bytes",
            ),
            (
                r#""locality":"numa-node"}"#,
                r#""locality":"numa-node"},{"name":"nvme0n1","kind":"nvme","pci":null,"node":1,"nodes":"1","locality":"numa-node"}"#,
                "devices[1].name: device `nvme0n1` is also `devices[0]`",
            ),
            (
                r#""name":"nvme0n1""#,
                r#""name":"\u001b[31m\nnode 9 cpus: FAKE""#,
                "devices[0].name: `\\u{1b}[31m\\nnode 9",
            ),
            (
                r#""locality":"numa-node"}"#,
                r#""locality":"numa-node","aliases":["card0"]},{"name":"nvidia0","kind":"gpu","pci":null,"node":1,"nodes":"1","locality":"numa-node","aliases":["card0"]}"#,
                "devices[1].aliases[0]: `card0` also names `devices[0]`",
            ),
            (
                r#""locality":"numa-node"}"#,
                r#""locality":"numa-node","aliases":["nvme0n1"]}"#,
                "devices[0].aliases[0]: `nvme0n1` also names `devices[0]`",
            ),
            (
                r#""locality":"numa-node"}"#,
                r#""locality":"numa-node","aliases":["a/b"]}"#,
                "devices[0].aliases[0]: `a/b` is not a device name",
            ),
            (
                r#"{"id":1,"cpus""#,
                r#"{"id":4294967295,"cpus""#,
                "nodes[0].id: node id `4294967295` is above 4095",
            ),
            (
                r#""warnings":[]"#,
                r#""warnings":[],"caches":[{"level":3,"cpus":"0,2"},{"level":3,"cpus":"2"}]"#,
                "caches[1].cpus: CPU `2` is also in `caches[0].cpus`",
            ),
            (
                r#""warnings":[]"#,
                r#""warnings":[],"caches":[{"level":3,"cpus":"0-1"}]"#,
                "caches[0].cpus: CPU `1` is not in `cpus`",
            ),
            (
                r#""warnings":[]"#,
                r#""warnings":[],"caches":[{"level":0,"cpus":"0"}]"#,
                "caches[0].level: level `0`",
            ),
            (
                r#""warnings":[]"#,
                r#""warnings":[],"caches":[{"level":3,"cpus":""}]"#,
                "caches[0].cpus: a cache shared by no CPU",
            ),
        ];
        for (from, to, want) in cases {
            assert!(GOOD.contains(from), "{from}");
            let e = parse(&GOOD.replacen(from, to, 1)).unwrap_err();
            assert!(e.starts_with(want), "{to}: got {e}, want {want}");
        }
    }
}
