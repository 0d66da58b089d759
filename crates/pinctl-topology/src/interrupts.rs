//! The host's interrupts as the kernel shows them: each numbered interrupt of
//! `/proc/interrupts` with the PCI function it belongs to, where it may be delivered
//! (`/proc/irq/N/smp_affinity_list`), where the kernel really delivers it
//! (`effective_affinity_list`), whether the kernel manages it, and on which CPUs it has fired;
//! each network interface's receive and transmit queues with their RPS and XPS CPUs; and
//! irqbalance, when one runs.
//!
//! Interrupts are what a pinned service's CPUs take without asking: a NIC queue or a drive's
//! completion interrupt on a database's CPU steals its cycles and its caches
//! (docs/irq.md says what pinctl moves and what it cannot).

use serde::{Deserialize, Serialize};

use crate::{CpuId, CpuSet, NodeId};

/// Every interrupt of a host, its network queues and irqbalance. Empty where the source says
/// nothing (hwloc XML, a snapshot of an older pinctl, a capture without `proc/interrupts`),
/// and then absent from the JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Interrupts {
    /// Every numbered interrupt of `/proc/interrupts`, ascending by number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irqs: Vec<Irq>,
    /// The queues of each network interface that has a PCI function, by interface name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net_queues: Vec<NetQueues>,
    /// irqbalance, when it runs (found by its control socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqbalance: Option<Irqbalance>,
}

impl Interrupts {
    /// Whether the source said nothing about interrupts.
    pub fn is_empty(&self) -> bool {
        self.irqs.is_empty() && self.net_queues.is_empty() && self.irqbalance.is_none()
    }

    /// The interrupt numbered `irq`.
    pub fn irq(&self, irq: u32) -> Option<&Irq> {
        self.irqs.binary_search_by_key(&irq, |i| i.irq).ok().map(|i| &self.irqs[i])
    }

    /// The interrupts of the PCI function `pci` (`0000:41:00.0`), ascending.
    pub fn of_pci<'a>(&'a self, pci: &'a str) -> impl Iterator<Item = &'a Irq> + 'a {
        self.irqs.iter().filter(move |i| i.pci.as_deref() == Some(pci))
    }

    /// The queues of the interface `name`.
    pub fn queues_of(&self, name: &str) -> Option<&NetQueues> {
        self.net_queues.iter().find(|q| q.interface == name)
    }
}

/// One numbered interrupt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Irq {
    /// Its number (`/proc/irq/N`).
    pub irq: u32,
    /// Its handlers' names as the kernel lists them (`eth0-TxRx-3`, `nvme0q2`,
    /// `virtio2-input.0`; several joined by `, `). Empty when it has none.
    pub name: String,
    /// The PCI function whose MSI/MSI-X vectors (or legacy line) it is (`0000:41:00.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    /// The CPUs it may be delivered to (`smp_affinity_list`); `None` when unreadable.
    pub affinity: Option<CpuSet>,
    /// The CPUs the kernel really delivers it to (`effective_affinity_list`, Linux 4.15+);
    /// `None` when the kernel does not say.
    pub effective_affinity: Option<CpuSet>,
    /// The node of the device behind it (`/proc/irq/N/node`); `None` when not known.
    pub node: Option<NodeId>,
    /// Whether the kernel manages its affinity: it spreads such interrupts over the CPUs
    /// itself and refuses a new affinity (EIO). Known from the name for the drivers that always
    /// ask for managed vectors (NVMe I/O queues, virtio-blk and virtio-scsi request queues);
    /// another interrupt the kernel refuses to move is found when pinctl tries.
    pub managed: bool,
    /// How often it fired on each CPU since boot, CPUs where it never fired left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fired: Vec<IrqCount>,
}

impl Irq {
    /// The CPUs it has fired on since boot.
    pub fn fired_cpus(&self) -> CpuSet {
        self.fired.iter().filter(|c| c.count > 0).map(|c| c.cpu).collect()
    }

    /// Times it fired on the CPUs of `cpus` since boot.
    pub fn fired_on(&self, cpus: &CpuSet) -> u64 {
        self.fired.iter().filter(|c| cpus.contains(c.cpu)).map(|c| c.count).sum()
    }

    /// Where it lands: the effective affinity when the kernel says, else the affinity.
    pub fn lands_on(&self) -> Option<&CpuSet> {
        self.effective_affinity.as_ref().filter(|e| !e.is_empty()).or(self.affinity.as_ref())
    }
}

/// How often an interrupt fired on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct IrqCount {
    pub cpu: CpuId,
    pub count: u64,
}

/// The receive and transmit queues of one network interface
/// (`/sys/class/net/<if>/queues/{rx-N,tx-N}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NetQueues {
    pub interface: String,
    /// `rx-N`, by N, with the CPUs receive packet steering hands its packets to (`rps_cpus`).
    pub rx: Vec<QueueCpus>,
    /// `tx-N`, by N, with the CPUs whose packets it sends (`xps_cpus`).
    pub tx: Vec<QueueCpus>,
}

/// One queue and its CPU mask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct QueueCpus {
    pub queue: u32,
    /// `rps_cpus` or `xps_cpus`; empty when steering is off for the queue, `None` when the
    /// kernel has no such file (built without RPS/XPS, or a single-queue device's XPS).
    pub cpus: Option<CpuSet>,
}

/// A running irqbalance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Irqbalance {
    pub pid: u32,
    /// Its control socket (`/run/irqbalance/irqbalance<PID>.sock`).
    pub socket: String,
    /// The CPUs it keeps interrupts off, as it answered on its socket (root only, on the live
    /// machine); `None` when not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub banned_cpus: Option<CpuSet>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn irq(n: u32, pci: Option<&str>) -> Irq {
        Irq {
            irq: n,
            name: format!("q{n}"),
            pci: pci.map(str::to_string),
            affinity: Some("0-3".parse().unwrap()),
            effective_affinity: None,
            node: None,
            managed: false,
            fired: vec![IrqCount { cpu: 1, count: 5 }, IrqCount { cpu: 3, count: 0 }],
        }
    }

    #[test]
    fn lookups_and_landing() {
        let mut i = Interrupts {
            irqs: vec![irq(1, None), irq(24, Some("0000:00:03.0")), irq(30, Some("0000:00:03.0"))],
            ..Default::default()
        };
        assert_eq!(i.irq(24).map(|i| i.irq), Some(24));
        assert!(i.irq(25).is_none());
        assert_eq!(i.of_pci("0000:00:03.0").count(), 2);
        let one = &mut i.irqs[0];
        assert_eq!(one.fired_cpus().to_string(), "1");
        assert_eq!(one.fired_on(&"0-1".parse().unwrap()), 5);
        assert_eq!(one.lands_on().unwrap().to_string(), "0-3");
        one.effective_affinity = Some("2".parse().unwrap());
        assert_eq!(one.lands_on().unwrap().to_string(), "2");
        assert!(!i.is_empty());
        assert!(Interrupts::default().is_empty());
    }
}
