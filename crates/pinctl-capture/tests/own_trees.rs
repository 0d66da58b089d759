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
