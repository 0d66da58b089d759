//! Interrupts on instances' CPUs, counted from `/proc/interrupts` (pinctl-sysfs's reader) as
//! the increase of each interrupt's per-CPU counts between two watch cycles. Managed
//! interrupts (the kernel's spread of NVMe queues: nothing can move them) are counted apart.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use pinctl_sysfs::proc::interrupts::{self as proc_interrupts, InterruptTable};
use pinctl_sysfs::{DiscoveryError, FsRoot};
use pinctl_topology::{CpuId, CpuSet};
use serde::Serialize;

/// What fired between two samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IrqDeltas {
    /// Seconds between the two samples.
    pub seconds: f64,
    /// Interrupts that fired, ascending by number.
    pub fired: Vec<IrqDelta>,
}

/// One interrupt's increase per CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqDelta {
    pub irq: u32,
    pub name: String,
    pub managed: bool,
    /// (CPU, times it fired there), CPUs where it did not left out.
    pub per_cpu: Vec<(CpuId, u64)>,
}

/// The interrupts that fired on a set of CPUs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OnCpus {
    /// Movable interrupts (what steering keeps away).
    pub movable: u64,
    /// Managed interrupts (the kernel's own spread).
    pub managed: u64,
    /// The movable interrupts that fired most there: (irq, name, CPU, count), largest first,
    /// at most 3.
    pub top: Vec<(u32, String, CpuId, u64)>,
}

impl IrqDeltas {
    /// What fired on `cpus`.
    pub fn on(&self, cpus: &CpuSet) -> OnCpus {
        let mut out = OnCpus::default();
        let mut all = Vec::new();
        for d in &self.fired {
            for &(cpu, n) in d.per_cpu.iter().filter(|(c, _)| cpus.contains(*c)) {
                if d.managed {
                    out.managed += n;
                } else {
                    out.movable += n;
                    all.push((d.irq, d.name.clone(), cpu, n));
                }
            }
        }
        all.sort_by(|a, b| b.3.cmp(&a.3).then(a.0.cmp(&b.0)));
        all.truncate(3);
        out.top = all;
        out
    }
}

/// The counts of the last sample, kept between cycles.
#[derive(Debug, Default)]
pub struct InterruptCounter {
    last: Option<(Duration, InterruptTable)>,
}

impl InterruptCounter {
    /// Reads `/proc/interrupts` under `root` at `now` (the watcher's time) and returns what
    /// fired since the previous call (`None` the first time).
    pub fn sample(
        &mut self,
        root: &Path,
        now: Duration,
    ) -> Result<Option<IrqDeltas>, DiscoveryError> {
        let table = proc_interrupts::read(&mut FsRoot::new(root))?.unwrap_or_default();
        let deltas =
            self.last.as_ref().map(|(then, old)| deltas(old, &table, now.saturating_sub(*then)));
        self.last = Some((now, table));
        Ok(deltas)
    }
}

/// The increase from `old` to `new`, matched by interrupt number and CPU (a CPU that came
/// online counts from zero; a count that went down, an interrupt freed and requested again,
/// counts from zero too).
pub fn deltas(old: &InterruptTable, new: &InterruptTable, elapsed: Duration) -> IrqDeltas {
    let before: BTreeMap<u32, BTreeMap<CpuId, u64>> = old
        .lines
        .iter()
        .map(|l| (l.irq, old.cpus.iter().copied().zip(l.counts.iter().copied()).collect()))
        .collect();
    let mut fired = Vec::new();
    for l in &new.lines {
        let prev = before.get(&l.irq);
        let per_cpu: Vec<(CpuId, u64)> = new
            .cpus
            .iter()
            .zip(&l.counts)
            .map(|(&cpu, &n)| {
                let was = prev.and_then(|p| p.get(&cpu)).copied().unwrap_or(0);
                (cpu, if n >= was { n - was } else { n })
            })
            .filter(|(_, d)| *d > 0)
            .collect();
        if !per_cpu.is_empty() {
            let name = l.name().to_string();
            fired.push(IrqDelta {
                irq: l.irq,
                managed: pinctl_sysfs::irq::managed_by_name(&name),
                name,
                per_cpu,
            });
        }
    }
    IrqDeltas { seconds: elapsed.as_secs_f64(), fired }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> InterruptTable {
        proc_interrupts::parse(text).unwrap()
    }

    #[test]
    fn increases_by_interrupt_and_cpu_managed_apart() {
        let old = table(
            "CPU0 CPU1 CPU2\n 35: 10 0 0  PCI-MSI 1-edge  eth0-rxtx-0\n 27: 5 5 5  PCI-MSI 2-edge  nvme0q1\n 40: 9 9 9  PCI-MSI 3-edge  gone\n",
        );
        let new = table(
            "CPU0 CPU1 CPU2 CPU3\n 27: 5 8 5 1  PCI-MSI 2-edge  nvme0q1\n 35: 110 0 3 7  PCI-MSI 1-edge  eth0-rxtx-0\n 41: 2 0 0 0  PCI-MSI 4-edge  new\n",
        );
        let d = deltas(&old, &new, Duration::from_secs(10));
        assert_eq!(d.seconds, 10.0);
        let irqs: Vec<(u32, Vec<(u32, u64)>)> =
            d.fired.iter().map(|f| (f.irq, f.per_cpu.clone())).collect();
        assert_eq!(
            irqs,
            vec![
                (27, vec![(1, 3), (3, 1)]),
                (35, vec![(0, 100), (2, 3), (3, 7)]),
                (41, vec![(0, 2)])
            ]
        );
        assert!(d.fired[0].managed && !d.fired[1].managed);
        let on = d.on(&"0-1".parse().unwrap());
        assert_eq!((on.movable, on.managed), (102, 3));
        assert_eq!(on.top[0], (35, "eth0-rxtx-0".to_string(), 0, 100));
        assert_eq!(d.on(&"2-3".parse().unwrap()).movable, 10);
        // A count that went down (freed and requested again) counts from zero.
        let reset = deltas(&new, &old, Duration::from_secs(1));
        assert_eq!(reset.fired.iter().find(|f| f.irq == 40).unwrap().per_cpu.len(), 3);
    }
}
