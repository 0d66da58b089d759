//! `pinctl exec -c` reads only the devices its file's plan depends on
//! ([`pinctl_launch::devices_needed`]). This holds that the plan is then the same as on the
//! whole topology, on every bundled tree and every captured machine, for files that name no
//! device (the default route's NICs kept free, or nothing kept free), and for files that name
//! a NIC in `keep-free` or `near`, a disk in `near`, or `lo`.

use std::path::{Path, PathBuf};

use pinctl_capture::UnpackedTree;
use pinctl_sysfs::{DeviceScope, LoadedTopology};
use pinctl_topology::DeviceKind;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The bundled trees and every capture of ../shared, unpacked.
fn trees() -> Vec<(String, PathBuf, Option<UnpackedTree>)> {
    let mut out = Vec::new();
    let own = repo().join("tests/fixtures/sysfs");
    for e in std::fs::read_dir(&own).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            out.push((path.display().to_string(), path, None));
        }
    }
    let shared = repo().join("../shared/fixtures/topologies");
    for e in std::fs::read_dir(&shared).expect("../shared/fixtures/topologies") {
        let raw = e.unwrap().path().join("raw");
        let Ok(files) = std::fs::read_dir(&raw) else { continue };
        for f in files {
            let path = f.unwrap().path();
            if path.file_name().unwrap().to_string_lossy().contains(".tar") {
                let unpacked = pinctl_capture::unpack_tarball(&path).unwrap();
                let root = unpacked.root().to_path_buf();
                out.push((path.display().to_string(), root, Some(unpacked)));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn config(text: &str) -> pinctl_config::Config {
    pinctl_config::parse(Path::new("pinctl.toml"), text).unwrap()
}

/// The plan (or the reason there is none) on `loaded`.
fn plan_on(loaded: &LoadedTopology, config: &pinctl_config::Config) -> String {
    let copy = LoadedTopology {
        topology: loaded.topology.clone(),
        fs_root: loaded.fs_root.clone(),
        is_live: loaded.is_live,
        source: loaded.source.clone(),
    };
    match pinctl_launch::ServiceFile::check(config.clone(), copy, false) {
        Ok(file) => match file.plan() {
            Ok(plan) => format!("{:?}\n{:?}", plan.placements, plan.warnings),
            Err(e) => format!("no plan: {e}"),
        },
        Err(e) => format!("rejected: {e}"),
    }
}

#[test]
fn the_plan_on_the_devices_it_needs_is_the_plan_on_all_of_them() {
    let files = [
        ("default keep-free", "[service.db]\ncommand = [\"db\"]\ncpus = 1\ninstances = 2\n"),
        (
            "nothing kept free",
            "[host]\nkeep-free = []\n\n[service.db]\ncommand = [\"db\"]\ncpus = 1\ninstances = 2\n",
        ),
    ];
    let mut trees_with_other_devices = 0;
    let mut planned = 0;
    let mut routed = 0;
    let trees = trees();
    assert!(trees.len() >= 10, "{} trees", trees.len());
    let mut named_nics = 0;
    let mut named_disks = 0;
    let mut disks_scoped = 0;
    let mut with_lo = 0;
    for (name, root, _keep) in &trees {
        let all = LoadedTopology::directory_with(root, &DeviceScope::All).unwrap();
        if all
            .topology
            .devices
            .iter()
            .any(|d| !matches!(d.kind, DeviceKind::Nic | DeviceKind::Infiniband))
        {
            trees_with_other_devices += 1;
        }
        let mut files: Vec<(&str, String)> =
            files.iter().map(|(what, text)| (*what, text.to_string())).collect();
        // A file that keeps a NIC of this machine free by name (the first, or a bond).
        if let Some(nic) = all.topology.devices.iter().find(|d| d.kind == DeviceKind::Nic) {
            let nic = &nic.name;
            files.push((
                "keep-free names a NIC",
                format!(
                    "[host]\nkeep-free = [\"{nic}\"]\n\n[service.db]\ncommand = [\"db\"]\ncpus = 1\ninstances = 2\n"
                ),
            ));
            named_nics += 1;
            files.push((
                "near names a NIC",
                format!("[host]\nkeep-free = []\n\n[service.db]\ncommand = [\"db\"]\ncpus = 1\nnear = \"{nic}\"\n"),
            ));
        }
        // And one with a service near a disk (the first NVMe namespace or disk by name).
        let mut disks: Vec<&str> = all
            .topology
            .devices
            .iter()
            .filter(|d| matches!(d.kind, DeviceKind::Nvme | DeviceKind::Disk))
            .map(|d| d.name.as_str())
            .collect();
        disks.sort();
        if let Some(disk) = disks.first() {
            named_disks += 1;
            files.push((
                "near names a disk",
                format!(
                    "[service.db]\ncommand = [\"db\"]\ncpus = 1\ninstances = 2\nnear = \"{disk}\"\n"
                ),
            ));
        }
        // One that names a network device that is no device (no members: `lo`): the error
        // lists the host's devices, read whole.
        if root.join("sys/class/net/lo").symlink_metadata().is_ok() {
            with_lo += 1;
            files.push((
                "keep-free names lo",
                "[host]\nkeep-free = [\"lo\"]\n\n[service.db]\ncommand = [\"db\"]\ncpus = 1\n"
                    .to_string(),
            ));
        }
        for (what, text) in &files {
            let c = config(text);
            // As `exec -c` reads it: every device again when a named one is no device.
            let route = pinctl_launch::default_route_if_unset(&c, root);
            let (scope, scoped) = pinctl_launch::read_needed(&c, root, route.as_ref(), |s| {
                LoadedTopology::directory_with(root, s)
            })
            .unwrap();
            let names_devices = !what.starts_with("default") && !what.starts_with("nothing");
            // Only the devices of the scope are read, and those exactly as a full read has them.
            let network = |t: &LoadedTopology| -> Vec<String> {
                t.topology
                    .devices
                    .iter()
                    .filter(|d| matches!(d.kind, DeviceKind::Nic | DeviceKind::Infiniband))
                    .map(|d| format!("{d:?}"))
                    .collect()
            };
            match &scope {
                DeviceScope::None => assert!(scoped.topology.devices.is_empty(), "{name}"),
                DeviceScope::Network => {
                    assert_eq!(network(&scoped), network(&all), "{name}");
                    assert_eq!(scoped.topology.devices.len(), network(&scoped).len(), "{name}");
                }
                DeviceScope::Named(names) => {
                    // Each named device as the full read has it (or absent from both), and
                    // every device read (those and their members) as the full read has it.
                    for n in names {
                        let one =
                            |t: &LoadedTopology| t.topology.device(n).map(|d| format!("{d:?}"));
                        assert_eq!(one(&scoped), one(&all), "{name}: {n}");
                    }
                    for d in &scoped.topology.devices {
                        let full = all.topology.device(&d.name).map(|d| format!("{d:?}"));
                        assert_eq!(Some(format!("{d:?}")), full, "{name}: {}", d.name);
                    }
                    if !names.is_empty()
                        && c.host.keep_free.is_none()
                        && what.starts_with("default")
                    {
                        routed += 1;
                    }
                    if *what == "near names a disk" {
                        disks_scoped += 1;
                    }
                }
                // A name outside sys/class/net and sys/class/block (a dump of only the NVMe
                // classes has no block folder), or one that is no device (`lo`).
                DeviceScope::All => assert!(names_devices, "{name}: {what}"),
            }
            assert_eq!(scoped.topology.nodes, all.topology.nodes, "{name}");
            let on_scoped = plan_on(&scoped, &c);
            assert_eq!(on_scoped, plan_on(&all, &c), "{name}, {what}");
            if !on_scoped.starts_with("rejected") && !on_scoped.starts_with("no plan") {
                planned += 1;
            }
        }
    }
    eprintln!(
        "{} trees, {planned} plans; named: {named_nics} NICs, {named_disks} disks ({disks_scoped} read by name)",
        trees.len()
    );
    // Most pairs plan (a refusal on both sides proves less).
    assert!(planned >= trees.len(), "{planned} plans over {} trees", trees.len());
    // Some trees have a default route whose NICs are kept free.
    assert!(routed >= 1, "no tree with a default route");
    // Some trees have a NIC to name (a capture often has none, or only virtual ones).
    assert!(named_nics >= 3, "{named_nics} trees with a NIC");
    assert!(with_lo >= 1, "no tree with lo");
    assert!(named_disks >= 3, "{named_disks} trees with a disk");
    // Most of them planned on the disk and its members alone.
    assert!(disks_scoped * 2 > named_disks, "{disks_scoped} of {named_disks} read by name");
    // The scope made a difference somewhere (NVMe, GPUs, DAX in the captures).
    assert!(trees_with_other_devices >= 3, "{trees_with_other_devices}");
}

#[test]
fn the_devices_a_file_names_are_read_by_name_or_all_of_them() {
    // `keep-free` and `near` naming network or block devices: those (and their members);
    // naming anything else (an alias, a PCI address, a path, no device): every device, to
    // resolve it or to say what it is not.
    let keep = |names: &str| {
        config(&format!(
            "[host]\nkeep-free = [{names}]\n\n[service.db]\ncommand = [\"db\"]\ncpus = 1\n"
        ))
    };
    let near = |entry: &str| {
        config(&format!("[service.db]\ncommand = [\"db\"]\ncpus = 1\nnear = \"{entry}\"\n"))
    };
    let host = tempfile::tempdir().unwrap();
    let link = |class: &str, name: &str, target: &str| {
        let dir = host.path().join("sys/class").join(class);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(target, dir.join(name)).unwrap();
    };
    link("net", "eth0", "../../devices/pci0000:00/0000:00:03.0/net/eth0");
    link("net", "bond0", "../../devices/virtual/net/bond0");
    link("block", "nvme0n1", "../../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
    let needed = |c| pinctl_launch::devices_needed(&c, host.path());
    let named = |names: &[&str]| DeviceScope::Named(names.iter().map(|n| n.to_string()).collect());
    assert_eq!(needed(keep("\"eth0\"")), named(&["eth0"]));
    assert_eq!(needed(keep("\"bond0\", 1, \"eth0\"")), named(&["bond0", "eth0"]));
    // A disk in `keep-free` is read, so that the warning that it is no NIC can name it.
    assert_eq!(needed(keep("\"eth0\", \"nvme0n1\"")), named(&["eth0", "nvme0n1"]));
    assert_eq!(needed(keep("\"eth9\"")), DeviceScope::All);
    // No routing table in the tree: no default route's NIC to add.
    assert_eq!(needed(near("nvme0n1")), named(&["nvme0n1"]));
    assert_eq!(needed(near("eth0")), named(&["eth0"]));
    for other in ["nvidia0", "0000:41:00.0", "41:00.0", "/data", "nvme1n1"] {
        assert_eq!(needed(near(other)), DeviceScope::All, "{other}");
    }
    let node = config("[host]\nkeep-free = [0]\n\n[service.db]\ncommand = [\"db\"]\ncpus = 1\n");
    assert_eq!(pinctl_launch::devices_needed(&node, Path::new("/")), DeviceScope::None);
    let unset = config("[service.db]\ncommand = [\"db\"]\ncpus = 1\n");
    // Unset: the default route's NICs of this machine, as its routing table names them.
    let route = pinctl_sysfs::default_route_interfaces(Path::new("/")).unwrap();
    assert_eq!(pinctl_launch::devices_needed(&unset, Path::new("/")), DeviceScope::Named(route));
    // A tree without a routing table has no default route: no NIC is kept free or read.
    let tree = tempfile::tempdir().unwrap();
    assert_eq!(pinctl_launch::devices_needed(&unset, tree.path()), DeviceScope::Named(vec![]));
    // A routing table that does not parse: every network device, and `prepare` says why.
    std::fs::create_dir_all(tree.path().join("proc/net")).unwrap();
    std::fs::write(tree.path().join("proc/net/route"), "Iface\tDestination\neth0 zz\n").unwrap();
    assert_eq!(pinctl_launch::devices_needed(&unset, tree.path()), DeviceScope::Network);
}

#[test]
fn a_path_in_near_reads_the_device_it_lives_on() {
    // On the live machine a path means the block device under it: read by name, and the plan
    // on it is the plan on every device.
    let c = config(
        "[host]\nkeep-free = []\n\n[service.db]\ncommand = [\"db\"]\ncpus = 1\nnear = \"/tmp\"\n",
    );
    let scope = pinctl_launch::devices_needed(&c, Path::new("/"));
    match pinctl_sysfs::path_device(Path::new("/"), "/tmp") {
        Ok(d) if Path::new("/sys/class/block").join(&d).exists() => {
            assert_eq!(scope, DeviceScope::Named(vec![d]))
        }
        other => assert_eq!(scope, DeviceScope::All, "{other:?}"),
    }
    let (read, scoped) =
        pinctl_launch::read_needed(&c, Path::new("/"), None, LoadedTopology::live_with).unwrap();
    let all = LoadedTopology::live_with(&DeviceScope::All).unwrap();
    // Read as planned: no fallback to every device.
    assert_eq!(read, scope);
    assert_eq!(plan_on(&scoped, &c), plan_on(&all, &c));
    // In a tree, a path cannot be resolved: every device.
    assert_eq!(pinctl_launch::devices_needed(&c, Path::new("/nonexistent-tree")), DeviceScope::All);
}
