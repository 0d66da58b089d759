//! Plans on measured costs that contradict SLIT: the fallback node of a `near` instance whose
//! device node is taken, and the nodes of a multi-node instance, follow the measured latency
//! (packages no longer stand in for it); the plan says which measure it used and explains
//! each choice the measurement changed against the plan SLIT alone gives; a `--quick`
//! measurement, or HMAT that names only the best initiators, is not planned on, with the
//! reason; the choice is the same on every run.

mod common;

use common::*;
use pinctl_plan::DistanceMeasure;
use pinctl_topology::{AccessClass, HmatAccess, Measurement, NodeId, Topology};

/// A measurement of every pair of `t`'s nodes, latency by `latency(cpu, memory)`.
fn measurement(t: &Topology, latency: impl Fn(NodeId, NodeId) -> f64) -> Measurement {
    let ids: Vec<NodeId> = t.nodes.iter().map(|n| n.id).collect();
    let mut m = pinctl_testkit::measurement(
        ids.iter()
            .flat_map(|&c| ids.iter().map(move |&m| (c, m)))
            .map(|(c, m)| (c, m, latency(c, m))),
    );
    m.measured_at = "2025-06-01T12:00:00Z".into();
    m
}

/// EPYC NPS4 (SLIT 10/12/32, nvme0n1 on node 2) measured: 90 ns local, 140 ns inside a
/// socket, 200 ns across, except node 4 (the other socket, SLIT 32) at 105 ns from node 2.
fn epyc_measured() -> Topology {
    let mut t = epyc();
    let m = measurement(&t, |c, m| match (c.min(m), c.max(m)) {
        _ if c == m => 90.0,
        (2, 4) => 105.0,
        (a, b) if a / 4 == b / 4 => 140.0,
        _ => 200.0,
    });
    t.memory_performance.measured = Some(m);
    t
}

const TWO_TIKV: &str = r#"
[service.tikv]
command = ["/bin/tikv", "{instance}"]
instances = 2
near = ["nvme0n1"]
"#;

#[test]
fn the_fallback_for_a_taken_device_node_is_the_nearest_by_measurement() {
    let slit_plan = plan_text(&epyc(), TWO_TIKV, false).unwrap();
    assert_eq!(
        slit_plan.instance("tikv-0").unwrap().placement.nodes.to_string(),
        "0",
        "SLIT: 12 to node 2"
    );
    assert_eq!(slit_plan.distances.measure, DistanceMeasure::Slit);
    assert_eq!(slit_plan.distances.note, None);

    let plan = plan_text(&epyc_measured(), TWO_TIKV, false).unwrap();
    assert_eq!(plan.distances.measure, DistanceMeasure::Measured);
    assert_eq!(
        plan.distances.note.as_deref(),
        Some("measured idle latency (`pinctl probe`, pinctl 0.1.0 at 2025-06-01T12:00:00Z)")
    );
    // Lowest ids first: tikv-0 takes the device's node, tikv-1 the nearest other.
    assert_eq!(plan.instance("tikv-0").unwrap().placement.nodes.to_string(), "2");
    let moved = plan.instance("tikv-1").unwrap();
    assert_eq!(moved.placement.nodes.to_string(), "4", "105 ns to node 2, though SLIT says 32");
    assert!(
        moved.reasons.contains(
            &"near `nvme0n1`: node 2 went to tikv-0, so the closest node it can have (measured 105.0 ns)".to_string()
        ),
        "{:#?}",
        moved.reasons
    );
    assert!(
        moved.reasons.contains(
            &"node 4 instead of node 0 (where SLIT alone puts it): measured 105.0 ns vs 140.0 ns to near `nvme0n1` (node 2), though SLIT says 32 vs 12".to_string()
        ),
        "{:#?}",
        moved.reasons
    );
    assert_eq!(
        plan.warnings,
        [
            "tikv-1: not on the node of `nvme0n1` (node 2 went to tikv-0): placed on node 4 at measured 105.0 ns"
        ]
    );
    // Both plans give an instance node 2: that is no change to explain.
    assert!(!plan.instance("tikv-0").unwrap().reasons.iter().any(|r| r.contains("instead of")));
}

#[test]
fn close_nodes_are_the_closest_measured_even_across_a_socket() {
    // Inside socket 0 every pair measures 130 ns or more; nodes 0 and 4 (across, SLIT 32)
    // measure 110 ns. Packages no longer stand in for distance once it is measured.
    let mut t = epyc();
    t.memory_performance.measured = Some(measurement(&t, |c, m| match (c.min(m), c.max(m)) {
        _ if c == m => 90.0,
        (0, 4) => 110.0,
        (a, b) if a / 4 == b / 4 => 130.0 + f64::from(a + b),
        _ => 220.0,
    }));
    let text = r#"
[service.db]
command = ["/bin/db"]
nodes = 2
"#;
    let on_slit = plan_text(&epyc(), text, false).unwrap();
    assert_eq!(on_slit.instance("db").unwrap().placement.nodes.to_string(), "0-1");
    let plan = plan_text(&t, text, false).unwrap();
    let db = plan.instance("db").unwrap();
    assert_eq!(db.placement.nodes.to_string(), "0,4");
    assert_eq!(plan.cost.cross_package_pairs, 0, "no package term on a measured plan");
    assert_eq!(
        db.reasons,
        [
            // Package 0 had room (nodes 0-1, SLIT's choice): the measurement chose, and the
            // reason says so (issue 26), not "no single package had room".
            "owns nodes 0,4 (nodes = 2): packages 0, 1 (the measured latency decides, not the package), largest measured latency between them 110.0 ns",
            "nodes 0,4 instead of nodes 0-1 (where SLIT alone puts it): measured 110.0 ns vs 131.0 ns between its nodes, though SLIT says 32 vs 12",
        ]
    );
}

#[test]
fn plans_on_a_measurement_are_deterministic() {
    let t = epyc_measured();
    let config = bundled("tidb-epyc.toml");
    let inputs = inputs(&t, &config, false);
    let first = pinctl_plan::plan(&t, &config, &inputs).unwrap();
    for _ in 0..3 {
        let again = pinctl_plan::plan(&t, &config, &inputs).unwrap();
        assert_eq!(again, first);
        assert_eq!(
            serde_json::to_string(&again.document(&[], &[])).unwrap(),
            serde_json::to_string(&first.document(&[], &[])).unwrap()
        );
    }
    let json = serde_json::to_value(first.document(&[], &[])).unwrap();
    assert_eq!(json["distances"]["measure"], "measured");
}

/// Issue 26: one latency of 1e308 ns (or 1e-300) in an otherwise sane measurement wrapped a
/// sum of distances (a debug build panicked) and made the planner pick the nodes that value
/// says are farthest. A measurement with a latency no memory has is not planned on, the plan
/// says which value, and the plan stays the one the firmware's table gives.
#[test]
fn one_absurd_latency_never_turns_the_plan_upside_down() {
    let text = r#"
[service.db]
command = ["/bin/db"]
nodes = 3
"#;
    let sane = plan_text(&epyc(), text, false).unwrap();
    for absurd in [1e308, 1e-300, 0.0] {
        let mut t = epyc();
        t.memory_performance.measured = Some(measurement(&t, |c, m| match (c.min(m), c.max(m)) {
            (0, 1) if c != m => absurd,
            _ if c == m => 90.0,
            (a, b) if a / 4 == b / 4 => 140.0,
            _ => 200.0,
        }));
        let plan = plan_text(&t, text, false).unwrap();
        assert_eq!(plan.distances.measure, DistanceMeasure::Slit, "{absurd}");
        let note = plan.distances.note.clone().unwrap();
        assert!(
            note.starts_with(
                "the saved measurement is not believed (CPU node 0 to memory node 1: `"
            ),
            "{note}"
        );
        assert_eq!(
            plan.instance("db").unwrap().placement,
            sane.instance("db").unwrap().placement,
            "{absurd}: the plan SLIT gives"
        );
    }
}

#[test]
fn a_quick_measurement_is_not_planned_on() {
    let mut t = epyc_measured();
    if let Some(m) = t.memory_performance.measured.as_mut() {
        m.quick = true;
    }
    let plan = plan_text(&t, TWO_TIKV, false).unwrap();
    assert_eq!(plan.distances.measure, DistanceMeasure::Slit);
    assert_eq!(
        plan.distances.note.as_deref(),
        Some("the saved measurement is a --quick one, not for planning")
    );
    assert_eq!(plan.instance("tikv-0").unwrap().placement.nodes.to_string(), "0");
}

#[test]
fn hmat_is_planned_on_when_it_names_every_pair_and_says_why_not_otherwise() {
    let access = |node: NodeId, from: NodeId, ns: u32| HmatAccess {
        node,
        class: AccessClass::Hwloc,
        initiators: std::iter::once(from).collect(),
        read_latency_ns: Some(ns),
        write_latency_ns: None,
        read_bandwidth_mb_s: None,
        write_bandwidth_mb_s: None,
    };
    // What sysfs publishes: each node's own best initiator only.
    let mut t = epyc();
    t.memory_performance.hmat = (0..8).map(|n| access(n, n, 90)).collect();
    let plan = plan_text(&t, TWO_TIKV, false).unwrap();
    assert_eq!(plan.distances.measure, DistanceMeasure::Slit);
    assert_eq!(
        plan.distances.note.as_deref(),
        Some("HMAT names only each node's best initiators and says nothing of node 0 and node 1")
    );
    // An export with every initiator of every node (hwloc can carry one): HMAT decides.
    t.memory_performance.hmat = (0..8)
        .flat_map(|n| (0..8).map(move |from| (n, from)))
        .map(|(n, from)| {
            let ns = match (n.min(from), n.max(from)) {
                _ if n == from => 90,
                (2, 3) => 100,
                (a, b) if a / 4 == b / 4 => 150,
                _ => 210,
            };
            access(n, from, ns)
        })
        .collect();
    let plan = plan_text(&t, TWO_TIKV, false).unwrap();
    assert_eq!(plan.distances.measure, DistanceMeasure::Hmat);
    let moved = plan.instance("tikv-1").unwrap();
    assert_eq!(moved.placement.nodes.to_string(), "3");
    assert!(
        moved.reasons.contains(&"node 3 instead of node 0 (where SLIT alone puts it): HMAT says 100 ns vs 150 ns to near `nvme0n1` (node 2), where SLIT has a tie, 12 vs 12".to_string()),
        "{:#?}",
        moved.reasons
    );
}
