//! The 4-node guest of tests/vm as a model and as a tree on disk: nodes of 2 CPUs (0-1, 2-3,
//! 4-5, 6-7; distances 12 within a package, 32 across), an NVMe drive on node 1 with a movable
//! admin queue and eight managed I/O queues spread one per CPU, a vmxnet3 NIC on node 3 with
//! eight queue vectors and an event vector allowed on every CPU, and two legacy lines, as the
//! guest's kernel shows them (tests/fixtures/sysfs/qemu-irq-4node.tar.gz).
#![allow(dead_code)]

use std::fs;
use std::path::Path;

use pinctl_config::ServiceInterrupts;
use pinctl_irq::{Owner, SteerInputs};
use pinctl_testkit::SyntheticTopology;
use pinctl_topology::{
    CpuSet, DeviceKind, Interrupts, Irq, IrqCount, NetQueues, QueueCpus, Topology,
};

pub(crate) const NVME_PCI: &str = "0000:40:00.0";
pub(crate) const NIC_PCI: &str = "0000:41:00.0";

pub(crate) fn cpus(s: &str) -> CpuSet {
    s.parse().unwrap()
}

pub(crate) fn topology() -> Topology {
    let mut t = SyntheticTopology::new()
        .node(cpus("0-1"), 0, Some(1 << 30))
        .node(cpus("2-3"), 0, Some(1 << 30))
        .node(cpus("4-5"), 1, Some(1 << 30))
        .node(cpus("6-7"), 1, Some(1 << 30))
        .distances_by_package(12, 32)
        .device("nvme0n1", DeviceKind::Nvme, [1])
        .device("eth0", DeviceKind::Nic, [3])
        .build();
    t.interrupts = interrupts();
    t
}

fn irq(
    n: u32,
    name: &str,
    pci: Option<&str>,
    affinity: &str,
    node: Option<u32>,
    managed: bool,
) -> Irq {
    let a = cpus(affinity);
    Irq {
        irq: n,
        name: name.into(),
        pci: pci.map(str::to_string),
        effective_affinity: a.first().map(|c| [c].into_iter().collect()),
        affinity: Some(a.clone()),
        node,
        managed,
        fired: a.first().map(|c| IrqCount { cpu: c, count: 10 }).into_iter().collect(),
    }
}

pub(crate) fn interrupts() -> Interrupts {
    let mut irqs = vec![
        irq(0, "timer", None, "0-7", Some(0), false),
        irq(1, "i8042", None, "0-1", Some(0), false),
        irq(26, "nvme0q0", Some(NVME_PCI), "0-1", Some(1), false),
    ];
    // nvme0q1..8 spread by the kernel: 2, 3, 4, 5, 6, 7, 0, 1.
    for q in 1..=8u32 {
        let cpu = (q + 1) % 8;
        irqs.push(irq(
            26 + q,
            &format!("nvme0q{q}"),
            Some(NVME_PCI),
            &cpu.to_string(),
            Some(1),
            true,
        ));
    }
    for q in 0..8u32 {
        irqs.push(irq(35 + q, &format!("eth0-rxtx-{q}"), Some(NIC_PCI), "0-7", Some(3), false));
    }
    irqs.push(irq(43, "eth0-event-8", Some(NIC_PCI), "0-7", Some(3), false));
    let empty =
        |n: u32| (0..n).map(|queue| QueueCpus { queue, cpus: Some(CpuSet::new()) }).collect();
    Interrupts {
        irqs,
        net_queues: vec![NetQueues { interface: "eth0".into(), rx: empty(8), tx: empty(8) }],
        irqbalance: None,
    }
}

pub(crate) fn owner(
    instance: &str,
    service: &str,
    cpus_: &str,
    mode: ServiceInterrupts,
    nics: &[&str],
) -> Owner {
    Owner {
        instance: instance.into(),
        service: service.into(),
        cpus: cpus(cpus_),
        mode,
        nics: nics.iter().map(|n| n.to_string()).collect(),
    }
}

/// Two `nodes = 1` database instances on nodes 0 and 1, a one-CPU web instance on CPU 4, the
/// NIC's node 3 kept free.
pub(crate) fn plan() -> SteerInputs {
    SteerInputs {
        owners: vec![
            owner("db-0", "db", "0-1", ServiceInterrupts::Quiet, &[]),
            owner("db-1", "db", "2-3", ServiceInterrupts::Quiet, &[]),
            owner("web", "web", "4", ServiceInterrupts::Quiet, &[]),
        ],
        kept_free_nics: vec!["eth0".into()],
    }
}

fn w(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// Writes `t`'s machine and interrupts as the kernel's files under `root`.
pub(crate) fn write_tree(root: &Path, t: &Topology) {
    w(root, "sys/devices/system/cpu/online", "0-7\n");
    w(root, "sys/devices/system/node/online", "0-3\n");
    for n in &t.nodes {
        w(root, &format!("sys/devices/system/node/node{}/cpulist", n.id), &format!("{}\n", n.cpus));
    }
    let mut table = String::from(
        "           CPU0       CPU1       CPU2       CPU3       CPU4       CPU5       CPU6       CPU7\n",
    );
    for i in &t.interrupts.irqs {
        let counts: Vec<String> = (0..8)
            .map(|c| i.fired.iter().find(|f| f.cpu == c).map_or(0, |f| f.count).to_string())
            .collect();
        table.push_str(&format!(
            "{:>3}: {}   PCI-MSI {}-edge      {}\n",
            i.irq,
            counts.join(" "),
            i.irq,
            i.name
        ));
        w(
            root,
            &format!("proc/irq/{}/smp_affinity_list", i.irq),
            &format!("{}\n", i.affinity.as_ref().unwrap()),
        );
        w(
            root,
            &format!("proc/irq/{}/node", i.irq),
            &format!("{}\n", i.node.map_or(-1, i64::from)),
        );
        w(root, &format!("sys/kernel/irq/{}/actions", i.irq), &format!("{}\n", i.name));
        if let Some(pci) = &i.pci {
            w(root, &format!("sys/devices/pci0000:00/{pci}/msi_irqs/{}", i.irq), "msix\n");
        }
    }
    w(root, "proc/interrupts", &table);
    for pci in [NVME_PCI, NIC_PCI] {
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        let link = root.join(format!("sys/bus/pci/devices/{pci}"));
        if !link.exists() {
            std::os::unix::fs::symlink(format!("../../../devices/pci0000:00/{pci}"), link).unwrap();
        }
    }
    for q in &t.interrupts.net_queues {
        let dev = format!("sys/devices/pci0000:00/{NIC_PCI}/net/{}", q.interface);
        for x in &q.rx {
            w(
                root,
                &format!("{dev}/queues/rx-{}/rps_cpus", x.queue),
                &format!("{}\n", x.cpus.as_ref().unwrap().to_mask_string()),
            );
        }
        for x in &q.tx {
            w(
                root,
                &format!("{dev}/queues/tx-{}/xps_cpus", x.queue),
                &format!("{}\n", x.cpus.as_ref().unwrap().to_mask_string()),
            );
        }
        fs::create_dir_all(root.join("sys/class/net")).unwrap();
        let link = root.join(format!("sys/class/net/{}", q.interface));
        if !link.exists() {
            std::os::unix::fs::symlink(
                format!("../../devices/pci0000:00/{NIC_PCI}/net/{}", q.interface),
                link,
            )
            .unwrap();
        }
    }
}

/// The affinity of `irq` as the tree under `root` now says.
pub(crate) fn affinity(root: &Path, irq: u32) -> String {
    fs::read_to_string(root.join(format!("proc/irq/{irq}/smp_affinity_list")))
        .unwrap()
        .trim()
        .to_string()
}
