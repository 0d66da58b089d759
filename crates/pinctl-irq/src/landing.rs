//! Which interrupts land on the planned instances' CPUs today (`pinctl plan`), and what
//! steering does about each.

use pinctl_config::ServiceInterrupts;
use pinctl_plan::InterruptLanding;
use pinctl_topology::Topology;

use crate::inputs::SteerInputs;

/// Whether steering already moved `irq` off `cpus`: a movable interrupt whose allowed
/// affinity no longer meets them. Its effective affinity may still name them until it fires
/// again (x86 moves an interrupt at its next one), so that is not where it lands.
fn already_moved(irq: &pinctl_topology::Irq, cpus: &pinctl_topology::CpuSet, steer: bool) -> bool {
    steer && !irq.managed && irq.affinity.as_ref().is_some_and(|a| a.is_disjoint(cpus))
}

/// The interrupts of `file`'s topology on the CPUs `plan` gives its instances, with what
/// the file's steering settings do about each (`pinctl plan`, `pinctl fleet`).
pub fn of_plan(
    file: &pinctl_launch::ServiceFile,
    plan: &pinctl_plan::Plan,
) -> Vec<InterruptLanding> {
    let settings = crate::SteerSettings::of_file(file);
    on_service_cpus(&file.loaded.topology, &settings.of_plan(plan), settings.steer)
}

/// Every interrupt of `topology` that lands on an instance's CPUs (its effective affinity
/// where the kernel says, else its affinity; not one steering already moved off them), by
/// instance in `inputs`' order, then number.
/// `steer`: whether the file has `steer-interrupts` on.
pub fn on_service_cpus(
    topology: &Topology,
    inputs: &SteerInputs,
    steer: bool,
) -> Vec<InterruptLanding> {
    let mut out = Vec::new();
    for o in &inputs.owners {
        for irq in &topology.interrupts.irqs {
            let Some(lands) = irq.lands_on() else { continue };
            let on_cpus = lands.intersection(&o.cpus);
            if on_cpus.is_empty() || already_moved(irq, &o.cpus, steer) {
                continue;
            }
            let devices = irq
                .pci
                .as_deref()
                .map(|pci| {
                    topology
                        .devices
                        .iter()
                        .filter(|d| d.pci.as_deref() == Some(pci))
                        .map(|d| d.name.clone())
                        .collect()
                })
                .unwrap_or_default();
            let steering = if !steer {
                "steering is off"
            } else if o.mode == ServiceInterrupts::NicQueues {
                "allowed (interrupts = \"nic-queues\")"
            } else if irq.managed {
                "stays (managed by the kernel)"
            } else {
                "moved"
            };
            out.push(InterruptLanding {
                instance: o.instance.clone(),
                irq: irq.irq,
                name: irq.name.clone(),
                devices,
                affinity: irq.affinity.clone(),
                effective_affinity: irq.effective_affinity.clone(),
                fired: irq.fired_on(&o.cpus),
                on_cpus,
                managed: irq.managed,
                steering: steering.to_string(),
            });
        }
    }
    out
}
