//! Every sysfs fixture of ../shared/fixtures/topologies, unpacked from its upstream tarball and
//! read by pinctl, compared with the oracle hwloc computed from the same bytes
//! (`oracle/summary*.json`). Where pinctl models the machine differently from hwloc on purpose,
//! the test says so and checks pinctl's own answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pinctl_capture::{load_topology, read_tarball, unpack_tarball};
use pinctl_sysfs::TopologySource;
use pinctl_topology::{DeviceKind, IdKind, IdSet, Locality, NodeSet, Topology};
use serde_json::Value;

fn fixture_dir(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/topologies").join(id)
}

fn tarball(id: &str) -> PathBuf {
    let raw = fixture_dir(id).join("raw");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&raw)
        .unwrap_or_else(|e| panic!("{}: {e}", raw.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".tar"))
        .collect();
    assert_eq!(found.len(), 1, "one tarball in {}", raw.display());
    found.remove(0)
}

fn read(id: &str) -> Topology {
    read_tarball(&tarball(id)).unwrap_or_else(|e| panic!("{id}: {e:#?}"))
}

fn oracle(id: &str, file: &str) -> Value {
    let p = fixture_dir(id).join("oracle").join(file);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn set<K: IdKind>(v: &Value) -> IdSet<K> {
    v.as_str().unwrap().parse().unwrap()
}

fn ids<K: IdKind>(v: &Value) -> IdSet<K> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// Nodes (ids, CPUs, MemTotal), online CPUs and the distance matrix against hwloc's summary.
fn assert_nodes_match(id: &str, t: &Topology, o: &Value) {
    let oracle_nodes = o["numa_nodes"].as_array().unwrap();
    let want: NodeSet =
        oracle_nodes.iter().map(|n| n["os_index"].as_u64().unwrap() as u32).collect();
    assert_eq!(t.node_ids(), want, "{id}: node ids");
    for n in oracle_nodes {
        let nid = n["os_index"].as_u64().unwrap() as u32;
        let ours = t.node(nid).unwrap();
        assert_eq!(ours.cpus, set(&n["local_cpus"]), "{id}: CPUs of node {nid}");
        assert_eq!(
            ours.memory_bytes,
            n["local_memory_bytes"].as_u64(),
            "{id}: memory of node {nid}"
        );
    }
    assert_eq!(t.online_cpus(), set(&o["pus"]), "{id}: online CPUs");
    assert_distances_match(id, t, o);
}

fn assert_distances_match(id: &str, t: &Topology, o: &Value) {
    let Some(d) = o["numa_distances"].as_array().unwrap().first() else {
        // hwloc omits the matrix for one node or when the dump has none.
        assert!(t.nodes.len() == 1 || t.distances.is_empty(), "{id}: {:?}", t.distances);
        return;
    };
    let order: Vec<u32> = d["node_os_indexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    for (i, a) in order.iter().enumerate() {
        for (j, b) in order.iter().enumerate() {
            let want = d["matrix"][i][j].as_u64().unwrap() as u32;
            assert_eq!(t.distance(*a, *b), Some(want), "{id}: distance {a} -> {b}");
        }
    }
}

/// Device -> node answers for every device both pinctl and hwloc report, and every network,
/// storage and openfabrics device of hwloc must be in pinctl's list.
fn assert_devices_match(id: &str, t: &Topology, o: &Value) {
    let oracle_devs: BTreeMap<&str, &Value> = o["io_devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["name"].as_str().unwrap(), d))
        .collect();
    for (name, d) in &oracle_devs {
        let kinds: Vec<&str> =
            d["kinds"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        if !kinds.iter().any(|k| matches!(*k, "network" | "storage" | "openfabrics" | "gpu")) {
            continue;
        }
        let ours = t.device(name).unwrap_or_else(|| panic!("{id}: device {name} missing: {t:#?}"));
        assert_eq!(ours.nodes, ids(&d["local_numa_nodes"]), "{id}: nodes of {name}");
        if let Some(pci) = d["pci_busid"].as_str() {
            assert_eq!(ours.pci.as_deref(), Some(pci), "{id}: PCI address of {name}");
        }
    }
}

#[test]
fn g01_xeon_two_nodes_with_nvme_ib_and_nics() {
    let id = "G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax";
    let t = read(id);
    let o = oracle(id, "summary.json");
    assert_nodes_match(id, &t, &o);
    assert_devices_match(id, &t, &o);
    assert_devices_match(id, &t, &oracle(id, "summary-upstream.json"));
    // numa_node = -1 with local_cpulist 0-3: placed on node 0 through the fallback.
    let nvme = t.device("nvme0n1").unwrap();
    assert_eq!((nvme.node, nvme.locality), (Some(0), Locality::LocalCpulist));
    assert_eq!(t.device("ib0").unwrap().locality, Locality::NumaNode);
    // Found by PCI class: the BMC's VGA (ASPEED, 0x030000, no DRM driver in this dump) and the
    // Xeon Phi co-processor (0x0b4000; hwloc lists neither as an OS device), by PCI address.
    let vga = t.device("0000:05:00.0").unwrap();
    assert_eq!((vga.kind, vga.node), (DeviceKind::Gpu, Some(0)));
    let mic = t.device("0000:83:00.0").unwrap();
    assert_eq!(
        (mic.kind, mic.node, mic.locality),
        (DeviceKind::Accelerator, Some(1), Locality::NumaNode)
    );
    // Partitions, loop and ram devices, `lo` and a dangling VLAN link are not devices.
    for absent in ["sda1", "nvme0n1p1", "loop0", "ram0", "lo", "eth0.1015", "br0", "scif0"] {
        assert!(t.device(absent).is_none(), "{absent} should not be listed");
    }
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    assert!(t.cpus.iter().all(|c| c.online && c.package.is_some() && c.core.is_some()));
    assert_eq!(t.package_count(), 2);
}

#[test]
fn g02_kunpeng_irregular_distances() {
    let id = "G02-hwloc-kunpeng920-2s-4n";
    let t = read(id);
    assert_nodes_match(id, &t, &oracle(id, "summary.json"));
    assert_eq!(t.distances[0], vec![10, 16, 32, 33]);
    assert_eq!(t.distances[1], vec![16, 10, 25, 32]);
    assert!(t.host.kernel.as_deref().unwrap().starts_with("5.15.0-rc1"), "from proc/version");
}

#[test]
fn g03_power7_sparse_node_ids() {
    let id = "G03-hwloc-power7-8n-sparse";
    let t = read(id);
    assert_nodes_match(id, &t, &oracle(id, "summary.json"));
    assert_eq!(t.node_ids().to_string(), "0-1,4-5,8-9,12-13");
    assert_eq!(t.distance(4, 4), Some(10));
    assert_eq!(t.distance(4, 5), Some(20));
    // POWER7 reports physical_package_id -1: unknown, not package 4294967295.
    assert!(t.cpus.iter().all(|c| c.package.is_none()), "{:?}", &t.cpus[..2]);
}

#[test]
fn g04_cascadelake_snc2_strided_cpus() {
    let id = "G04-hwloc-cascadelake-snc2-2lm";
    let t = read(id);
    assert_nodes_match(id, &t, &oracle(id, "summary.json"));
    assert_eq!(t.distance(0, 2), Some(11));
    assert_eq!(t.package_of_node(0), t.package_of_node(2));
    assert_ne!(t.package_of_node(0), t.package_of_node(1));
}

/// hwloc hides CPU-only nodes (it turns them into Groups) and attaches memory nodes to the
/// CPUs of their initiators; pinctl keeps every kernel node as is and says which have CPUs and
/// which have memory. So: memory nodes 5-10 match hwloc's memory and distances; their CPUs
/// are empty in pinctl (the kernel's cpumap), and nodes 0-3 carry the CPUs.
#[test]
fn g05_memory_only_and_cpu_only_nodes() {
    let id = "G05-hwloc-memory-only-and-cpu-only-nodes";
    let t = read(id);
    let o = oracle(id, "summary.json");
    assert_eq!(t.node_ids().to_string(), "0-10");
    assert_eq!(t.online_cpus(), set(&o["pus"]));
    for n in o["numa_nodes"].as_array().unwrap() {
        let nid = n["os_index"].as_u64().unwrap() as u32;
        let ours = t.node(nid).unwrap();
        assert_eq!(ours.memory_bytes, n["local_memory_bytes"].as_u64(), "memory of node {nid}");
        assert!(ours.has_memory && !ours.has_cpu && ours.cpus.is_empty(), "{ours:?}");
    }
    for nid in 0..4 {
        let n = t.node(nid).unwrap();
        assert!(n.has_cpu && !n.has_memory, "{n:?}");
        assert_eq!(n.cpus.len(), 2);
    }
    let gi = t.node(4).unwrap();
    assert!(!gi.has_cpu && !gi.has_memory, "generic initiator: {gi:?}");
    assert_distances_match(id, &t, &o);
    // The node nearest to CPU-only node 0 with memory is its local DRAM, node 5.
    let nearest = (5..=10).min_by_key(|&m| t.distance(0, m).unwrap()).unwrap();
    assert_eq!(nearest, 5);
    assert_eq!(t.host.allowed_nodes.as_ref().unwrap().to_string(), "5-10", "cgroup v1 cpuset.mems");
}

#[test]
fn g06_offline_cpu0_and_node0() {
    let id = "G06-hwloc-offline-cpu0-and-node0";
    let t = read(id);
    assert_nodes_match(id, &t, &oracle(id, "summary.json"));
    assert_eq!(t.host.offline_nodes.to_string(), "0");
    assert!(!t.cpu(0).unwrap().online);
    assert_eq!(t.cpu(4).unwrap().node, None, "online CPU outside any online node");
    assert!(t.node(1).unwrap().has_cpu, "has_cpu is empty in the dump, but the node has CPUs");
    assert_eq!(t.distances, vec![vec![10]], "row printed for possible nodes 0-1");
}

/// hwloc's default view hides what the cpuset disallows; pinctl reports the whole machine and
/// the allowed sets separately: nodes against the allow-all oracle, allowed sets against the
/// default one.
#[test]
fn g07_cgroup_v1_cpuset() {
    let id = "G07-hwloc-opteron-8n-cgroup-v1-cpuset";
    let t = read(id);
    assert_nodes_match(id, &t, &oracle(id, "summary-allow-all.json"));
    let restricted = oracle(id, "summary.json");
    assert_eq!(t.host.allowed_cpus.clone().unwrap(), set(&restricted["allowed_cpus"]));
    assert_eq!(t.host.allowed_nodes.clone().unwrap(), ids(&restricted["allowed_nodes"]));
    assert_eq!(t.cpu(4).unwrap().node, Some(2), "offline CPU 4 still belongs to node 2");
}

#[test]
fn g08_cpumap_only_dump() {
    let id = "G08-utillinux-epyc7451-2s-8n";
    let t = read(id);
    assert_nodes_match(id, &t, &oracle(id, "summary.json"));
    assert!(t.distances.is_empty(), "no distance files: unknown, not zero");
    assert!(t.nodes.iter().all(|n| n.memory_bytes.is_none() && n.memory_free_bytes.is_none()));
    assert_eq!(t.package_count(), 2);
    // util-linux's lscpu oracle: CPU 48 is the SMT sibling of CPU 0 (core 0, socket 0).
    let (c0, c48) = (t.cpu(0).unwrap(), t.cpu(48).unwrap());
    assert_eq!((c0.package, c0.core, c0.node), (c48.package, c48.core, c48.node));
}

/// libnvme's oracle (tree-pcie.out): nvme0n1 behind controller nvme0 (numa_node 1); the
/// multipath namespace nvme1n1 reached through nvme1 (node 0) and nvme2 (node 2).
#[test]
fn g11_nvme_native_multipath() {
    let id = "G11-libnvme-power-nvme-multipath";
    let t = read(id);
    assert!(t.nodes.is_empty(), "the dump has no node folder");
    let n0 = t.device("nvme0n1").unwrap();
    assert_eq!(
        (n0.node, n0.locality, n0.pci.as_deref()),
        (Some(1), Locality::NumaNode, Some("0214:90:00.0"))
    );
    let n1 = t.device("nvme1n1").unwrap();
    assert_eq!(n1.nodes.to_string(), "0,2");
    assert_eq!(n1.node, None);
    assert_eq!(n1.locality, Locality::MultipathControllers);
    assert_eq!(n1.members, vec!["nvme1", "nvme2"]);
    assert_eq!(t.devices.len(), 2, "{:?}", t.devices);
}

#[test]
fn tarballs_load_through_the_source_api() {
    let id = "G03-hwloc-power7-8n-sparse";
    let src = TopologySource::from_arg(Some(&tarball(id))).unwrap();
    assert!(matches!(src, TopologySource::Tarball(_)));
    let loaded = load_topology(&src).unwrap();
    assert!(!loaded.is_live && loaded.fs_root.is_none());
    assert_eq!(loaded.topology, read(id));
}

/// The same capture unpacked to a real directory reads the same as in memory.
#[test]
fn unpacked_tarballs_read_like_in_memory_ones() {
    for id in ["G07-hwloc-opteron-8n-cgroup-v1-cpuset", "G11-libnvme-power-nvme-multipath"] {
        let tree = unpack_tarball(&tarball(id)).unwrap();
        let loaded = load_topology(&TopologySource::from_arg(Some(tree.root())).unwrap()).unwrap();
        assert_eq!(loaded.fs_root.as_deref(), Some(tree.root()));
        assert_eq!(loaded.topology, read(id), "{id}");
    }
}

#[test]
fn snapshots_round_trip_exactly() {
    let t = read("G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax");
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("g01.json");
    let json = serde_json::to_string_pretty(&t).unwrap();
    std::fs::write(&snap, &json).unwrap();
    let loaded = load_topology(&TopologySource::from_arg(Some(&snap)).unwrap()).unwrap();
    assert_eq!(loaded.topology, t);
    assert_eq!(serde_json::to_string_pretty(&loaded.topology).unwrap(), json);
}

/// The numa_maps sample (G12) parsed as its oracle/expected.md says: 23 mappings, 452 pages
/// all on node 0, policy `default` everywhere, some mappings without page counts.
#[test]
fn g12_numa_maps_sample() {
    let p = fixture_dir("G12-numa_maps-crate-sample").join("raw/numa_maps");
    let text = std::fs::read_to_string(p).unwrap();
    let maps = pinctl_sysfs::proc::pid::numa_maps::parse(&text).unwrap();
    assert_eq!(maps.len(), 23);
    assert!(maps.iter().all(|m| m.policy == "default"));
    assert!(maps.iter().all(|m| m.pages.iter().all(|&(n, _)| n == 0)));
    assert_eq!(maps.iter().map(|m| m.total_pages()).sum::<u64>(), 452);
    assert!(maps.iter().filter(|m| !m.pages.is_empty()).all(|m| m.page_size_kb == Some(4)));
    assert!(maps.iter().any(|m| m.pages.is_empty()));
}

/// The last-level caches pinctl reads from each sysfs dump are the ones hwloc 2.9 read from
/// the same bytes (`oracle/hwloc-2.9.0*.xml`, read back by pinctl's hwloc XML reader, which
/// `pinctl-hwloc`'s tests hold equal to libhwloc): the same CPUs share the same cache, at the
/// same level and size. The dumps cover `shared_cpu_list` (G01, G02, G04, G06), the older
/// `shared_cpu_map` only (G03's POWER7, G08's EPYC), an L2 as the last level (G07's Opteron)
/// and no cache folders at all (G05).
#[test]
fn last_level_caches_match_hwloc_on_every_dump() {
    let cases = [
        ("G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax", "hwloc-2.9.0.xml", 2),
        ("G02-hwloc-kunpeng920-2s-4n", "hwloc-2.9.0.xml", 4),
        ("G03-hwloc-power7-8n-sparse", "hwloc-2.9.0.xml", 64),
        ("G04-hwloc-cascadelake-snc2-2lm", "hwloc-2.9.0.xml", 2),
        ("G05-hwloc-memory-only-and-cpu-only-nodes", "hwloc-2.9.0.xml", 0),
        ("G06-hwloc-offline-cpu0-and-node0", "hwloc-2.9.0.xml", 2),
        ("G07-hwloc-opteron-8n-cgroup-v1-cpuset", "hwloc-2.9.0-allow-all.xml", 15),
        ("G08-utillinux-epyc7451-2s-8n", "hwloc-2.9.0.xml", 16),
    ];
    for (id, xml, count) in cases {
        let ours = read(id);
        let path = fixture_dir(id).join("oracle").join(xml);
        let hwloc = pinctl_hwloc_xml::read_hwloc_xml(&path).unwrap_or_else(|e| panic!("{e}"));
        let shown = |t: &Topology| -> Vec<String> {
            t.caches.iter().map(|c| format!("L{} {} {:?}", c.level, c.cpus, c.size_bytes)).collect()
        };
        assert_eq!(shown(&ours), shown(&hwloc), "{id}");
        assert_eq!(ours.caches.len(), count, "{id}: {:?}", shown(&ours));
        assert!(ours.discovery_warnings.is_empty(), "{id}: {:?}", ours.discovery_warnings);
    }
    // EPYC 7451 (Naples): 24 cores a socket in 8 CCXs of 3 cores, each CCX its own L3 of 8 MiB;
    // a node (one die) holds two of them. CPU 0's siblings are 0 and 48.
    let t = read("G08-utillinux-epyc7451-2s-8n");
    assert_eq!(t.caches[0].cpus.to_string(), "0-2,48-50");
    assert_eq!(t.caches[0].size_bytes, Some(8 << 20));
    let node0 = &t.node(0).unwrap().cpus;
    let inside: Vec<&pinctl_topology::Cache> =
        t.caches.iter().filter(|c| c.cpus.is_subset(node0)).collect();
    assert_eq!(inside.len(), 2, "node 0 = one die = two CCXs");
}
