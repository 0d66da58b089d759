//! Discovery on the machine the tests run on, checked against the kernel's own files read
//! independently here, against `numactl --hardware`, and through a capture round trip.

use std::process::Command;

use pinctl_capture::{capture_topology, load_topology, read_tarball};
use pinctl_sysfs::{TopologySource, read_topology};
use pinctl_topology::{CpuSet, NodeSet};

fn kernel_list<K: pinctl_topology::IdKind>(path: &str) -> pinctl_topology::IdSet<K> {
    std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

#[test]
fn live_nodes_and_cpus_are_the_kernels() {
    let t = read_topology("/".as_ref()).unwrap();
    assert_eq!(t.node_ids(), kernel_list("/sys/devices/system/node/online"));
    assert_eq!(t.online_cpus(), kernel_list("/sys/devices/system/cpu/online"));
    for n in &t.nodes {
        let listed = kernel_list(&format!("/sys/devices/system/node/node{}/cpulist", n.id));
        assert_eq!(n.cpus, listed.intersection(&t.online_cpus()), "node {}", n.id);
        assert!(n.memory_bytes.unwrap() > 0);
    }
    assert_eq!(t.distances.len(), t.nodes.len());
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = pinctl_sysfs::proc::pid::status::parse(&status).unwrap();
    assert_eq!(t.host.allowed_cpus, allowed.cpus);
    assert_eq!(t.host.allowed_nodes, allowed.nodes);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(t.host.kernel.as_deref(), Some(release.trim()));
    for d in &t.devices {
        assert!(d.nodes.is_subset(&t.node_ids()) || d.nodes.is_empty(), "{d:?}");
    }
}

/// numactl is an independent reader of the same files (the test script installs it).
#[test]
fn live_matches_numactl_hardware() {
    let out = Command::new("numactl")
        .arg("--hardware")
        .output()
        .expect("numactl is needed for this test: apt-get install numactl (scripts/test does)");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let t = read_topology("/".as_ref()).unwrap();
    let mut seen = NodeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("node ") else { continue };
        let Some((id, fact)) = rest.split_once(' ') else { continue };
        let Ok(id) = id.parse::<u32>() else { continue };
        let node = t.node(id).unwrap_or_else(|| panic!("numactl shows node {id}"));
        seen.insert(id);
        if let Some(cpus) = fact.strip_prefix("cpus:") {
            let want: CpuSet = cpus.split_whitespace().map(|c| c.parse().unwrap()).collect();
            assert_eq!(node.cpus, want, "node {id}");
        } else if let Some(size) = fact.strip_prefix("size: ") {
            let mb: u64 = size.trim_end_matches(" MB").parse().unwrap();
            assert_eq!(node.memory_bytes.unwrap() >> 20, mb, "node {id}");
        }
    }
    assert_eq!(seen, t.node_ids());
}

#[test]
fn live_source_is_the_live_machine() {
    let loaded = load_topology(&TopologySource::from_arg(None).unwrap()).unwrap();
    assert!(loaded.is_live);
    assert_eq!(loaded.fs_root.as_deref(), Some("/".as_ref()));
    assert_eq!(loaded.topology.node_ids(), kernel_list("/sys/devices/system/node/online"));
}

/// Every online CPU's last-level cache is the one the kernel's files name, read here
/// independently (every index of every CPU, not one CPU per cache as discovery does); a
/// machine without cache folders has none. And a capture carries them.
#[test]
fn live_caches_are_the_kernels() {
    let t = read_topology("/".as_ref()).unwrap();
    let mut want: Vec<CpuSet> = Vec::new();
    for cpu in t.online_cpus().iter() {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut best: Option<(u32, CpuSet)> = None;
        for e in entries {
            let path = e.unwrap().path();
            if !path.file_name().unwrap().to_string_lossy().starts_with("index") {
                continue;
            }
            let read = |f: &str| std::fs::read_to_string(path.join(f)).unwrap();
            if read("type").trim() == "Instruction" {
                continue;
            }
            let level: u32 = read("level").trim().parse().unwrap();
            if best.as_ref().is_none_or(|(l, _)| level > *l) {
                let shared: CpuSet = read("shared_cpu_list").trim().parse().unwrap();
                best = Some((level, shared.intersection(&t.online_cpus())));
            }
        }
        if let Some((_, shared)) = best {
            if !want.contains(&shared) {
                want.push(shared);
            }
        }
    }
    want.sort_by_key(|c| c.first());
    let got: Vec<CpuSet> = t.caches.iter().map(|c| c.cpus.clone()).collect();
    assert_eq!(got, want);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("here.tar.gz");
    capture_topology("/".as_ref(), &out).unwrap();
    assert_eq!(read_tarball(&out).unwrap().caches, t.caches, "the capture carries them");
}

/// A capture of this machine read back (in memory, and unpacked to a folder) is exactly the
/// topology read while capturing.
#[test]
fn live_capture_reads_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("here.tar.gz");
    let summary = capture_topology("/".as_ref(), &out).unwrap();
    assert!(summary.files > 5, "{summary:?}");
    assert_eq!(read_tarball(&out).unwrap(), summary.topology);
    let loaded = load_topology(&TopologySource::from_arg(Some(&out)).unwrap()).unwrap();
    assert_eq!(loaded.topology, summary.topology);
    let tree = pinctl_capture::unpack_tarball(&out).unwrap();
    let unpacked = TopologySource::Root(tree.root().to_path_buf());
    assert_eq!(load_topology(&unpacked).unwrap().topology, summary.topology);
    // The launcher's read of the same tree is the same machine without its interrupts.
    let mut launcher = summary.topology.clone();
    launcher.interrupts = Default::default();
    assert_eq!(read_topology(tree.root()).unwrap(), launcher);
}

/// `/dev/NAME` of every block device on this machine leads to that device; a filesystem with no
/// block device (procfs) is an error that says so; `/` resolves to a device or says why not.
#[test]
fn live_near_resolves_dev_nodes_and_paths() {
    use pinctl_sysfs::{NearError, resolve_near};
    use pinctl_topology::DeviceKind;
    let loaded = load_topology(&TopologySource::Live).unwrap();
    for d in &loaded.topology.devices {
        let dev = format!("/dev/{}", d.name);
        if matches!(d.kind, DeviceKind::Nvme | DeviceKind::Disk)
            && std::path::Path::new(&dev).exists()
        {
            assert_eq!(
                resolve_near(&loaded, &dev).unwrap(),
                std::slice::from_ref(&d.name),
                "{dev}"
            );
        }
    }
    assert!(matches!(resolve_near(&loaded, "/proc"), Err(NearError::NotOnBlockDevice { .. })));
    match resolve_near(&loaded, "/") {
        Ok(names) => assert!(loaded.topology.device(&names[0]).is_some()),
        Err(NearError::NotOnBlockDevice { .. } | NearError::DeviceNotInTopology { .. }) => {}
        Err(e) => panic!("{e}"),
    }
    assert!(matches!(resolve_near(&loaded, "/no/such/path"), Err(NearError::Io { .. })));
}
