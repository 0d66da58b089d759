//! A snapshot's `interrupts` checked as the rest of it is (docs/topology.md): every error
//! names the JSON path of the offending value.

use std::collections::HashSet;

use pinctl_sysfs::net_queues::MAX_QUEUES;
use pinctl_sysfs::proc::interrupts::MAX_IRQ;
use pinctl_topology::text::{has_control, shown};
use pinctl_topology::{Interrupts, MAX_CPU_ID, MAX_NODE_ID, QueueCpus};

use crate::error::{Invalid, bad};

fn text(value: &str, max: usize, at: impl FnOnce() -> String) -> Result<(), Invalid> {
    if has_control(value) || value.len() > max {
        return bad(at(), format!("`{}` holds control characters or is too long", shown(value)));
    }
    Ok(())
}

/// Interrupt numbers and CPUs within the ceilings, each listed once; names and paths without
/// control characters.
pub(crate) fn check(i: &Interrupts) -> Result<(), Invalid> {
    let mut seen = HashSet::new();
    for (k, irq) in i.irqs.iter().enumerate() {
        let at = |field: &str| format!("interrupts.irqs[{k}].{field}");
        if irq.irq > MAX_IRQ {
            return bad(at("irq"), format!("interrupt `{}` is above {MAX_IRQ}", irq.irq));
        }
        if !seen.insert(irq.irq) {
            return bad(at("irq"), format!("interrupt `{}` is listed twice", irq.irq));
        }
        text(&irq.name, pinctl_sysfs::irq::MAX_NAME_BYTES, || at("name"))?;
        if let Some(pci) = &irq.pci {
            if !pinctl_sysfs::parse::is_pci_address(pci) {
                return bad(at("pci"), format!("`{}` is not a PCI address", shown(pci)));
            }
        }
        if irq.node.is_some_and(|n| n > MAX_NODE_ID) {
            return bad(at("node"), format!("node is above {MAX_NODE_ID}"));
        }
        let mut cpus = HashSet::new();
        for (c, count) in irq.fired.iter().enumerate() {
            if count.cpu > MAX_CPU_ID || !cpus.insert(count.cpu) {
                return bad(
                    format!("interrupts.irqs[{k}].fired[{c}].cpu"),
                    format!("CPU `{}` is above {MAX_CPU_ID} or listed twice", count.cpu),
                );
            }
        }
    }
    let mut names = HashSet::new();
    for (k, q) in i.net_queues.iter().enumerate() {
        let at = || format!("interrupts.net_queues[{k}].interface");
        if q.interface.is_empty() || q.interface.contains('/') || !names.insert(&q.interface) {
            return bad(
                at(),
                format!("`{}` is not an interface name, or is listed twice", shown(&q.interface)),
            );
        }
        text(&q.interface, 256, at)?;
        for (kind, queues) in [("rx", &q.rx), ("tx", &q.tx)] {
            let mut seen = HashSet::new();
            for (j, QueueCpus { queue, .. }) in queues.iter().enumerate() {
                if *queue > MAX_QUEUES || !seen.insert(*queue) {
                    return bad(
                        format!("interrupts.net_queues[{k}].{kind}[{j}].queue"),
                        format!("queue `{queue}` is above {MAX_QUEUES} or listed twice"),
                    );
                }
            }
        }
    }
    if let Some(b) = &i.irqbalance {
        if b.pid == 0 {
            return bad("interrupts.irqbalance.pid".into(), "PID 0 is no process".into());
        }
        text(&b.socket, 4096, || "interrupts.irqbalance.socket".into())?;
    }
    Ok(())
}

/// Interrupts by number, queues by interface and number, counts by CPU.
pub(crate) fn put_in_order(i: &mut Interrupts) {
    i.irqs.sort_by_key(|irq| irq.irq);
    for irq in &mut i.irqs {
        irq.fired.sort_by_key(|c| c.cpu);
    }
    i.net_queues.sort_by(|a, b| a.interface.cmp(&b.interface));
    for q in &mut i.net_queues {
        q.rx.sort_by_key(|q| q.queue);
        q.tx.sort_by_key(|q| q.queue);
    }
}
