//! hwloc's memory attributes (`<memattr name="ReadLatency">` with one `<memattr_value>` per
//! target node and initiator): what hwloc read from HMAT (`access1` in sysfs, else `access0`)
//! or what a user annotated, as pinctl's [`HmatAccess`] entries of class `hwloc`.
//!
//! An initiator is a CPU set (or, rarely, an object); it stands for the nodes whose CPUs lie
//! inside it. The generic `Latency` and `Bandwidth` attributes fill both the read and the
//! write figure where hwloc gave no read or write one of its own, as the kernel does with
//! HMAT's "access" figures.

use std::collections::{BTreeMap, HashMap};

use pinctl_topology::{AccessClass, CpuSet, HmatAccess, Node, NodeId, NodeSet};
use roxmltree::Node as XmlNode;

use crate::{id_set, shown};

/// Per figure slot (read/write latency, read/write bandwidth): the value, and whether it came
/// from a generic attribute (which a specific one replaces).
type Figures = [(Option<u32>, bool); 4];

/// Which figure of an [`HmatAccess`] a memory attribute gives, and whether it is a generic
/// one (read and write alike) that a specific one overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Figure {
    ReadLatency,
    WriteLatency,
    ReadBandwidth,
    WriteBandwidth,
}

fn figures_of(name: &str) -> Option<(&'static [Figure], bool)> {
    Some(match name {
        "Latency" => (&[Figure::ReadLatency, Figure::WriteLatency], true),
        "ReadLatency" => (&[Figure::ReadLatency], false),
        "WriteLatency" => (&[Figure::WriteLatency], false),
        "Bandwidth" => (&[Figure::ReadBandwidth, Figure::WriteBandwidth], true),
        "ReadBandwidth" => (&[Figure::ReadBandwidth], false),
        "WriteBandwidth" => (&[Figure::WriteBandwidth], false),
        _ => return None,
    })
}

/// The nodes an initiator CPU set stands for: those with CPUs, all inside it.
pub(crate) fn initiator_nodes(nodes: &[Node], cpus: &CpuSet) -> NodeSet {
    nodes.iter().filter(|n| !n.cpus.is_empty() && n.cpus.is_subset(cpus)).map(|n| n.id).collect()
}

/// Every memory attribute value of the export that pinctl models, grouped by target node and
/// initiator nodes, in the order of [`pinctl_topology::MemoryPerformance::put_in_order`].
/// Values for targets that are not NUMA nodes, and initiators that stand for no node, are
/// left out; a value that is not a number is an error naming it.
pub(crate) fn memory_attributes(
    top: XmlNode<'_, '_>,
    nodes: &[Node],
    gp_to_node: &HashMap<&str, NodeId>,
) -> Result<Vec<HmatAccess>, String> {
    // (figure slot, generic?) values per (target, initiators); specific values win.
    let mut groups: BTreeMap<(NodeId, Vec<NodeId>), Figures> = BTreeMap::new();
    for attr in top.children().filter(|c| c.has_tag_name("memattr")) {
        let name = attr.attribute("name").unwrap_or("");
        let Some((figures, generic)) = figures_of(name) else { continue };
        for value in attr.children().filter(|c| c.has_tag_name("memattr_value")) {
            if value.attribute("target_obj_type") != Some("NUMANode") {
                continue;
            }
            let Some(&target) =
                value.attribute("target_obj_gp_index").and_then(|gp| gp_to_node.get(gp.trim()))
            else {
                continue;
            };
            let initiators = match value.attribute("initiator_cpuset").filter(|s| !s.is_empty()) {
                Some(set) => {
                    initiator_nodes(nodes, &id_set(Some(set), "a memory attribute's initiator")?)
                }
                None => match (
                    value.attribute("initiator_obj_type"),
                    value
                        .attribute("initiator_obj_gp_index")
                        .and_then(|gp| gp_to_node.get(gp.trim())),
                ) {
                    (Some("NUMANode"), Some(&node)) => std::iter::once(node).collect(),
                    _ => NodeSet::new(),
                },
            };
            if initiators.is_empty() {
                continue;
            }
            let raw = value.attribute("value").unwrap_or("");
            let number: u32 =
                raw.trim().parse::<u64>().ok().and_then(|v| u32::try_from(v).ok()).ok_or_else(
                    || {
                        format!(
                            "memory attribute `{}` has value `{}`, not a number",
                            shown(name),
                            shown(raw)
                        )
                    },
                )?;
            let slots = groups.entry((target, initiators.iter().collect())).or_default();
            for &figure in figures {
                let slot = &mut slots[figure as usize];
                // A specific figure replaces a generic one; a generic one fills only a gap.
                if slot.0.is_none() || (slot.1 && !generic) {
                    *slot = (Some(number).filter(|&v| v > 0), generic);
                }
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|((node, initiators), slots)| HmatAccess {
            node,
            class: AccessClass::Hwloc,
            initiators: initiators.into_iter().collect(),
            read_latency_ns: slots[Figure::ReadLatency as usize].0,
            write_latency_ns: slots[Figure::WriteLatency as usize].0,
            read_bandwidth_mb_s: slots[Figure::ReadBandwidth as usize].0,
            write_bandwidth_mb_s: slots[Figure::WriteBandwidth as usize].0,
        })
        .collect())
}
