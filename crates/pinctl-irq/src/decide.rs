//! The steering decision, a pure function of the topology, its interrupts and the plan's
//! instances: where each interrupt pinctl governs goes, the RPS and XPS CPUs of the steered
//! NICs' queues, the CPUs irqbalance must avoid and the interrupts it must leave alone.
//!
//! - The queues of a kept-free NIC (`keep-free`, or the default route's) go to the CPUs of
//!   its node, one CPU per queue in turn (the queues of one number share a CPU: virtio's
//!   `input.3` and `output.3`), its other vectors to all of them; RPS of each receive queue
//!   names those CPUs, XPS shares them out among the transmit queues. When every CPU of the
//!   node belongs to a quiet instance (the node was not kept free after all), the nearest
//!   node's free CPUs take them.
//! - The NICs an instance of a `nic-queues` service is `near` have their queues spread over
//!   that instance's CPUs instead (perftune's `mq` mode, for receive flow steering).
//! - Every other movable interrupt allowed on a quiet instance's CPU loses those CPUs; one
//!   left with none goes to the free CPUs of its device's node, else the nearest node's.
//! - Managed interrupts (the kernel spreads them and refuses a new affinity) are never
//!   written: those on a quiet CPU are reported as unmovable.
//!
//! Quiet CPUs are those of every instance whose service is `interrupts = "quiet"` (the
//! default): the planner never gives a CPU to two instances, so they are the instance's own.

use std::collections::{BTreeMap, BTreeSet};

use pinctl_config::ServiceInterrupts;
use pinctl_topology::{CpuSet, Interrupts, NodeSet, Topology};
use serde::Serialize;

use crate::inputs::SteerInputs;

/// Why pinctl governs an interrupt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "reason")]
pub enum Why {
    /// A vector of a NIC the plan keeps a node free for.
    KeptFreeNic { interface: String },
    /// A vector of a NIC that `nic-queues` instances are near.
    NicQueues { interface: String, instances: Vec<String> },
    /// It was allowed on a quiet instance's CPUs.
    OffQuietCpus,
}

impl Why {
    /// Whether pinctl places it itself (irqbalance must leave it alone), rather than only
    /// keeping it off quiet CPUs (which irqbalance does when it runs).
    pub fn pinned(&self) -> bool {
        !matches!(self, Why::OffQuietCpus)
    }
}

/// Where one interrupt goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqTarget {
    pub irq: u32,
    pub name: String,
    pub to: CpuSet,
    pub why: Why,
}

/// The CPUs of one queue's RPS (receive) or XPS (transmit) mask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueTarget {
    pub interface: String,
    /// `true` for `rx-N/rps_cpus`, `false` for `tx-N/xps_cpus`.
    pub rx: bool,
    pub queue: u32,
    pub to: CpuSet,
}

/// A managed interrupt that lands on quiet CPUs: the kernel will not let it be moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmovable {
    pub irq: u32,
    pub name: String,
    /// The quiet CPUs it lands on.
    pub on: CpuSet,
}

/// The whole decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// The CPUs of quiet instances: what irqbalance must avoid. Empty when no CPU would be
    /// left for interrupts (then nothing is steered).
    pub quiet_cpus: CpuSet,
    /// Every interrupt pinctl governs, ascending by number.
    pub irqs: Vec<IrqTarget>,
    pub queues: Vec<QueueTarget>,
    pub unmovable: Vec<Unmovable>,
    /// What did not go as the rules say, and what was done instead.
    pub notes: Vec<String>,
}

impl Decision {
    /// The target of interrupt `irq`, when pinctl governs it.
    pub fn target(&self, irq: u32) -> Option<&IrqTarget> {
        self.irqs.binary_search_by_key(&irq, |t| t.irq).ok().map(|i| &self.irqs[i])
    }

    /// The interrupts pinctl places itself: irqbalance must not balance them.
    pub fn pinned_irqs(&self) -> Vec<u32> {
        self.irqs.iter().filter(|t| t.why.pinned()).map(|t| t.irq).collect()
    }
}

/// Markers of a NIC queue's vector in its name, as the drivers write them (perftune.py's list,
/// plus vmxnet3's `rxtx` and e1000e's `rx`/`tx`): `eth0-TxRx-3`, `eth0-rxtx-0`, `bnxt-fp-2`,
/// `mlx5_comp7@pci:...`, `virtio2-input.0`, `mana_q1@...`.
const QUEUE_MARKERS: [&str; 13] = [
    "-TxRx-",
    "-txrx-",
    "-rxtx-",
    "-Tx-Rx-",
    "-fp-",
    "-rx-",
    "-tx-",
    "mlx4-",
    "mlx5_comp",
    "-input.",
    "-output.",
    "mana_q",
    "-queue-",
];

/// The queue number of a NIC queue's vector (the digits its name ends with, before an `@`),
/// `None` for the device's other vectors (`eth0`, `virtio2-config`, `mlx5_async`).
pub fn queue_of(name: &str) -> Option<u32> {
    let base = name.split('@').next().unwrap_or(name);
    if !QUEUE_MARKERS.iter().any(|m| base.contains(m)) {
        return None;
    }
    let digits = base.len() - base.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    base[base.len() - digits..].parse().ok()
}

/// The online CPUs of the topology (every node's when CPUs are not listed).
fn online_cpus(t: &Topology) -> CpuSet {
    let listed: CpuSet = t.cpus.iter().filter(|c| c.online).map(|c| c.id).collect();
    if listed.is_empty() {
        t.nodes.iter().fold(CpuSet::new(), |a, n| a.union(&n.cpus))
    } else {
        listed
    }
}

/// The CPUs of `free` on the nodes nearest `from` (by the topology's distances) that have
/// any; all of `free` when the distances are unknown.
fn nearest_free(t: &Topology, from: &NodeSet, free: &CpuSet) -> CpuSet {
    let mut best: Option<(u32, CpuSet)> = None;
    for n in &t.nodes {
        let cpus = n.cpus.intersection(free);
        if cpus.is_empty() {
            continue;
        }
        let d = from.iter().filter_map(|f| t.distance(f, n.id)).min().unwrap_or(u32::MAX);
        best = match best {
            Some((bd, b)) if bd < d => Some((bd, b)),
            Some((bd, b)) if bd == d => Some((bd, b.union(&cpus))),
            _ => Some((d, cpus)),
        };
    }
    best.map_or_else(|| free.clone(), |(_, cpus)| cpus)
}

fn node_cpus(t: &Topology, nodes: &NodeSet) -> CpuSet {
    nodes.iter().filter_map(|n| t.node(n)).fold(CpuSet::new(), |a, n| a.union(&n.cpus))
}

/// Shares `cpus` out among `queues` queues: each queue a CPU in turn, each CPU one queue when
/// there are at least as many CPUs as queues (XPS: every sending CPU maps to one queue).
fn share_out(cpus: &CpuSet, queues: usize, queue: usize) -> CpuSet {
    let list: Vec<u32> = cpus.iter().collect();
    if list.is_empty() || queues == 0 {
        return CpuSet::new();
    }
    if queues >= list.len() {
        return [list[queue % list.len()]].into_iter().collect();
    }
    list.iter().enumerate().filter(|(i, _)| i % queues == queue % queues).map(|(_, &c)| c).collect()
}

/// Decides where every interrupt pinctl governs goes (see the module).
pub fn decide(topology: &Topology, interrupts: &Interrupts, inputs: &SteerInputs) -> Decision {
    let online = online_cpus(topology);
    let quiet: CpuSet = inputs
        .owners
        .iter()
        .filter(|o| o.mode == ServiceInterrupts::Quiet)
        .fold(CpuSet::new(), |a, o| a.union(&o.cpus))
        .intersection(&online);
    let free = online.difference(&quiet);
    let mut d = Decision::default();
    if free.is_empty() {
        if !quiet.is_empty() {
            d.notes.push(format!(
                "every online CPU ({online}) belongs to a quiet instance: no CPU is left for \
                 interrupts, so none is steered (give `reserve-cpus`, or keep a node free)"
            ));
        }
        return d;
    }
    d.quiet_cpus = quiet.clone();

    let nics = nic_destinations(topology, inputs, &online, &free, &mut d.notes);
    let governed = steer_nics(topology, interrupts, &nics, &quiet, &mut d);
    keep_off_quiet(topology, interrupts, &governed, &Cpus { online, quiet, free }, &mut d);
    d.irqs.sort_by_key(|t| t.irq);
    d.unmovable.sort_by_key(|u| u.irq);
    d
}

/// The online CPUs, those of quiet instances, and the others, where interrupts may go.
struct Cpus {
    online: CpuSet,
    quiet: CpuSet,
    free: CpuSet,
}

/// Where each steered NIC's vectors go, and why: a kept-free NIC's to the free CPUs of its
/// node (else the nearest), a NIC `near` nic-queues instances to their CPUs.
fn nic_destinations(
    topology: &Topology,
    inputs: &SteerInputs,
    online: &CpuSet,
    free: &CpuSet,
    notes: &mut Vec<String>,
) -> BTreeMap<String, (CpuSet, Why)> {
    let mut nics: BTreeMap<String, (CpuSet, Why)> = BTreeMap::new();
    for nic in &inputs.kept_free_nics {
        let Some(dev) = topology.devices.iter().find(|x| &x.name == nic) else { continue };
        if dev.nodes.is_empty() {
            notes.push(format!(
                "the node of kept-free NIC `{nic}` is unknown: its interrupts are only kept off \
                 quiet CPUs"
            ));
            continue;
        }
        let mut to = node_cpus(topology, &dev.nodes).intersection(free);
        if to.is_empty() {
            to = nearest_free(topology, &dev.nodes, free);
            notes.push(format!(
                "every CPU of node(s) {} of `{nic}` belongs to a quiet instance: its queues go \
                 to the nearest free CPUs, {to}",
                dev.nodes
            ));
        }
        nics.insert(nic.clone(), (to, Why::KeptFreeNic { interface: nic.clone() }));
    }
    let mut own: BTreeMap<&str, (CpuSet, Vec<String>)> = BTreeMap::new();
    for o in inputs.owners.iter().filter(|o| o.mode == ServiceInterrupts::NicQueues) {
        for nic in &o.nics {
            let e = own.entry(nic.as_str()).or_default();
            e.0 = e.0.union(&o.cpus.intersection(online));
            e.1.push(o.instance.clone());
        }
    }
    for (nic, (cpus, instances)) in own {
        if cpus.is_empty() {
            continue;
        }
        if nics.contains_key(nic) {
            notes.push(format!(
                "`{nic}` is kept free and `near` nic-queues instance(s) {}: its queues go to \
                 their CPUs",
                instances.join(", ")
            ));
        }
        let why = Why::NicQueues { interface: nic.to_string(), instances };
        nics.insert(nic.to_string(), (cpus, why));
    }

    nics
}

/// Each steered NIC's vectors, one queue a CPU, and its queues' RPS and XPS masks: the
/// interrupts so governed.
fn steer_nics(
    topology: &Topology,
    interrupts: &Interrupts,
    nics: &BTreeMap<String, (CpuSet, Why)>,
    quiet: &CpuSet,
    d: &mut Decision,
) -> BTreeSet<u32> {
    let mut governed: BTreeSet<u32> = BTreeSet::new();
    for (nic, (to, why)) in nics {
        let Some(pci) =
            topology.devices.iter().find(|x| &x.name == nic).and_then(|x| x.pci.as_deref())
        else {
            continue;
        };
        let mut vectors: Vec<_> = interrupts.of_pci(pci).collect();
        vectors.sort_by_key(|i| (queue_of(&i.name), i.irq));
        let cpus: Vec<u32> = to.iter().collect();
        for (k, irq) in vectors.iter().enumerate() {
            governed.insert(irq.irq);
            if irq.managed {
                let on = irq.lands_on().map(|l| l.intersection(quiet)).unwrap_or_default();
                if !on.is_empty() {
                    d.unmovable.push(Unmovable { irq: irq.irq, name: irq.name.clone(), on });
                }
                continue;
            }
            let target = match queue_of(&irq.name) {
                Some(q) => [cpus[q as usize % cpus.len()]].into_iter().collect(),
                // A queue vector without a number, or the device's other vectors.
                None if k < cpus.len() && QUEUE_MARKERS.iter().any(|m| irq.name.contains(m)) => {
                    [cpus[k]].into_iter().collect()
                }
                None => to.clone(),
            };
            d.irqs.push(IrqTarget {
                irq: irq.irq,
                name: irq.name.clone(),
                to: target,
                why: why.clone(),
            });
        }
        if let Some(q) = interrupts.queues_of(nic) {
            let tx: Vec<_> = q.tx.iter().filter(|x| x.cpus.is_some()).collect();
            for r in q.rx.iter().filter(|x| x.cpus.is_some()) {
                d.queues.push(QueueTarget {
                    interface: nic.clone(),
                    rx: true,
                    queue: r.queue,
                    to: to.clone(),
                });
            }
            for (k, t) in tx.iter().enumerate() {
                let share = share_out(to, tx.len(), k);
                d.queues.push(QueueTarget {
                    interface: nic.clone(),
                    rx: false,
                    queue: t.queue,
                    to: share,
                });
            }
        }
    }

    governed
}

/// Every other interrupt on a quiet CPU moves off it: to the rest of its CPUs, else its
/// node's free CPUs, else the nearest; a kernel-managed one that cannot is said unmovable.
fn keep_off_quiet(
    topology: &Topology,
    interrupts: &Interrupts,
    governed: &BTreeSet<u32>,
    cpus: &Cpus,
    d: &mut Decision,
) {
    let Cpus { online, quiet, free } = cpus;
    for irq in &interrupts.irqs {
        if governed.contains(&irq.irq) {
            continue;
        }
        if irq.managed {
            let on = irq.lands_on().map(|l| l.intersection(quiet)).unwrap_or_default();
            if !on.is_empty() {
                d.unmovable.push(Unmovable { irq: irq.irq, name: irq.name.clone(), on });
            }
            continue;
        }
        let Some(affinity) = &irq.affinity else { continue };
        if affinity.is_disjoint(quiet) {
            continue;
        }
        let mut to = affinity.difference(quiet).intersection(online);
        if to.is_empty() {
            let nodes: NodeSet = irq.node.into_iter().collect();
            to = if nodes.is_empty() {
                free.clone()
            } else {
                let own = node_cpus(topology, &nodes).intersection(free);
                if own.is_empty() { nearest_free(topology, &nodes, free) } else { own }
            };
        }
        d.irqs.push(IrqTarget { irq: irq.irq, name: irq.name.clone(), to, why: Why::OffQuietCpus });
    }
}
