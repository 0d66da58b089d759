//! Interrupts read from real kernels' trees: `pinctl topology --capture` of the 4-node QEMU
//! guest of tests/vm with its multi-queue NIC up, without irqbalance
//! (tests/fixtures/sysfs/qemu-irq-4node.tar.gz) and with it running
//! (qemu-irqbalance-4node.tar.gz), as tests/fixtures/sysfs/qemu-irq-4node.md says; and hostile
//! trees built here: a huge or broken `/proc/interrupts`, odd names, bogus vectors. Captures
//! and snapshots carry what was read.

use std::fs;
use std::path::{Path, PathBuf};

use pinctl_capture::{capture_topology, load_topology, unpack_tarball};
use pinctl_sysfs::TopologySource;
use pinctl_topology::{Irq, Topology};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sysfs").join(name)
}

fn load(src: &Path) -> Topology {
    let source = TopologySource::from_arg(Some(src)).unwrap();
    load_topology(&source).unwrap_or_else(|e| panic!("{}: {e}", src.display())).topology
}

fn irq(t: &Topology, n: u32) -> &Irq {
    t.interrupts.irq(n).unwrap_or_else(|| panic!("no IRQ {n}: {:#?}", t.interrupts.irqs))
}

#[test]
fn the_guest_s_nic_queues_and_managed_nvme_queues() {
    let t = load(&fixture("qemu-irq-4node.tar.gz"));
    let i = &t.interrupts;
    let numbers: Vec<u32> = i.irqs.iter().map(|q| q.irq).collect();
    assert_eq!(numbers, [0, 1, 4, 8, 9, 12].into_iter().chain(24..=43).collect::<Vec<_>>());
    // vmxnet3 on node 3 (PCI 0000:61:00.0): eight queue vectors and an event vector, movable.
    let nic: Vec<&Irq> = i.of_pci("0000:61:00.0").collect();
    assert_eq!(nic.len(), 9);
    for (k, q) in nic.iter().take(8).enumerate() {
        assert_eq!(q.name, format!("eth0-rxtx-{k}"));
        assert!(!q.managed);
        assert_eq!(q.node, Some(3));
        // The kernel allows a device's vector on its node's CPUs by default.
        assert_eq!(q.affinity.as_ref().unwrap().to_string(), "6-7");
    }
    assert_eq!(nic[8].name, "eth0-event-8");
    // It fired where the kernel delivers it, on node 3.
    assert_eq!(irq(&t, 35).fired_cpus().to_string(), "7");
    assert_eq!(irq(&t, 35).effective_affinity.as_ref().unwrap().to_string(), "7");
    // NVMe on node 1: the admin queue is movable, the I/O queues are the kernel's.
    assert!(!irq(&t, 26).managed);
    for n in 27..=34 {
        assert!(irq(&t, n).managed, "nvme0q{}", n - 26);
        assert_eq!(irq(&t, n).pci.as_deref(), Some("0000:41:00.0"));
    }
    assert_eq!(irq(&t, 27).affinity.as_ref().unwrap().to_string(), "2");
    // Names of lines with several handlers, and legacy lines of no listed device.
    assert_eq!(irq(&t, 24).name, "PCIe PME, aerdrv, pciehp");
    assert_eq!(irq(&t, 0).name, "timer");
    assert!(irq(&t, 0).pci.is_none());
    // Queues: RPS off on every receive queue, XPS off on every transmit queue.
    let q = i.queues_of("eth0").unwrap();
    assert_eq!((q.rx.len(), q.tx.len()), (8, 8));
    assert!(q.rx.iter().chain(&q.tx).all(|x| x.cpus.as_ref().is_some_and(|c| c.is_empty())));
    assert!(i.irqbalance.is_none(), "no irqbalance ran");
}

#[test]
fn irqbalance_is_found_by_its_socket_and_moved_the_queues_to_the_nic_s_node() {
    let t = load(&fixture("qemu-irqbalance-4node.tar.gz"));
    let b = t.interrupts.irqbalance.as_ref().unwrap();
    assert_eq!(b.socket, format!("/run/irqbalance/irqbalance{}.sock", b.pid));
    assert!(b.banned_cpus.is_none(), "a capture does not ask it");
    for n in 35..=43 {
        let a = irq(&t, n).affinity.as_ref().unwrap();
        assert!(a.iter().all(|c| c == 6 || c == 7), "IRQ {n} on {a}");
    }
}

#[test]
fn captures_and_snapshots_carry_the_interrupts() {
    let t = load(&fixture("qemu-irqbalance-4node.tar.gz"));
    let dir = tempfile::tempdir().unwrap();
    let unpacked = unpack_tarball(&fixture("qemu-irqbalance-4node.tar.gz")).unwrap();
    let again = dir.path().join("again.tar.gz");
    let summary = capture_topology(unpacked.root(), &again).unwrap();
    assert_eq!(summary.topology.interrupts, t.interrupts);
    assert_eq!(load(&again).interrupts, t.interrupts);
    let snap = dir.path().join("t.json");
    fs::write(&snap, serde_json::to_vec(&t).unwrap()).unwrap();
    assert_eq!(load(&snap).interrupts, t.interrupts);
    // A snapshot naming an interrupt twice is refused with its JSON path.
    let mut v: serde_json::Value = serde_json::to_value(&t).unwrap();
    let first = v["interrupts"]["irqs"][0].clone();
    v["interrupts"]["irqs"].as_array_mut().unwrap().push(first);
    fs::write(&snap, serde_json::to_vec(&v).unwrap()).unwrap();
    let err = load_topology(&TopologySource::from_arg(Some(&snap)).unwrap()).unwrap_err();
    let text = format!("{err}");
    assert!(text.contains("interrupts.irqs[") && text.contains("listed twice"), "{text}");
}

/// A two-node tree with a NIC whose vectors are listed; `interrupts` is `proc/interrupts`.
fn tree(dir: &Path, interrupts: &str) -> PathBuf {
    let root = dir.join("root");
    let w = |rel: &str, text: &str| {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    w("sys/devices/system/cpu/online", "0-3\n");
    w("sys/devices/system/node/online", "0-1\n");
    w("sys/devices/system/node/node0/cpulist", "0-1\n");
    w("sys/devices/system/node/node1/cpulist", "2-3\n");
    let pci = "sys/devices/pci0000:00/0000:00:03.0";
    w(&format!("{pci}/numa_node"), "1\n");
    w(&format!("{pci}/net/eth0/queues/rx-0/rps_cpus"), "0\n");
    w(&format!("{pci}/msi_irqs/40"), "msix\n");
    w(&format!("{pci}/msi_irqs/99999999999"), "msix\n");
    w(&format!("{pci}/msi_irqs/bogus"), "msix\n");
    fs::create_dir_all(root.join("sys/class/net")).unwrap();
    std::os::unix::fs::symlink(format!("../../../{pci}/net/eth0"), root.join("sys/class/net/eth0"))
        .unwrap();
    fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
    std::os::unix::fs::symlink(
        format!("../../../../{pci}"),
        root.join("sys/bus/pci/devices/0000:00:03.0"),
    )
    .unwrap();
    w("proc/interrupts", interrupts);
    w("proc/irq/40/smp_affinity_list", "0-3\n");
    w("proc/irq/40/node", "-1\n");
    root
}

#[test]
fn odd_names_and_bogus_vectors_cost_only_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        "  CPU0 CPU1 CPU2 CPU3\n 40:  1 2 3 4  PCI-MSI 1-edge  \u{1b}]0;owned\u{7}eth0-TxRx-0\n";
    let t = load(&tree(dir.path(), text));
    let q = irq(&t, 40);
    assert_eq!(
        q.pci.as_deref(),
        Some("0000:00:03.0"),
        "the vector of the NIC; the bogus names are passed over"
    );
    assert!(q.name.contains('\u{1b}'), "kept as text in the model: {:?}", q.name);
    assert_eq!(q.node, None, "-1 is unknown");
    assert!(q.effective_affinity.is_none(), "no effective_affinity_list: unknown");
    assert_eq!(q.fired.len(), 4);
    // The model keeps the name; every rendering escapes it (tests/cli/irq.rs).
}

#[test]
fn a_broken_or_huge_proc_interrupts_is_a_warning_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path(), "garbage without a header\n");
    let t = load(&root);
    assert!(t.interrupts.irqs.is_empty());
    assert!(
        t.warnings.iter().any(|w| w.contains("proc/interrupts")
            && w.contains("nothing is known of the host's interrupts")),
        "{:?}",
        t.warnings
    );
    // Larger than any the kernel writes (64 MiB): a sparse file, not read into memory.
    let f = fs::OpenOptions::new().write(true).open(root.join("proc/interrupts")).unwrap();
    f.set_len(65 << 20).unwrap();
    let t = load(&root);
    assert!(t.interrupts.irqs.is_empty());
    assert!(
        t.warnings.iter().any(|w| w.contains("proc/interrupts") && w.contains("larger than")),
        "{:?}",
        t.warnings
    );
    // A FIFO there is never waited on.
    fs::remove_file(root.join("proc/interrupts")).unwrap();
    let st =
        std::process::Command::new("mkfifo").arg(root.join("proc/interrupts")).status().unwrap();
    assert!(st.success());
    let t = load(&root);
    assert!(
        t.warnings
            .iter()
            .any(|w| w.contains("proc/interrupts") && w.contains("not a regular file")),
        "{:?}",
        t.warnings
    );
}

#[test]
fn a_tree_without_interrupts_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path(), "");
    fs::remove_file(root.join("proc/interrupts")).unwrap();
    let t = load(&root);
    assert!(t.interrupts.is_empty(), "not even the queues: {:?}", t.interrupts);
    assert!(t.warnings.iter().all(|w| !w.contains("interrupts")), "{:?}", t.warnings);
    let json = serde_json::to_value(&t).unwrap();
    assert!(json.get("interrupts").is_none(), "absent from the JSON");
}
