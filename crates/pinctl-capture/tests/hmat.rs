//! HMAT access classes and memory tiers read from real kernels' trees: a QEMU guest with
//! `-machine hmat=on` (tests/fixtures/sysfs/qemu-hmat-4node.tar.gz, whose figures must be the ones
//! its layout gave QEMU), and two hwloc captures of real machines (G05: CPU-only nodes,
//! memory-only DRAM and NVDIMM nodes and a generic initiator; G04: 2LM, every figure 0, which
//! HMAT uses for "not given"). Captures and snapshots carry them.

use std::path::{Path, PathBuf};

use pinctl_capture::{capture_topology, load_topology, read_tarball};
use pinctl_sysfs::TopologySource;
use pinctl_topology::{AccessClass, HmatAccess, MemoryTier, NodeId, Topology};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn qemu_capture() -> PathBuf {
    repo().join("tests/fixtures/sysfs/qemu-hmat-4node.tar.gz")
}

fn shared_tarball(id: &str) -> PathBuf {
    let raw = repo().join("../shared/fixtures/topologies").join(id).join("raw");
    std::fs::read_dir(&raw)
        .unwrap_or_else(|e| panic!("{}: {e}", raw.display()))
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains(".tar"))
        .unwrap()
}

fn load(src: &Path) -> Topology {
    let source = TopologySource::from_arg(Some(src)).unwrap();
    load_topology(&source).unwrap_or_else(|e| panic!("{}: {e}", src.display())).topology
}

fn entry(t: &Topology, node: NodeId, class: AccessClass) -> &HmatAccess {
    t.memory_performance
        .hmat
        .iter()
        .find(|a| a.node == node && a.class == class)
        .unwrap_or_else(|| panic!("no {class:?} entry for node {node}"))
}

#[test]
fn the_guest_s_kernel_publishes_the_best_initiator_of_each_node_as_qemu_was_told() {
    let t = load(&qemu_capture());
    let layout: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/vm/layouts/4node.json")).unwrap(),
    )
    .unwrap();
    let hmat = &layout["hmat"];
    let figure = |name: &str, i: usize| hmat[name][i][i].as_u64().map(|v| v as u32);
    assert_eq!(t.memory_performance.hmat.len(), 8, "{:#?}", t.memory_performance.hmat);
    for (i, node) in t.nodes.iter().enumerate() {
        for class in [AccessClass::Access0, AccessClass::Access1] {
            let a = entry(&t, node.id, class);
            // Each node reaches its own memory best; the kernel names no other initiator.
            assert_eq!(a.initiators, std::iter::once(node.id).collect(), "node {}", node.id);
            assert_eq!(a.read_latency_ns, figure("read_latency_ns", i));
            assert_eq!(a.write_latency_ns, figure("write_latency_ns", i));
            assert_eq!(a.read_bandwidth_mb_s, figure("read_bandwidth_mb_s", i));
            assert_eq!(a.write_bandwidth_mb_s, figure("write_bandwidth_mb_s", i));
        }
    }
    assert_eq!(entry(&t, 2, AccessClass::Access1).read_latency_ns, Some(85));
    assert_eq!(
        t.memory_performance.memory_tiers,
        vec![MemoryTier { tier: 4, nodes: "0-3".parse().unwrap() }]
    );
    // Only the best initiators are published: nothing about node 0 reaching node 1.
    assert_eq!(t.memory_performance.hmat_latency(0, 0), Some((80, AccessClass::Access1)));
    assert_eq!(t.memory_performance.hmat_latency(0, 1), None);
    assert!(t.discovery_warnings.is_empty(), "{:?}", t.discovery_warnings);
}

#[test]
fn memory_only_nodes_list_their_cpu_and_generic_initiators_apart() {
    let t = read_tarball(&shared_tarball("G05-hwloc-memory-only-and-cpu-only-nodes")).unwrap();
    let p = &t.memory_performance;
    // Memory-only nodes 5-10 each have both classes; CPU nodes keep only targets.
    let targets: Vec<(NodeId, AccessClass)> = p.hmat.iter().map(|a| (a.node, a.class)).collect();
    let want: Vec<(NodeId, AccessClass)> =
        (5..=10).flat_map(|n| [(n, AccessClass::Access0), (n, AccessClass::Access1)]).collect();
    assert_eq!(targets, want);
    // Node 4 is a generic initiator (no CPUs): the best of all for nodes 5-7 (access0), but
    // not a CPU, so access1 names the CPU nodes.
    let a0 = entry(&t, 5, AccessClass::Access0);
    assert_eq!((a0.initiators.to_string(), a0.read_latency_ns), ("4".into(), Some(8)));
    assert_eq!(a0.read_bandwidth_mb_s, Some(419_431));
    let a1 = entry(&t, 5, AccessClass::Access1);
    assert_eq!((a1.initiators.to_string(), a1.read_latency_ns), ("0".into(), Some(26)));
    let nvdimm = entry(&t, 7, AccessClass::Access1);
    assert_eq!(nvdimm.initiators.to_string(), "0,2");
    assert_eq!((nvdimm.read_latency_ns, nvdimm.write_bandwidth_mb_s), (Some(77), Some(78_644)));
    assert_eq!(p.hmat_latency(2, 7), Some((77, AccessClass::Access1)));
    assert_eq!(p.hmat_latency(4, 7), Some((8, AccessClass::Access0)));
    assert!(p.memory_tiers.is_empty(), "a 5.x kernel's dump has no memory tiers");
}

#[test]
fn figures_of_zero_are_not_given() {
    let t = read_tarball(&shared_tarball("G04-hwloc-cascadelake-snc2-2lm")).unwrap();
    let p = &t.memory_performance;
    assert_eq!(p.hmat.len(), 4, "{:#?}", p.hmat);
    for a in &p.hmat {
        assert_eq!(a.class, AccessClass::Access0);
        assert_eq!(a.initiators, std::iter::once(a.node).collect());
        assert_eq!(
            (a.read_latency_ns, a.write_latency_ns, a.read_bandwidth_mb_s, a.write_bandwidth_mb_s),
            (None, None, None, None)
        );
    }
    assert_eq!(p.hmat_latency(0, 0), None);
}

#[test]
fn captures_and_snapshots_carry_hmat_and_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let tarball = dir.path().join("guest.tar.gz");
    let tree = pinctl_capture::unpack_tarball(&qemu_capture()).unwrap();
    let summary = capture_topology(tree.root(), &tarball).unwrap();
    let original = load(&qemu_capture());
    assert_eq!(summary.topology, original);
    let from_tarball = load(&tarball);
    assert_eq!(from_tarball.memory_performance, original.memory_performance);
    assert_eq!(from_tarball, original);
    let snapshot = dir.path().join("guest.json");
    std::fs::write(&snapshot, serde_json::to_vec_pretty(&original).unwrap()).unwrap();
    let from_snapshot = load(&snapshot);
    assert_eq!(from_snapshot.memory_performance, original.memory_performance);
    let json: Value = serde_json::from_slice(&std::fs::read(&snapshot).unwrap()).unwrap();
    assert_eq!(json["memory_performance"]["hmat"][0]["initiators"], serde_json::json!([0]));
    assert_eq!(json["memory_performance"]["memory_tiers"][0]["tier"], 4);
}

fn measurement(pairs: &[(NodeId, NodeId, f64)]) -> pinctl_topology::Measurement {
    pinctl_testkit::measurement(pairs.iter().copied())
}

/// A probe result saved into a capture comes back with the tree, from the tarball and from
/// the tarball unpacked, and a capture of that directory carries it on.
#[test]
fn a_capture_carries_the_probe_result_it_was_written_with() {
    let dir = tempfile::tempdir().unwrap();
    let tarball = dir.path().join("probed.tar.gz");
    let pairs: Vec<(NodeId, NodeId, f64)> = (0..4)
        .flat_map(|c| (0..4).map(move |m| (c, m, if c == m { 80.5 } else { 140.25 })))
        .collect();
    let m = measurement(&pairs);
    let tree = pinctl_capture::unpack_tarball(&qemu_capture()).unwrap();
    let summary = pinctl_capture::capture_topology_with(tree.root(), &tarball, Some(&m)).unwrap();
    assert_eq!(summary.topology.memory_performance.measured.as_ref(), Some(&m));
    let back = load(&tarball);
    assert_eq!(back, summary.topology);
    let unpacked = pinctl_capture::unpack_tarball(&tarball).unwrap();
    assert!(unpacked.root().join(pinctl_capture::PROBE_FILE).is_file());
    assert_eq!(load(unpacked.root()).memory_performance.measured.as_ref(), Some(&m));
    let again = dir.path().join("again.tar.gz");
    let summary = capture_topology(unpacked.root(), &again).unwrap();
    assert_eq!(summary.topology.memory_performance.measured.as_ref(), Some(&m));
    assert_eq!(load(&again).memory_performance.measured.as_ref(), Some(&m));
    // The tree without a probe file has no measurement.
    assert!(load(tree.root()).memory_performance.measured.is_none());
}

#[test]
fn a_probe_result_that_does_not_fit_its_topology_is_refused_by_name() {
    let unpacked = pinctl_capture::unpack_tarball(&qemu_capture()).unwrap();
    let tree = unpacked.root().to_path_buf();
    let file = tree.join(pinctl_capture::PROBE_FILE);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let source = TopologySource::from_arg(Some(&tree)).unwrap();
    let cases: [(String, &str); 4] = [
        (
            serde_json::to_string(&measurement(&[(0, 9, 90.0)])).unwrap(),
            "pairs[0].memory_node`: node `9` is not in `nodes`",
        ),
        (
            serde_json::to_string(&measurement(&[(0, 1, 90.0), (0, 1, 91.0)])).unwrap(),
            "pairs[1]`: CPU node 0 to memory node 1 is also `pairs[0]`",
        ),
        (
            serde_json::to_string(&measurement(&[(0, 1, 0.0)])).unwrap(),
            "pairs[0].latency_ns`: `0` ns is not a memory latency",
        ),
        ("{\"pairs\": 3}".to_string(), "is not a `pinctl probe` result"),
    ];
    for (text, want) in cases {
        std::fs::write(&file, &text).unwrap();
        let e = load_topology(&source).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
        assert!(e.contains("pinctl/probe.json"), "{e}");
    }
}
