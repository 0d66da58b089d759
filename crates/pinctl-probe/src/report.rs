//! What a measurement says next to what the firmware says: per pair the measured latency,
//! its ratio to the CPU node's local latency, the read bandwidth, the SLIT distance and the
//! HMAT figures; and every ranking the measurement and SLIT disagree on. Pure: a
//! [`Topology`] that carries a measurement in, a [`ProbeDocument`] out.

use std::fmt;

use pinctl_topology::{Measurement, NodeId, Topology};
use serde::{Serialize, Serializer};

/// The version of the `pinctl probe --json` document (docs/probe.md): it goes up when a field
/// is removed, renamed or changes type or meaning; fields may be added within a version.
pub const PROBE_SCHEMA_VERSION: u32 = 1;

/// The `schema_version` of a probe document: always [`PROBE_SCHEMA_VERSION`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeSchemaVersion;

impl Serialize for ProbeSchemaVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(PROBE_SCHEMA_VERSION)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for ProbeSchemaVersion {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ProbeSchemaVersion".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "integer", "const": PROBE_SCHEMA_VERSION })
    }
}

/// Two latencies closer than this fraction of the smaller are a tie: a run-to-run wobble of a
/// few percent must not read as a ranking.
pub const TIE_FRACTION: f64 = 0.05;

/// `pinctl probe --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ProbeDocument {
    /// The version of this document's form: 1.
    pub schema_version: ProbeSchemaVersion,
    /// What was measured (as `memory_performance.measured` of `pinctl topology --json`).
    pub measured: Measurement,
    /// Each pair beside SLIT and HMAT, by CPU node then memory node.
    pub pairs: Vec<PairComparison>,
    /// Every ranking of two memory nodes, from one CPU node, that the measurement and SLIT
    /// disagree on.
    pub disagreements: Vec<Disagreement>,
}

/// One measured pair beside what the firmware says of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PairComparison {
    pub cpu_node: NodeId,
    pub memory_node: NodeId,
    pub latency_ns: f64,
    /// The latency over the CPU node's local latency (its own memory's, or for a node
    /// without memory its nearest).
    pub remote_ratio: f64,
    pub read_bandwidth_gb_s: f64,
    /// SLIT distance, when the topology has the table.
    pub slit: Option<u32>,
    /// HMAT read latency (ns) and read bandwidth (MB/s), where HMAT names the CPU node among
    /// the best initiators of the memory node.
    pub hmat_latency_ns: Option<u32>,
    pub hmat_read_bandwidth_mb_s: Option<u32>,
}

/// From `cpu_node`, memory node `measured_nearer` measured nearer than `slit_nearer`, while
/// SLIT ranks them the other way.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Disagreement {
    pub cpu_node: NodeId,
    pub measured_nearer: NodeId,
    pub slit_nearer: NodeId,
    /// Latencies of `measured_nearer` and `slit_nearer`, ns.
    pub latency_ns: [f64; 2],
    /// SLIT distances of `measured_nearer` and `slit_nearer`.
    pub slit: [u32; 2],
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "from CPU node {}: memory node {} measures nearer than node {} ({:.1} ns vs {:.1} \
             ns), though SLIT says {} vs {}",
            self.cpu_node,
            self.measured_nearer,
            self.slit_nearer,
            self.latency_ns[0],
            self.latency_ns[1],
            self.slit[0],
            self.slit[1]
        )
    }
}

impl ProbeDocument {
    /// The document of `measured` on `topology` (whose SLIT and HMAT it is set beside).
    pub fn new(topology: &Topology, measured: &Measurement) -> ProbeDocument {
        ProbeDocument {
            schema_version: ProbeSchemaVersion,
            pairs: compare(topology, measured),
            disagreements: disagreements(topology, measured),
            measured: measured.clone(),
        }
    }
}

/// Each measured pair beside SLIT and HMAT.
pub fn compare(topology: &Topology, m: &Measurement) -> Vec<PairComparison> {
    let hmat = &topology.memory_performance;
    m.pairs
        .iter()
        .map(|p| PairComparison {
            cpu_node: p.cpu_node,
            memory_node: p.memory_node,
            latency_ns: p.latency_ns,
            remote_ratio: m
                .remote_ratio(p.cpu_node, p.memory_node)
                .map_or(1.0, |r| (r * 100.0).round() / 100.0),
            read_bandwidth_gb_s: p.read_bandwidth_gb_s,
            slit: topology.distance(p.cpu_node, p.memory_node),
            hmat_latency_ns: hmat.hmat_latency(p.cpu_node, p.memory_node).map(|(ns, _)| ns),
            hmat_read_bandwidth_mb_s: hmat.hmat_read_bandwidth(p.cpu_node, p.memory_node),
        })
        .collect()
}

/// Every (CPU node, memory node a, memory node b) where SLIT ranks a strictly nearer than b
/// and the measurement ranks b nearer than a by more than [`TIE_FRACTION`]. A tie on either
/// side is not a disagreement. In CPU node order, then memory node order.
pub fn disagreements(topology: &Topology, m: &Measurement) -> Vec<Disagreement> {
    let mut out = Vec::new();
    for cpu in m.cpu_nodes().iter() {
        let row: Vec<(NodeId, f64, u32)> = m
            .pairs
            .iter()
            .filter(|p| p.cpu_node == cpu)
            .filter_map(|p| {
                Some((p.memory_node, p.latency_ns, topology.distance(cpu, p.memory_node)?))
            })
            .collect();
        for (i, &(a, lat_a, slit_a)) in row.iter().enumerate() {
            for &(b, lat_b, slit_b) in &row[i + 1..] {
                let (near, far) = match slit_a.cmp(&slit_b) {
                    std::cmp::Ordering::Less => ((a, lat_a, slit_a), (b, lat_b, slit_b)),
                    std::cmp::Ordering::Greater => ((b, lat_b, slit_b), (a, lat_a, slit_a)),
                    std::cmp::Ordering::Equal => continue,
                };
                // SLIT says `near` is nearer; the measurement disagrees when `far` is faster
                // by more than a tie.
                if far.1 * (1.0 + TIE_FRACTION) < near.1 {
                    out.push(Disagreement {
                        cpu_node: cpu,
                        measured_nearer: far.0,
                        slit_nearer: near.0,
                        latency_ns: [far.1, near.1],
                        slit: [far.2, near.2],
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(latencies: &[[f64; 3]; 3]) -> Measurement {
        pinctl_testkit::measurement(latencies.iter().enumerate().flat_map(|(c, row)| {
            row.iter().enumerate().map(move |(m, &ns)| (c as u32, m as u32, ns))
        }))
    }

    /// EPYC-like SLIT: 12 inside the socket, 32 across. The measurement finds node 2
    /// (across) faster from node 0 than node 1 (inside), and 1 and 2 alike from node 2.
    fn topology() -> Topology {
        pinctl_testkit::three_nodes_slit_12_32()
    }

    #[test]
    fn every_reversed_ranking_is_named_and_ties_are_not() {
        let t = topology();
        let m = measured(&[[80.0, 142.0, 118.0], [120.0, 80.0, 150.0], [150.0, 140.0, 81.0]]);
        let d = disagreements(&t, &m);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            d[0].to_string(),
            "from CPU node 0: memory node 2 measures nearer than node 1 (118.0 ns vs 142.0 ns), \
             though SLIT says 32 vs 12"
        );
        // Within 5 %: a tie, not a disagreement.
        let m = measured(&[[80.0, 120.0, 116.0], [120.0, 80.0, 150.0], [150.0, 140.0, 81.0]]);
        assert!(disagreements(&t, &m).is_empty());
    }

    #[test]
    fn pairs_sit_beside_slit_and_hmat() {
        let mut t = topology();
        t.memory_performance.hmat.push(pinctl_topology::HmatAccess {
            node: 1,
            class: pinctl_topology::AccessClass::Access1,
            initiators: "1".parse().unwrap(),
            read_latency_ns: Some(75),
            write_latency_ns: None,
            read_bandwidth_mb_s: Some(20000),
            write_bandwidth_mb_s: None,
        });
        let m = measured(&[[80.0, 142.0, 118.0], [120.0, 80.0, 150.0], [150.0, 140.0, 81.0]]);
        let doc = ProbeDocument::new(&t, &m);
        let p01 = &doc.pairs[1];
        assert_eq!(
            (p01.cpu_node, p01.memory_node, p01.slit, p01.remote_ratio),
            (0, 1, Some(12), 1.78)
        );
        let p11 = &doc.pairs[4];
        assert_eq!((p11.hmat_latency_ns, p11.hmat_read_bandwidth_mb_s), (Some(75), Some(20000)));
        assert_eq!(doc.pairs[3].hmat_latency_ns, None, "HMAT names only the best initiator");
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["schema_version"], 1);
        assert_eq!(json["disagreements"][0]["measured_nearer"], 2);
    }
}
