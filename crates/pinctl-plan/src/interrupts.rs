//! What `pinctl plan` says about interrupts: those that land on a planned instance's CPUs
//! today. Computed by pinctl-irq from the topology's interrupts; this is its form in the plan
//! document (docs/planning.md, docs/irq.md).

use pinctl_topology::CpuSet;
use serde::Serialize;

/// An interrupt that lands on an instance's CPUs today.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct InterruptLanding {
    /// The instance whose CPUs it lands on.
    pub instance: String,
    /// The interrupt's number.
    pub irq: u32,
    /// Its handlers' names (`eth0-TxRx-3`, `nvme0q2`).
    pub name: String,
    /// The devices of the PCI function it belongs to (`eth0`, `nvme0n1`); empty when none of
    /// the topology's.
    pub devices: Vec<String>,
    /// The CPUs it may be delivered to (`smp_affinity_list`).
    pub affinity: Option<CpuSet>,
    /// The CPUs the kernel delivers it to (`effective_affinity_list`).
    pub effective_affinity: Option<CpuSet>,
    /// The instance's CPUs among those it lands on (the effective affinity where known).
    pub on_cpus: CpuSet,
    /// How often it fired on the instance's CPUs since boot.
    pub fired: u64,
    /// Whether the kernel manages it (it cannot be moved).
    pub managed: bool,
    /// What `steer-interrupts` does about it: `moved`, `stays (managed by the kernel)`,
    /// `allowed (interrupts = "nic-queues")`, or `steering is off`.
    pub steering: String,
}
