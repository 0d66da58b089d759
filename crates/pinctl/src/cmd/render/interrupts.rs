//! The interrupts of a topology for people: each PCI function's interrupts under its devices,
//! the others and irqbalance (`pinctl topology`), and those that land on a plan's CPUs
//! (`pinctl plan`, `pinctl fleet`).

use std::io::{self, Write};

use pinctl_plan::InterruptLanding;
use pinctl_topology::text::escaped;
use pinctl_topology::{CpuSet, Irq, Topology};

pub(crate) fn none(set: &CpuSet) -> String {
    if set.is_empty() { "none".to_string() } else { set.to_string() }
}

/// `fired 0:114 6:2`, or `never fired`.
fn fired(i: &Irq) -> String {
    if i.fired.is_empty() {
        return "never fired".to_string();
    }
    let each: Vec<String> = i.fired.iter().map(|c| format!("{}:{}", c.cpu, c.count)).collect();
    format!("fired (CPU:times) {}", each.join(" "))
}

fn irq_line(i: &Irq) -> String {
    let set =
        |s: &Option<CpuSet>| s.as_ref().map_or_else(|| "unknown".to_string(), ToString::to_string);
    let managed = if i.managed { ", managed by the kernel (cannot be moved)" } else { "" };
    let name = if i.name.is_empty() { "(no handler)".to_string() } else { i.name.clone() };
    escaped(&format!(
        "IRQ {} {name}: affinity {}, effective {}{managed}, {}",
        i.irq,
        set(&i.affinity),
        set(&i.effective_affinity),
        fired(i)
    ))
}

/// `RPS off`, `RPS 6-7`, `RPS per queue 0:6 1:7`.
fn masks(kind: &str, queues: &[pinctl_topology::QueueCpus]) -> String {
    let known: Vec<(u32, &CpuSet)> =
        queues.iter().filter_map(|q| q.cpus.as_ref().map(|c| (q.queue, c))).collect();
    if known.is_empty() {
        return format!("{kind} not available");
    }
    if known.iter().all(|(_, c)| c.is_empty()) {
        return format!("{kind} off");
    }
    if known.iter().all(|(_, c)| *c == known[0].1) {
        return format!("{kind} {}", known[0].1);
    }
    let each: Vec<String> = known.iter().map(|(q, c)| format!("{q}:{}", none(c))).collect();
    format!("{kind} per queue {}", each.join(" "))
}

/// The interrupts part of `pinctl topology`: each PCI function's interrupts under its devices
/// (NIC queues with their RPS and XPS masks), the others, and irqbalance.
pub(crate) fn render(out: &mut impl Write, t: &Topology) -> io::Result<()> {
    let i = &t.interrupts;
    if i.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "interrupts (affinity: where each may go; effective: where the kernel delivers it):"
    )?;
    let mut functions: Vec<&str> = t.devices.iter().filter_map(|d| d.pci.as_deref()).collect();
    functions.sort_unstable();
    functions.dedup();
    for pci in functions {
        let irqs: Vec<&Irq> = i.of_pci(pci).collect();
        let devices: Vec<&pinctl_topology::Device> =
            t.devices.iter().filter(|d| d.pci.as_deref() == Some(pci)).collect();
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        let node = devices.first().map_or_else(|| "unknown".to_string(), |d| d.nodes.to_string());
        let mut head = format!(
            "  {} ({pci}, node {}): {} interrupts",
            names.join(", "),
            if node.is_empty() { "unknown" } else { &node },
            irqs.len()
        );
        for d in &devices {
            if let Some(q) = i.queues_of(&d.name) {
                head.push_str(&format!(
                    "; {}: {} receive queues ({}), {} transmit queues ({})",
                    d.name,
                    q.rx.len(),
                    masks("RPS", &q.rx),
                    q.tx.len(),
                    masks("XPS", &q.tx)
                ));
            }
        }
        if irqs.is_empty() && !head.contains("queues") {
            continue;
        }
        writeln!(out, "{}", escaped(&head))?;
        for irq in irqs {
            writeln!(out, "    {}", irq_line(irq))?;
        }
    }
    let others: Vec<&Irq> = i.irqs.iter().filter(|q| q.pci.is_none()).collect();
    if !others.is_empty() {
        writeln!(out, "  other interrupts:")?;
        for irq in others {
            writeln!(out, "    {}", irq_line(irq))?;
        }
    }
    match &i.irqbalance {
        Some(b) => {
            let banned = match &b.banned_cpus {
                Some(c) if c.is_empty() => "avoids no CPU".to_string(),
                Some(c) => format!("avoids CPUs {c}"),
                None => "the CPUs it avoids were not asked (pinctl asks it on the live machine, as root)".to_string(),
            };
            writeln!(
                out,
                "{}",
                escaped(&format!("irqbalance: PID {} ({}), {banned}", b.pid, b.socket))
            )?;
        }
        None => writeln!(out, "irqbalance: not running (no control socket in /run/irqbalance)")?,
    }
    Ok(())
}

/// The interrupts part of `pinctl plan`.
pub(crate) fn render_landing(
    out: &mut impl Write,
    t: &Topology,
    landing: &[InterruptLanding],
    verbose: bool,
) -> io::Result<()> {
    if t.interrupts.irqs.is_empty() {
        return Ok(());
    }
    if landing.is_empty() {
        writeln!(out, "interrupts on service CPUs today: none")?;
        return Ok(());
    }
    if !verbose {
        writeln!(out, "interrupts on service CPUs today (`--verbose` lists each):")?;
        for line in landing_summary(landing) {
            writeln!(out, "{}", escaped(&line))?;
        }
        return Ok(());
    }
    writeln!(out, "interrupts on service CPUs today:")?;
    for l in landing {
        let devices = if l.devices.is_empty() {
            String::new()
        } else {
            format!(" ({})", l.devices.join(", "))
        };
        writeln!(
            out,
            "{}",
            escaped(&format!(
                "  {}: IRQ {} {}{devices} on CPU {}, fired {} times there: {}",
                l.instance, l.irq, l.name, l.on_cpus, l.fired, l.steering
            ))
        )?;
    }
    Ok(())
}

/// One line per instance: how many interrupts land on its CPUs, and what steering does about
/// them (`  db-0: 6 interrupts: 4 moved, 2 stays (managed by the kernel)`), instances and
/// outcomes in the order they first come.
fn landing_summary(landing: &[InterruptLanding]) -> Vec<String> {
    let mut instances: Vec<(&str, Vec<(&str, usize)>)> = Vec::new();
    for l in landing {
        let at = match instances.iter().position(|(i, _)| *i == l.instance) {
            Some(at) => at,
            None => {
                instances.push((&l.instance, Vec::new()));
                instances.len() - 1
            }
        };
        let outcomes = &mut instances[at].1;
        match outcomes.iter_mut().find(|(s, _)| *s == l.steering) {
            Some((_, n)) => *n += 1,
            None => outcomes.push((&l.steering, 1)),
        }
    }
    instances
        .into_iter()
        .map(|(instance, outcomes)| {
            let total: usize = outcomes.iter().map(|(_, n)| n).sum();
            let what: Vec<String> = match outcomes.as_slice() {
                [(steering, _)] => vec![steering.to_string()],
                _ => outcomes.iter().map(|(s, n)| format!("{n} {s}")).collect(),
            };
            let plural = if total == 1 { "" } else { "s" };
            format!("  {instance}: {total} interrupt{plural}: {}", what.join(", "))
        })
        .collect()
}
