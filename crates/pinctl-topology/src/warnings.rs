//! Host settings and firmware gaps that defeat or weaken pinning (DOMAIN.md, rule 6).

use crate::{CpuSet, NodeSet, Topology};

/// The share of the machine's memory (`/proc/meminfo`) that the nodes' memory must add up to;
/// below it the firmware's NUMA tables disagree with the machine (docs/topology.md).
pub const MEMORY_AGREEMENT_PERCENT: u64 = 90;

/// Warnings about the host, in a stable order: kernel settings, hidden NUMA, figures of the
/// firmware that disagree (memory, CPUs, memory-less nodes), unknown devices.
pub fn host_warnings(t: &Topology) -> Vec<String> {
    let mut out = Vec::new();
    if t.host.numa_balancing.is_some_and(|v| v != 0) {
        out.push(
            "kernel.numa_balancing is on: automatic NUMA balancing migrates pages of pinned \
             services needlessly; set it to 0 where placement is static"
                .to_string(),
        );
    }
    if let Some(mode) = t.host.zone_reclaim_mode.filter(|&m| m != 0) {
        out.push(format!(
            "vm.zone_reclaim_mode is {mode}: the kernel reclaims local page cache before \
             allocating on another node, which can stall allocations for seconds; 0 is the default"
        ));
    }
    let packages = t.package_count();
    if packages > 1 && t.nodes.len() == 1 {
        out.push(format!(
            "{packages} CPU packages but one NUMA node: NUMA is hidden (BIOS memory interleaving \
             or numa=off); the latency differences remain, pinctl cannot see them"
        ));
    }
    out.extend(memory_disagreement(t));
    out.extend(cpus_in_no_node(t));
    out.extend(memoryless_cpu_nodes(t));
    for d in t.devices.iter().filter(|d| d.nodes.is_empty()) {
        out.push(format!(
            "device `{}` has unknown locality: its firmware reports numa_node -1 and nothing else \
             names its node",
            d.name
        ));
    }
    out
}

/// The nodes' MemTotal adds up to less than [`MEMORY_AGREEMENT_PERCENT`] of the machine's
/// (seen on virtual machines: 4.4 GiB in the nodes of a 126 GiB guest). Said only when every
/// node and the machine report a figure: an unknown one is not a disagreement.
fn memory_disagreement(t: &Topology) -> Option<String> {
    let machine = t.host.memory_bytes.filter(|&m| m > 0)?;
    let nodes: Option<Vec<u64>> = t.nodes.iter().map(|n| n.memory_bytes).collect();
    let sum = nodes.filter(|n| !n.is_empty())?.iter().fold(0u64, |a, &b| a.saturating_add(b));
    // u128: a petabyte machine times 100 still fits, and no rounding decides the verdict.
    if u128::from(sum) * 100 >= u128::from(machine) * u128::from(MEMORY_AGREEMENT_PERCENT) {
        return None;
    }
    let percent = u128::from(sum) * 100 / u128::from(machine);
    Some(format!(
        "the nodes' memory adds up to {} ({percent} %) of the machine's {} (/proc/meminfo \
         MemTotal): the firmware's NUMA tables describe less memory than the machine has \
         (common on virtual machines); plans use the per-node figures",
        gib(sum),
        gib(machine)
    ))
}

/// Online CPUs that no online node's `cpulist` names: the firmware's NUMA tables leave them
/// out, and no plan places anything on them.
fn cpus_in_no_node(t: &Topology) -> Option<String> {
    if t.nodes.is_empty() {
        return None;
    }
    // A node's list is the fact plans use; `Cpu::node` alone could be stale in an edited
    // snapshot.
    let placed = t.cpus_of(&t.node_ids());
    let orphans: CpuSet = t
        .cpus
        .iter()
        .filter(|c| c.online && c.node.is_none() && !placed.contains(c.id))
        .map(|c| c.id)
        .collect();
    if orphans.is_empty() {
        return None;
    }
    let (what, verb) = if orphans.len() == 1 { ("CPU", "is") } else { ("CPUs", "are") };
    Some(format!(
        "{what} {orphans} {verb} online but in no online node's cpulist: the firmware's NUMA tables \
         leave {} out; plans use only the CPUs the nodes list",
        if orphans.len() == 1 { "it" } else { "them" }
    ))
}

/// Nodes with CPUs but no memory, on a machine that keeps no memory in nodes of its own.
/// Machines that separate memory from CPUs by design (CXL expanders, NVDIMMs or HBM as
/// memory-only nodes; G05 in the shared fixtures) show it with memory-only nodes, and their
/// CPU-only nodes are expected. Where every node with memory also has CPUs, a node without
/// memory means missing or failed DIMMs, or firmware that gave its memory to another node:
/// everything placed there takes its memory from elsewhere.
fn memoryless_cpu_nodes(t: &Topology) -> Option<String> {
    if t.nodes.iter().any(|n| n.has_memory && !n.has_cpu) {
        return None;
    }
    let memoryless: NodeSet =
        t.nodes.iter().filter(|n| n.has_cpu && !n.has_memory).map(|n| n.id).collect();
    if memoryless.is_empty() {
        return None;
    }
    let (what, verb) = if memoryless.len() == 1 { ("node", "has") } else { ("nodes", "have") };
    Some(format!(
        "{what} {memoryless} {verb} CPUs but no memory, and no node holds memory without CPUs \
         (as machines with CXL, NVDIMM or HBM memory nodes do): DIMMs are missing or the \
         firmware gave their memory to another node; services there take all their memory from \
         other nodes"
    ))
}

/// `4.4 GiB`: one decimal, enough to compare two figures.
fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

#[cfg(test)]
mod tests {
    use crate::tests::two_node;

    #[test]
    fn warns_about_balancing_and_unknown_devices() {
        let mut t = two_node();
        assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
        assert!(t.warnings[0].contains("numa_balancing"));
        t.host.numa_balancing = Some(0);
        t.host.zone_reclaim_mode = Some(1);
        t.devices[0].set_nodes(Default::default());
        t.nodes.truncate(1);
        t.refresh_warnings();
        assert_eq!(t.warnings.len(), 3, "{:?}", t.warnings);
        assert!(t.warnings[0].contains("zone_reclaim_mode is 1"));
        assert!(t.warnings[1].contains("2 CPU packages but one NUMA node"));
        assert!(t.warnings[2].contains("`nvme0n1` has unknown locality"));
    }

    #[test]
    fn warns_when_the_firmware_figures_disagree() {
        let mut t = two_node();
        t.host.numa_balancing = Some(0);
        t.refresh_warnings();
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        // 16 GiB in the nodes: 90 % of 17.7 GiB is the edge.
        let edge = (16u64 << 30) * 100 / 90;
        t.host.memory_bytes = Some(edge);
        t.refresh_warnings();
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        t.host.memory_bytes = Some(edge + 100);
        t.refresh_warnings();
        assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
        assert!(
            t.warnings[0].starts_with(
                "the nodes' memory adds up to 16.0 GiB (89 %) of the machine's 17.8 GiB"
            ),
            "{}",
            t.warnings[0]
        );
        assert!(t.warnings[0].ends_with("plans use the per-node figures"), "{}", t.warnings[0]);
        // A node of unknown memory: nothing to compare.
        t.nodes[1].memory_bytes = None;
        t.refresh_warnings();
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);

        t.cpus[5].node = None;
        t.cpus[6].node = None;
        t.cpus[7].online = false;
        t.cpus[7].node = None;
        t.refresh_warnings();
        assert!(t.warnings.is_empty(), "node 2 lists them: {:?}", t.warnings);
        t.nodes[1].cpus = "4".parse().unwrap();
        t.refresh_warnings();
        assert_eq!(
            t.warnings,
            [
                "CPUs 5-6 are online but in no online node's cpulist: the firmware's NUMA tables leave them out; plans use only the CPUs the nodes list"
            ]
        );
    }

    #[test]
    fn memoryless_cpu_nodes_warn_unless_memory_has_nodes_of_its_own() {
        let mut t = two_node();
        t.host.numa_balancing = Some(0);
        t.nodes[1].has_memory = false;
        t.refresh_warnings();
        assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
        assert!(t.warnings[0].starts_with("node 2 has CPUs but no memory"), "{}", t.warnings[0]);
        // A memory-only node (CXL, NVDIMM, HBM): CPU-only nodes are by design.
        t.nodes.push(crate::Node {
            id: 3,
            cpus: crate::CpuSet::new(),
            memory_bytes: Some(64 << 30),
            memory_free_bytes: None,
            has_cpu: false,
            has_memory: true,
        });
        t.refresh_warnings();
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    }
}
