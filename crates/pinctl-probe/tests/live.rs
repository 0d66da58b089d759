//! The probe on this machine (however many nodes it has: one here, four in the QEMU guest's
//! scenario 18): it measures every pair its plan names, with figures that are real numbers,
//! and leaves the process as it found it: the same memory policy and CPU affinity, no thread
//! left behind, no memory still bound to a node.

use pinctl_probe::{
    Labels, LinuxMeasurer, MonotonicClock, ProbeOptions, ProbePlan, Silent, run_probe,
};
use pinctl_sys::{Kernel, LinuxKernel, Mask};
use pinctl_sysfs::LoadedTopology;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

fn bound_mappings() -> Vec<String> {
    std::fs::read_to_string("/proc/self/numa_maps")
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|p| p.starts_with("bind")))
        .map(str::to_string)
        .collect()
}

#[test]
fn measures_every_pair_of_this_machine_and_leaves_the_process_as_it_was() {
    let topology = LoadedTopology::live().unwrap().topology;
    let llc = pinctl_probe::last_level_cache(&topology);
    let plan = ProbePlan::new(&topology, llc, &ProbeOptions { quick: true, budget: None }).unwrap();
    let expected = topology.nodes.iter().filter(|n| !n.cpus.is_empty()).count()
        * topology.nodes.iter().filter(|n| n.has_memory).count();
    assert_eq!(plan.pairs(), expected, "every CPU node with every memory node: {plan:?}");

    let k = LinuxKernel;
    let bits = k.node_mask_bits().unwrap();
    let mut nodes_before = Mask::with_bits(bits);
    let policy_before = k.get_mempolicy(&mut nodes_before).unwrap();
    let mut cpus_before = Mask::with_bits(k.cpu_mask_bits().unwrap());
    k.get_affinity(&mut cpus_before).unwrap();
    let threads_before = threads();

    let mut measurer = LinuxMeasurer::new(1).unwrap();
    let labels = Labels { tool: "test".into(), measured_at: "now".into(), kernel: None };
    let m = run_probe(&plan, &mut measurer, &MonotonicClock::new(), &mut Silent, labels).unwrap();
    drop(measurer);

    assert_eq!(m.pairs.len(), plan.pairs());
    for p in &m.pairs {
        assert!(p.latency_ns.is_finite() && p.latency_ns > 0.0, "{p:?}");
        assert!(p.read_bandwidth_gb_s.is_finite() && p.read_bandwidth_gb_s > 0.0, "{p:?}");
        assert!(p.latency_passes >= 1 && p.bandwidth_passes >= 1, "{p:?}");
        assert!(p.huge_page_bytes <= m.buffer_bytes, "{p:?}");
    }
    assert_eq!((m.quick, m.buffer_bytes), (true, pinctl_probe::QUICK_BUFFER));

    let mut nodes_after = Mask::with_bits(bits);
    assert_eq!(k.get_mempolicy(&mut nodes_after).unwrap(), policy_before);
    assert!(nodes_after.same_ids(&nodes_before));
    let mut cpus_after = Mask::with_bits(cpus_before.bits());
    k.get_affinity(&mut cpus_after).unwrap();
    assert!(cpus_after.same_ids(&cpus_before), "the test thread's affinity is untouched");
    assert_eq!(threads(), threads_before, "every measuring thread has exited");
    assert_eq!(bound_mappings(), Vec::<String>::new(), "no buffer is left bound to a node");
}
