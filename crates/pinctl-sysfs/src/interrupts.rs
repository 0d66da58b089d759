//! The host's interrupts ([`pinctl_topology::Interrupts`]), composed from one reader per
//! kernel file: `/proc/interrupts` ([`crate::proc::interrupts`]) for the interrupts and where
//! they fired, `/proc/irq/N` and `/sys/kernel/irq/N` ([`crate::irq`]) for affinities, node and
//! name, each listed device's PCI function ([`crate::msi_irqs`]) for whose interrupts they
//! are, each NIC's queues ([`crate::net_queues`]) and irqbalance's socket
//! ([`crate::irqbalance`]).
//!
//! Discovery for planning elsewhere (`pinctl topology`, `plan`, `run`, captures) reads them;
//! the launcher's discovery (`pinctl exec`, in every unit's start-up) does not: a host with
//! thousands of queues has thousands of these files.

use std::collections::BTreeMap;

use pinctl_topology::{DeviceKind, Interrupts, Irq, Topology};

use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::proc::interrupts::{self as proc_interrupts, FILE};

/// Reads the interrupts of the tree under `fs` for the devices of `topology`. A tree without
/// `proc/interrupts` has none; a broken file costs what depends on it, with a warning (when
/// `fs` is degrading, as discovery is).
pub(crate) fn read_interrupts(
    fs: &mut FsRoot,
    topology: &Topology,
) -> Result<Interrupts, DiscoveryError> {
    // Without `/proc/interrupts` (a capture of an older pinctl, hwloc's, a broken file) nothing
    // is said of interrupts at all: not the queues either, nor that irqbalance is absent.
    let Some(table) = fs
        .fact(FILE, proc_interrupts::parse, || {
            "nothing is known of the host's interrupts".to_string()
        })?
        .value()
    else {
        return Ok(Interrupts::default());
    };
    let mut pci_of: BTreeMap<u32, String> = BTreeMap::new();
    let mut functions: Vec<&str> =
        topology.devices.iter().filter_map(|d| d.pci.as_deref()).collect();
    functions.sort_unstable();
    functions.dedup();
    for pci in functions {
        for irq in crate::msi_irqs::read(fs, pci)? {
            pci_of.entry(irq).or_insert_with(|| pci.to_string());
        }
    }
    let mut irqs = Vec::with_capacity(table.lines.len());
    {
        for line in &table.lines {
            let files = crate::irq::read(fs, line.irq)?;
            let name = files.actions.unwrap_or_else(|| crate::irq::cut(line.name()));
            irqs.push(Irq {
                irq: line.irq,
                managed: crate::irq::managed_by_name(&name),
                name,
                pci: pci_of.get(&line.irq).cloned(),
                affinity: files.affinity,
                effective_affinity: files.effective_affinity,
                node: files.node,
                fired: table.fired(line),
            });
        }
    }
    irqs.sort_by_key(|i| i.irq);
    irqs.dedup_by_key(|i| i.irq);
    let mut net_queues = Vec::new();
    for d in topology.devices.iter().filter(|d| d.kind == DeviceKind::Nic && d.pci.is_some()) {
        if let Some(q) = crate::net_queues::read(fs, &d.name)? {
            net_queues.push(q);
        }
    }
    let irqbalance = crate::irqbalance::find(fs)?;
    Ok(Interrupts { irqs, net_queues, irqbalance })
}

/// Reads the interrupts of the tree under `fs` into `topology` (see the module), as
/// discovery does: a broken file is a warning of `topology`'s, never an error.
pub fn attach_interrupts(fs: &mut FsRoot, topology: &mut Topology) -> Result<(), DiscoveryError> {
    let was = fs.set_degrading(true);
    let read = read_interrupts(fs, topology);
    fs.set_degrading(was);
    topology.interrupts = read?;
    let warnings = fs.take_warnings();
    if !warnings.is_empty() {
        topology.discovery_warnings.extend(warnings);
        topology.refresh_warnings();
    }
    Ok(())
}
