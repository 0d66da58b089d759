//! The hand-made trees of tests/fixtures/sysfs (made by its make-trees.sh): what no captured
//! machine shows (stacked block devices, bonds, VLANs, bridges, virtio-net, `numa_node = -1`
//! with `local_cpulist` or `local_cpus`, a kernel without NUMA), plus `near` resolution and
//! default routes on them, and a capture that round-trips.

use std::path::{Path, PathBuf};

use pinctl_capture::{capture_topology, load_topology, read_tarball};
use pinctl_sysfs::{
    NearError, TopologySource, default_route_interfaces, read_topology, resolve_near,
};
use pinctl_topology::{DeviceKind, Locality, Topology};

fn tree(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sysfs").join(name)
}

fn stacked() -> Topology {
    read_topology(&tree("stacked-2n")).unwrap()
}

fn nodes(t: &Topology, name: &str) -> String {
    t.device(name).unwrap_or_else(|| panic!("no {name}: {:#?}", t.devices)).nodes.to_string()
}

#[test]
fn physical_devices_and_their_fallbacks() {
    let t = stacked();
    let names: Vec<&str> = t.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "bond0",
            "bond0.100",
            "br0",
            "card0",
            "dm-0",
            "dm-1",
            "ens5",
            "eth0",
            "eth1",
            "eth1.200",
            "eth2",
            "md0",
            "mlx5_0",
            "nvme0n1",
            "nvme1n1",
            "sdb",
            "sdc"
        ],
        "partitions, loop0, lo, renderD128 and the HDMI connector are not devices"
    );
    let d = t.device("nvme0n1").unwrap();
    assert_eq!((d.kind, d.node, d.locality), (DeviceKind::Nvme, Some(0), Locality::NumaNode));
    assert_eq!(d.pci.as_deref(), Some("0000:00:02.0"));
    let d = t.device("sdb").unwrap();
    assert_eq!((d.kind, d.node, d.locality), (DeviceKind::Disk, Some(1), Locality::LocalCpulist));
    let d = t.device("eth2").unwrap();
    assert_eq!((d.node, d.locality), (Some(1), Locality::LocalCpulist), "local_cpus mask");
    // local_cpulist naming every CPU of a two-node machine is the kernel's "don't know".
    let d = t.device("sdc").unwrap();
    assert_eq!((d.node, d.locality), (None, Locality::Unknown));
    assert!(d.nodes.is_empty());
    let d = t.device("ens5").unwrap();
    assert_eq!(
        (d.kind, d.node, d.pci.as_deref()),
        (DeviceKind::Nic, Some(1), Some("0000:80:04.0"))
    );
    assert_eq!(t.device("mlx5_0").unwrap().kind, DeviceKind::Infiniband);
    assert_eq!(
        (t.device("card0").unwrap().kind, t.device("card0").unwrap().node),
        (DeviceKind::Gpu, Some(0))
    );
}

#[test]
fn stacked_block_devices_take_their_members_nodes() {
    let t = stacked();
    let md0 = t.device("md0").unwrap();
    assert_eq!(md0.members, ["nvme0n1", "nvme1n1"], "member partitions count as their disks");
    assert_eq!((md0.nodes.to_string(), md0.node), ("0-1".to_string(), None));
    assert_eq!(md0.locality, Locality::Members);
    let dm0 = t.device("dm-0").unwrap();
    assert_eq!(
        (dm0.members.as_slice(), nodes(&t, "dm-0")),
        (&["md0".to_string()][..], "0-1".into())
    );
    let dm1 = t.device("dm-1").unwrap();
    assert_eq!((dm1.node, dm1.locality), (Some(1), Locality::Members));
}

#[test]
fn bonds_vlans_and_bridges_take_their_members_nodes() {
    let t = stacked();
    assert_eq!(t.device("bond0").unwrap().members, ["eth0", "eth1"]);
    assert_eq!(nodes(&t, "bond0"), "0-1");
    assert_eq!(nodes(&t, "bond0.100"), "0-1", "a VLAN on a bond");
    assert_eq!(t.device("eth1.200").unwrap().node, Some(1));
    assert_eq!(t.device("br0").unwrap().members, ["ens5"]);
    assert_eq!(t.device("br0").unwrap().node, Some(1));
}

#[test]
fn host_facts_and_warnings() {
    let t = stacked();
    assert_eq!(t.host.kernel.as_deref(), Some("6.1.0-test"));
    assert_eq!((t.host.numa_balancing, t.host.zone_reclaim_mode), (Some(1), Some(0)));
    assert_eq!(t.host.allowed_cpus.as_ref().unwrap().to_string(), "0-3");
    assert_eq!(t.distances, vec![vec![10, 20], vec![20, 10]]);
    assert_eq!(t.node(1).unwrap().memory_free_bytes, Some(2 << 30));
    assert_eq!(t.warnings.len(), 2, "{:?}", t.warnings);
    assert!(t.warnings[0].contains("numa_balancing"));
    assert!(t.warnings[1].contains("`sdc`"));
}

#[test]
fn a_kernel_without_numa_is_one_node() {
    let t = read_topology(&tree("no-numa")).unwrap();
    assert_eq!(t.nodes.len(), 1);
    let n = &t.nodes[0];
    assert_eq!((n.id, n.cpus.to_string(), n.memory_bytes), (0, "0-3".into(), Some(4 << 30)));
    assert_eq!(t.distances, vec![vec![10]]);
    assert!(t.cpus.iter().all(|c| c.node == Some(0)));
}

#[test]
fn near_names_devices_and_dev_nodes() {
    let loaded = load_topology(&TopologySource::Root(tree("stacked-2n"))).unwrap();
    assert_eq!(resolve_near(&loaded, "nvme1n1").unwrap(), ["nvme1n1"]);
    assert_eq!(resolve_near(&loaded, "/dev/nvme1n1p1").unwrap(), ["nvme1n1"]);
    assert_eq!(resolve_near(&loaded, "/dev/dm-0").unwrap(), ["dm-0"]);
    assert!(matches!(resolve_near(&loaded, "eth9"), Err(NearError::UnknownDevice { .. })));
    assert!(matches!(
        resolve_near(&loaded, "/var/lib/mysql"),
        Err(NearError::PathNeedsLiveMachine { .. })
    ));
    // Without a tree (a snapshot), the kernel's partition naming still leads to the disk.
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("t.json");
    std::fs::write(&snap, serde_json::to_string(&loaded.topology).unwrap()).unwrap();
    let snapshot = load_topology(&TopologySource::Snapshot(snap)).unwrap();
    assert_eq!(resolve_near(&snapshot, "/dev/nvme0n1p1").unwrap(), ["nvme0n1"]);
    assert_eq!(resolve_near(&snapshot, "/dev/sdb3").unwrap(), ["sdb"]);
    let e = resolve_near(&snapshot, "/dev/sdz").unwrap_err();
    assert!(e.to_string().contains("known devices: bond0, "), "{e}");
}

#[test]
fn default_routes() {
    assert_eq!(default_route_interfaces(&tree("stacked-2n")).unwrap(), ["bond0"]);
    assert!(default_route_interfaces(&tree("no-numa")).unwrap().is_empty());
}

#[test]
fn captures_of_a_tree_read_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("capture.tar.gz");
    let summary = capture_topology(&tree("stacked-2n"), &out).unwrap();
    assert_eq!(summary.topology, stacked());
    assert_eq!(read_tarball(&out).unwrap(), summary.topology);
}

#[test]
fn warnings_and_errors_name_the_file_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("sys/devices/system/node");
    std::fs::create_dir_all(node.join("node0")).unwrap();
    std::fs::write(node.join("online"), "0\n").unwrap();
    std::fs::write(node.join("node0/cpulist"), "0-3,x\n").unwrap();
    let t = read_topology(dir.path()).unwrap();
    assert_eq!(t.discovery_warnings.len(), 1, "{:?}", t.discovery_warnings);
    let w = &t.discovery_warnings[0];
    assert_eq!(w.file, "sys/devices/system/node/node0/cpulist");
    assert!(w.problem.contains("`0-3,x`"), "{w}");
    assert!(w.assumed.contains("node 0"), "{w}");
    assert_eq!(t.warnings[0], w.to_string(), "shown first among the warnings");
    // Nothing usable left: an error that says why.
    std::fs::write(node.join("online"), "x\n").unwrap();
    std::fs::remove_dir_all(node.join("node0")).unwrap();
    std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu")).unwrap();
    std::fs::write(dir.path().join("sys/devices/system/cpu/online"), "\n").unwrap();
    let e = read_topology(dir.path()).unwrap_err().to_string();
    assert!(e.contains("no usable NUMA node"), "{e}");
    assert!(e.contains("`sys/devices/system/node/online` does not parse"), "{e}");
    assert!(e.contains("`sys/devices/system/cpu/online` is empty"), "{e}");
    let e = read_topology(&dir.path().join("nowhere")).unwrap_err();
    assert!(e.to_string().contains("not a sysfs/procfs root"), "{e}");
}

/// A 2-node, 4-CPU host under cgroup v2 whose reading process has affinity `status_cpus`, runs
/// in `cgroup` and sees the cpuset files in `cpusets` (cgroup path, cpuset.cpus.effective).
fn cgroup_v2_host(status_cpus: &str, cgroup: &str, cpusets: &[(&str, &str)]) -> Topology {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let node = "sys/devices/system/node";
    write(&format!("{node}/online"), "0-1\n");
    write(&format!("{node}/node0/cpulist"), "0-1\n");
    write(&format!("{node}/node1/cpulist"), "2-3\n");
    write("sys/devices/system/cpu/online", "0-3\n");
    write(
        "proc/self/status",
        &format!("Name:\tpinctl\nCpus_allowed_list:\t{status_cpus}\nMems_allowed_list:\t0-1\n"),
    );
    write("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec 0 0\n");
    write("proc/self/cgroup", &format!("0::{cgroup}\n"));
    for (path, cpus) in cpusets {
        write(&format!("sys/fs/cgroup{path}/cpuset.cpus.effective"), &format!("{cpus}\n"));
        write(&format!("sys/fs/cgroup{path}/cpuset.mems.effective"), "0-1\n");
    }
    read_topology(dir.path()).unwrap()
}

fn allowed_cpus(t: &Topology) -> String {
    t.host.allowed_cpus.as_ref().unwrap().to_string()
}

#[test]
fn allowed_cpus_are_the_cpusets_not_the_callers_affinity() {
    // Under `taskset -c 2` (or a unit with CPUAffinity=2) the plan still sees the whole cpuset:
    // the service's cgroup has no cpuset files, so the root's set applies.
    let t = cgroup_v2_host("2", "/system.slice/db.service", &[("", "0-3")]);
    assert_eq!(allowed_cpus(&t), "0-3");
    // A unit with AllowedCPUs=2-3 has its own cpuset, which decides.
    let t = cgroup_v2_host(
        "2",
        "/system.slice/db.service",
        &[("", "0-3"), ("/system.slice/db.service", "2-3")],
    );
    assert_eq!(allowed_cpus(&t), "2-3");
    // Cpuset files that leave out a CPU the kernel lets this process use describe another
    // cgroup: the kernel's own view stays.
    let t = cgroup_v2_host("0-3", "/system.slice/db.service", &[("", "0-1")]);
    assert_eq!(allowed_cpus(&t), "0-3");
    // No cgroup files at all: Cpus_allowed_list.
    let t = cgroup_v2_host("1-2", "/", &[]);
    assert_eq!(allowed_cpus(&t), "1-2");
}

fn gpu_host() -> Topology {
    read_topology(&tree("gpu-2s")).unwrap()
}

/// The tree with `edit` applied to a copy of it (links kept as links).
fn edited_gpu_host(edit: impl FnOnce(&Path)) -> (tempfile::TempDir, Topology) {
    let dir = tempfile::tempdir().unwrap();
    let status =
        std::process::Command::new("cp").arg("-a").arg(tree("gpu-2s")).arg(dir.path()).status();
    assert!(status.unwrap().success(), "cp -a of the gpu-2s tree");
    let root = dir.path().join("gpu-2s");
    edit(&root);
    let t = read_topology(&root).unwrap();
    (dir, t)
}

#[test]
fn gpus_and_accelerators_are_found_by_pci_class() {
    let t = gpu_host();
    let found: Vec<(&str, DeviceKind, String, Option<&str>)> = t
        .devices
        .iter()
        .filter(|d| matches!(d.kind, DeviceKind::Gpu | DeviceKind::Accelerator))
        .map(|d| (d.name.as_str(), d.kind, d.nodes.to_string(), d.pci.as_deref()))
        .collect();
    let gpu = |name, node: &str, pci| (name, DeviceKind::Gpu, node.to_string(), Some(pci));
    assert_eq!(
        found,
        [
            ("0000:e5:00.0", DeviceKind::Accelerator, "1".to_string(), Some("0000:e5:00.0")),
            gpu("card0", "0", "0000:03:00.0"),
            gpu("card1", "1", "0000:e3:00.0"),
            gpu("nvidia0", "0", "0000:1a:00.0"),
            gpu("nvidia1", "0", "0000:3c:00.0"),
            gpu("nvidia2", "0", "0000:4d:00.0"),
            gpu("nvidia3", "0", "0000:5e:00.0"),
            gpu("nvidia4", "1", "0000:9c:00.0"),
            gpu("nvidia5", "1", "0000:bc:00.0"),
            gpu("nvidia6", "1", "0000:cc:00.0"),
            gpu("nvidia7", "1", "0000:dc:00.0"),
        ],
        "one device per GPU (a DRM card is not listed twice), bridges and the NIC's function \
         are not accelerators"
    );
    assert_eq!(t.devices.len(), found.len() + 1, "and eth0: {:#?}", t.devices);
    assert_eq!(t.device("card1").unwrap().aliases, ["renderD128"]);
    assert!(t.device("nvidia0").unwrap().aliases.is_empty(), "no DRM node, no other name");
    // The slot whose firmware says -1: its local_cpulist names node 1.
    assert_eq!(t.device("nvidia6").unwrap().locality, Locality::LocalCpulist);
    assert_eq!(t.device("nvidia5").unwrap().locality, Locality::NumaNode);
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
}

#[test]
fn near_names_gpus_by_driver_name_alias_and_pci_address() {
    let loaded = load_topology(&TopologySource::Root(tree("gpu-2s"))).unwrap();
    assert_eq!(resolve_near(&loaded, "nvidia3").unwrap(), ["nvidia3"]);
    assert_eq!(resolve_near(&loaded, "0000:5e:00.0").unwrap(), ["nvidia3"]);
    assert_eq!(resolve_near(&loaded, "5e:00.0").unwrap(), ["nvidia3"], "lspci's short form");
    assert_eq!(resolve_near(&loaded, "renderD128").unwrap(), ["card1"]);
    assert_eq!(resolve_near(&loaded, "0000:E3:00.0").unwrap(), ["card1"]);
    assert_eq!(resolve_near(&loaded, "e5:00.0").unwrap(), ["0000:e5:00.0"]);
    assert_eq!(resolve_near(&loaded, "04:00.0").unwrap(), ["eth0"], "any device's function");
    let e = resolve_near(&loaded, "0000:99:00.0").unwrap_err();
    assert!(matches!(e, NearError::UnknownDevice { .. }), "{e}");
    assert!(matches!(resolve_near(&loaded, "nvidia8"), Err(NearError::UnknownDevice { .. })));
    // A snapshot keeps the other names: `near` resolves the same without the tree.
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("gpu.json");
    std::fs::write(&snap, serde_json::to_string(&loaded.topology).unwrap()).unwrap();
    let snapshot = load_topology(&TopologySource::Snapshot(snap)).unwrap();
    assert_eq!(snapshot.topology, loaded.topology);
    assert_eq!(resolve_near(&snapshot, "renderD128").unwrap(), ["card1"]);
    assert_eq!(resolve_near(&snapshot, "cc:00.0").unwrap(), ["nvidia6"]);
}

#[test]
fn an_nvidia_gpu_with_a_drm_node_answers_to_both_names() {
    let (_dir, t) = edited_gpu_host(|root| {
        // nvidia-drm loaded: card5 and renderD133 under nvidia3's function.
        let f = "sys/devices/pci0000:5d/0000:5d:01.0/0000:5e:00.0/drm";
        for n in ["card5", "renderD133"] {
            std::fs::create_dir_all(root.join(f).join(n)).unwrap();
            let target = format!("../../devices/pci0000:5d/0000:5d:01.0/0000:5e:00.0/drm/{n}");
            std::os::unix::fs::symlink(target, root.join("sys/class/drm").join(n)).unwrap();
        }
    });
    let d = t.device("nvidia3").unwrap();
    assert_eq!(
        (d.aliases.as_slice(), d.node),
        (&["card5".into(), "renderD133".into()][..], Some(0))
    );
    assert!(t.device("card5").is_none(), "listed once, by the driver's name");
}

#[test]
fn a_broken_driver_file_leaves_the_gpu_named_by_address_with_a_warning() {
    let info = |a: &str| format!("proc/driver/nvidia/gpus/{a}/information");
    let (_dir, t) = edited_gpu_host(|root| {
        std::fs::write(root.join(info("0000:1a:00.0")), "Model: x\nDevice Minor: lots\n").unwrap();
        // Two GPUs claiming one minor: neither is named by it.
        let text = std::fs::read_to_string(root.join(info("0000:bc:00.0"))).unwrap();
        let text = text.replace("Device Minor: \t 5", "Device Minor: \t 4");
        std::fs::write(root.join(info("0000:bc:00.0")), text).unwrap();
        // Larger than any driver file: refused before it is parsed.
        std::fs::write(root.join(info("0000:dc:00.0")), vec![b'x'; 128 << 10]).unwrap();
    });
    for address in ["0000:1a:00.0", "0000:9c:00.0", "0000:bc:00.0", "0000:dc:00.0"] {
        let d = t.device(address).unwrap_or_else(|| panic!("{address}: {:#?}", t.devices));
        assert_eq!(d.kind, DeviceKind::Gpu);
        assert!(d.node.is_some());
    }
    assert!(t.device("nvidia0").is_none() && t.device("nvidia4").is_none());
    assert!(t.device("nvidia3").is_some(), "the others keep their names");
    let w = t.warnings.join("\n");
    assert_eq!(t.discovery_warnings.len(), 4, "one per file: {w}");
    let gpu = |a: &str| format!("`{}` ", info(a));
    let assumed = |a: &str| format!("assumed GPU `{a}` is not `nvidiaN`; its DRM card or PCI");
    for (address, problem) in [
        ("0000:1a:00.0", "cannot name it: `Device Minor` is `lots`, not a number from 0 to 254"),
        // Both claimants of minor 4 lose the name: either could be /dev/nvidia4.
        ("0000:9c:00.0", "gives Device Minor 4, as another GPU's does"),
        ("0000:bc:00.0", "gives Device Minor 4, as another GPU's does"),
        ("0000:dc:00.0", "is larger than 65536 bytes"),
    ] {
        let line = format!("{}{problem}", gpu(address));
        assert!(w.contains(&line), "{line}\nin\n{w}");
        assert!(w.contains(&assumed(address)), "{w}");
    }
}

#[test]
fn a_gpu_host_capture_replays_the_same_devices_and_carries_every_pci_function() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gpu.tar.gz");
    let summary = capture_topology(&tree("gpu-2s"), &out).unwrap();
    assert_eq!(summary.topology, gpu_host());
    assert_eq!(read_tarball(&out).unwrap(), summary.topology);
    let unpacked = pinctl_capture::unpack_tarball(&out).unwrap();
    let root = unpacked.root();
    let functions: Vec<_> = std::fs::read_dir(root.join("sys/bus/pci/devices"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(functions.len(), 8 * 2 + 2 * 3 + 2, "GPUs, switches, VGA, MI210, Gaudi, NIC");
    for f in &functions {
        for file in ["class", "vendor", "device", "numa_node", "local_cpulist"] {
            let p = root.join("sys/bus/pci/devices").join(f).join(file);
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            assert!(!text.is_empty(), "{} missing or empty in the capture", p.display());
        }
    }
    let info = root.join("proc/driver/nvidia/gpus/0000:cc:00.0/information");
    assert!(std::fs::read_to_string(info).unwrap().contains("Device Minor: \t 6"));
}

/// configs/topologies/gpu-2s.json (the GPU host example's topology) is what discovery reads
/// from the gpu-2s tree. Set PINCTL_UPDATE_TOPOLOGIES=1 to rewrite it.
#[test]
fn the_gpu_host_snapshot_is_current() {
    let path = tree("../../../configs/topologies/gpu-2s.json");
    let json = serde_json::to_string_pretty(&gpu_host()).unwrap() + "\n";
    if std::env::var_os("PINCTL_UPDATE_TOPOLOGIES").is_some() {
        std::fs::write(&path, &json).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(on_disk == json, "{} is stale: rerun with PINCTL_UPDATE_TOPOLOGIES=1", path.display());
}
