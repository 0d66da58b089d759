//! How far node a is from node b, and by which measure: the one place the planner asks.
//!
//! The best measure the topology carries is used whole, never mixed with another (their
//! numbers are in different units): latency measured by `pinctl probe`, else HMAT latency,
//! else the firmware's SLIT, else the kernel's defaults (10 to itself, 20 to any other). A
//! measure is usable only when it answers for every pair of nodes the planner may compare
//! (nodes an instance may run on, and the nodes of devices); when it does not, the next one is
//! used and the plan says why. Measured and HMAT latencies are in nanoseconds from a CPU node
//! to a memory node; the planner's distance between two nodes is the mean of both directions
//! where both were measured (one node may have no memory or no CPUs), in tenths of a
//! nanosecond so the costs stay exact integers. With a measure in nanoseconds, packages no
//! longer stand in for distance: crossing a socket costs what it was measured to cost.

use std::collections::HashMap;

use pinctl_topology::{Measurement, NodeId, Topology};
use serde::Serialize;

/// Which numbers the planner compared nodes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum DistanceMeasure {
    /// Idle latency measured by `pinctl probe` and saved with the topology.
    Measured,
    /// HMAT latency, as the firmware rated it.
    Hmat,
    /// The firmware's SLIT distances (`nodeN/distance`).
    Slit,
    /// No table at all: 10 to itself, 20 to any other node.
    Assumed,
}

impl DistanceMeasure {
    /// Whether the numbers are nanoseconds, which already count a socket crossing.
    pub(crate) fn is_latency(self) -> bool {
        matches!(self, DistanceMeasure::Measured | DistanceMeasure::Hmat)
    }

    /// A distance as the plan's reasons show it: `distance 12` (SLIT), `measured 118.3 ns`,
    /// `HMAT 80 ns`.
    pub(crate) fn show(self, d: u32) -> String {
        match self {
            DistanceMeasure::Measured => format!("measured {}", tenths(d)),
            DistanceMeasure::Hmat => format!("HMAT {d} ns"),
            DistanceMeasure::Slit | DistanceMeasure::Assumed => format!("distance {d}"),
        }
    }

    /// A distance as a bare value beside another of the same measure: `118.3 ns`, `80 ns`,
    /// `12`.
    pub(crate) fn value(self, d: u32) -> String {
        match self {
            DistanceMeasure::Measured => tenths(d),
            DistanceMeasure::Hmat => format!("{d} ns"),
            DistanceMeasure::Slit | DistanceMeasure::Assumed => d.to_string(),
        }
    }
}

/// What a plan compared nodes by, and why not by something better the topology carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DistanceReport {
    pub measure: DistanceMeasure,
    /// One sentence: where the numbers come from, and why a better measure the topology has
    /// could not be used. `None` for SLIT when the topology has nothing else.
    pub note: Option<String>,
}

/// Distance of a node to itself and to any other when the topology has no SLIT table.
const LOCAL_DISTANCE: u32 = 10;
const UNKNOWN_REMOTE_DISTANCE: u32 = 20;

/// The matrix the planner uses, by position in `Topology::nodes`, and what it is.
#[derive(Debug, Clone)]
pub(crate) struct DistanceTable {
    pub(crate) matrix: Vec<Vec<u32>>,
    pub(crate) report: DistanceReport,
}

impl DistanceTable {
    /// The best usable measure for `topology`, whose nodes `needed` (by position) the planner
    /// may compare; `only` restricts the choice (the SLIT plan that explains what a measure
    /// changed). Each measure passed over says why in the report's note.
    pub(crate) fn new(
        topology: &Topology,
        needed: &[bool],
        only: Option<DistanceMeasure>,
    ) -> DistanceTable {
        let mut notes: Vec<String> = Vec::new();
        let wanted = |m: DistanceMeasure| only.is_none_or(|o| o == m);
        let measured = topology.memory_performance.measured.as_ref();
        if let Some(m) = measured.filter(|_| wanted(DistanceMeasure::Measured)) {
            if let Some(table) = DistanceTable::measured(topology, needed, m, &mut notes) {
                return table;
            }
        }
        if wanted(DistanceMeasure::Hmat) {
            if let Some(table) = DistanceTable::hmat(topology, needed, &mut notes) {
                return table;
            }
        }
        DistanceTable::firmware(topology, notes)
    }

    /// The latency `pinctl probe` measured, if it is believed and answers for every needed
    /// pair; else why not, in `notes`.
    fn measured(
        topology: &Topology,
        needed: &[bool],
        m: &Measurement,
        notes: &mut Vec<String>,
    ) -> Option<DistanceTable> {
        if m.quick {
            notes.push("the saved measurement is a --quick one, not for planning".to_string());
            return None;
        }
        if let Some(why) = m.implausible() {
            notes.push(format!("the saved measurement is not believed ({why})"));
            return None;
        }
        let figures = m
            .pairs
            .iter()
            .map(|p| (p.cpu_node, p.memory_node, (p.latency_ns * 10.0).round() as u32));
        match latency_matrix(topology, needed, figures) {
            Ok(matrix) => Some(DistanceTable {
                matrix,
                report: DistanceReport {
                    measure: DistanceMeasure::Measured,
                    note: Some(format!(
                        "measured idle latency (`pinctl probe`, {} at {})",
                        m.tool, m.measured_at
                    )),
                },
            }),
            Err((a, b)) => {
                notes.push(format!(
                    "the saved measurement has no latency between node {a} and node {b}"
                ));
                None
            }
        }
    }

    /// The firmware's HMAT latency, if it has any, is believed and answers for every needed
    /// pair; else why not, in `notes`. Its note carries the notes before it.
    fn hmat(
        topology: &Topology,
        needed: &[bool],
        notes: &mut Vec<String>,
    ) -> Option<DistanceTable> {
        let performance = &topology.memory_performance;
        let absurd = performance.hmat.iter().find_map(|a| {
            let ns = a.latency_ns()?;
            pinctl_topology::implausible_latency(f64::from(ns))
                .map(|why| format!("HMAT is not believed (memory node {}: {why})", a.node))
        });
        if let Some(why) = absurd {
            notes.push(why);
            return None;
        }
        if performance.hmat.is_empty() {
            return None;
        }
        match latency_matrix(topology, needed, performance.hmat_latencies()) {
            Ok(matrix) => {
                let note = std::iter::once("HMAT read latency, as the firmware rated it".into())
                    .chain(notes.drain(..))
                    .collect::<Vec<String>>()
                    .join("; ");
                Some(DistanceTable {
                    matrix,
                    report: DistanceReport { measure: DistanceMeasure::Hmat, note: Some(note) },
                })
            }
            Err((a, b)) => {
                notes.push(format!(
                    "HMAT names only each node's best initiators and says nothing of node {a} \
                     and node {b}"
                ));
                None
            }
        }
    }

    /// The firmware's SLIT distances, or the kernel's defaults where it has none, with the
    /// notes of the measures passed over.
    fn firmware(topology: &Topology, notes: Vec<String>) -> DistanceTable {
        let n = topology.nodes.len();
        let matrix = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        topology.distances.get(i).and_then(|row| row.get(j)).copied().unwrap_or(
                            if i == j { LOCAL_DISTANCE } else { UNKNOWN_REMOTE_DISTANCE },
                        )
                    })
                    .collect()
            })
            .collect();
        let (measure, first) = if !topology.distances.is_empty() {
            (DistanceMeasure::Slit, None)
        } else {
            (
                DistanceMeasure::Assumed,
                Some("no SLIT table: 10 to a node itself, 20 to any other".to_string()),
            )
        };
        let note: Vec<String> = first.into_iter().chain(notes).collect();
        DistanceTable {
            matrix,
            report: DistanceReport { measure, note: (!note.is_empty()).then(|| note.join("; ")) },
        }
    }
}

/// Tenths of a nanosecond as `118.3 ns`.
fn tenths(d: u32) -> String {
    format!("{}.{} ns", d / 10, d % 10)
}

/// The matrix of a latency measure, by node position, from its `(from, to, latency)` figures
/// (the first figure of a pair counts): the mean of both directions where both exist, else
/// the one that does. `Err((a, b))` names the first pair of `needed` nodes it has no latency
/// for, either way. Each figure is placed once, never searched for: a measurement of 4,096
/// nodes costs what the matrix costs (issue 26: a search per pair took 80 s).
fn latency_matrix(
    topology: &Topology,
    needed: &[bool],
    figures: impl IntoIterator<Item = (NodeId, NodeId, u32)>,
) -> Result<Vec<Vec<u32>>, (NodeId, NodeId)> {
    let ids: Vec<NodeId> = topology.nodes.iter().map(|n| n.id).collect();
    let n = ids.len();
    let position: HashMap<NodeId, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    // One matrix: figures first (NONE where a direction has none), then each pair's value.
    const NONE: u32 = u32::MAX;
    let mut matrix = vec![vec![NONE; n]; n];
    for (from, to, latency) in figures {
        if let (Some(&a), Some(&b)) = (position.get(&from), position.get(&to)) {
            if matrix[a][b] == NONE {
                matrix[a][b] = latency.min(NONE - 1);
            }
        }
    }
    let known = |v: u32| (v != NONE).then_some(v);
    for i in 0..n {
        matrix[i][i] = known(matrix[i][i]).unwrap_or(0);
        for j in i + 1..n {
            let value = match (known(matrix[i][j]), known(matrix[j][i])) {
                (Some(a), Some(b)) => Some(((u64::from(a) + u64::from(b)) / 2) as u32),
                (one, other) => one.or(other),
            };
            match value {
                Some(v) => {
                    matrix[i][j] = v;
                    matrix[j][i] = v;
                }
                None if needed[i] && needed[j] => return Err((ids[i], ids[j])),
                None => {}
            }
        }
    }
    // Pairs the planner never compares still get a value: the largest, never a flattering one.
    let largest = matrix.iter().flatten().copied().filter(|&v| v != NONE).max().unwrap_or(0);
    for v in matrix.iter_mut().flatten().filter(|v| **v == NONE) {
        *v = largest;
    }
    Ok(matrix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinctl_topology::Measurement;

    fn topology() -> Topology {
        pinctl_testkit::three_nodes_slit_12_32()
    }

    fn measured(latency: impl Fn(u32, u32) -> Option<f64>) -> Measurement {
        pinctl_testkit::measurement(
            (0..3)
                .flat_map(|c| (0..3).map(move |m| (c, m)))
                .filter_map(|(c, m)| Some((c, m, latency(c, m)?))),
        )
    }

    #[test]
    fn measured_latency_wins_and_directions_are_averaged() {
        let mut t = topology();
        t.memory_performance.measured = Some(measured(|c, m| {
            Some(if c == m { 80.0 } else { 100.0 + f64::from(c + m) + f64::from(c) * 0.5 })
        }));
        let d = DistanceTable::new(&t, &[true; 3], None);
        assert_eq!(d.report.measure, DistanceMeasure::Measured);
        // 0->1 is 101.0, 1->0 is 101.5: 101.25 in tenths, halved down.
        assert_eq!(d.matrix[0][1], 1012);
        assert_eq!(d.matrix[1][0], 1012);
        assert_eq!(d.matrix[2][2], 800);
        assert_eq!(d.report.measure.show(1012), "measured 101.2 ns");
        assert_eq!(d.report.measure.value(1012), "101.2 ns");
        let only_slit = DistanceTable::new(&t, &[true; 3], Some(DistanceMeasure::Slit));
        assert_eq!((only_slit.report.measure, only_slit.matrix[0][2]), (DistanceMeasure::Slit, 32));
        assert_eq!(only_slit.report.measure.show(32), "distance 32");
    }

    #[test]
    fn a_measurement_that_leaves_a_needed_pair_out_gives_way_and_says_why() {
        let mut t = topology();
        // Nothing between node 1 and node 2, either way.
        t.memory_performance.measured =
            Some(measured(|c, m| (!matches!((c, m), (1, 2) | (2, 1))).then_some(100.0)));
        let d = DistanceTable::new(&t, &[true; 3], None);
        assert_eq!(d.report.measure, DistanceMeasure::Slit);
        assert_eq!(
            d.report.note.as_deref(),
            Some("the saved measurement has no latency between node 1 and node 2")
        );
        // When node 2 is never compared, the measurement serves.
        let d = DistanceTable::new(&t, &[true, true, false], None);
        assert_eq!(d.report.measure, DistanceMeasure::Measured);
        assert_eq!(d.matrix[1][2], 1000, "the largest value, never a flattering one");
        // One direction is enough: a CPU-only node 1 has no memory to measure into.
        t.memory_performance.measured =
            Some(measured(|c, m| (m != 1).then_some(if c == m { 80.0 } else { 150.0 })));
        let d = DistanceTable::new(&t, &[true; 3], None);
        assert_eq!(
            (d.report.measure, d.matrix[0][1], d.matrix[1][1]),
            (DistanceMeasure::Measured, 1500, 0)
        );
    }

    #[test]
    fn quick_measurements_are_not_planned_on() {
        let mut t = topology();
        let mut m = measured(|_, _| Some(90.0));
        m.quick = true;
        t.memory_performance.measured = Some(m);
        let d = DistanceTable::new(&t, &[true; 3], None);
        assert_eq!(d.report.measure, DistanceMeasure::Slit);
        assert_eq!(
            d.report.note.as_deref(),
            Some("the saved measurement is a --quick one, not for planning")
        );
    }

    #[test]
    fn hmat_serves_only_when_it_names_every_pair() {
        let mut t = topology();
        let access = |node: u32, initiators: &str, ns: u32| pinctl_topology::HmatAccess {
            node,
            class: pinctl_topology::AccessClass::Access1,
            initiators: initiators.parse().unwrap(),
            read_latency_ns: Some(ns),
            write_latency_ns: None,
            read_bandwidth_mb_s: None,
            write_bandwidth_mb_s: None,
        };
        // What sysfs gives: each node's best initiator is itself.
        t.memory_performance.hmat =
            vec![access(0, "0", 80), access(1, "1", 80), access(2, "2", 85)];
        let d = DistanceTable::new(&t, &[true; 3], None);
        assert_eq!(d.report.measure, DistanceMeasure::Slit);
        assert_eq!(
            d.report.note.as_deref(),
            Some(
                "HMAT names only each node's best initiators and says nothing of node 0 and node 1"
            )
        );
        // A complete table (an hwloc export with every initiator): HMAT serves.
        t.memory_performance.hmat.extend([
            access(0, "1", 120),
            access(1, "2", 140),
            access(2, "0", 150),
        ]);
        let d = DistanceTable::new(&t, &[true; 3], None);
        assert_eq!(
            (d.report.measure, d.matrix[0][1], d.matrix[0][2]),
            (DistanceMeasure::Hmat, 120, 150)
        );
        assert_eq!(d.report.measure.show(120), "HMAT 120 ns");
        t.distances.clear();
        t.memory_performance.hmat.clear();
        let d = DistanceTable::new(&t, &[true; 3], None);
        assert_eq!((d.report.measure, d.matrix[0][1]), (DistanceMeasure::Assumed, 20));
    }
}
