//! Host settings and firmware gaps that defeat or weaken pinning (DOMAIN.md, rule 6).

use crate::Topology;

/// Warnings about the host, in a stable order: kernel settings, hidden NUMA, unknown devices.
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
    for d in t.devices.iter().filter(|d| d.nodes.is_empty()) {
        out.push(format!(
            "device `{}` has unknown locality: its firmware reports numa_node -1 and nothing else \
             names its node",
            d.name
        ));
    }
    out
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
}
