//! Interrupts: `pinctl irq apply|restore -c FILE` (steering for hosts whose services start
//! with `pinctl exec` from systemd units; `pinctl run` steers by itself), the interrupts part
//! of `pinctl topology` and `pinctl plan`, and what `pinctl run` hands its steering observer
//! (docs/irq.md). The work is pinctl-irq's; this module renders.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use pinctl_irq::{SteerSettings, Steerer, by_hand};
use pinctl_plan::InterruptLanding;
use pinctl_topology::text::escaped;
use pinctl_topology::{CpuSet, Irq, Topology};

use crate::error::{CmdResult, Error};

/// Arguments of `pinctl irq`.
#[derive(Debug, clap::Args)]
pub(crate) struct IrqArgs {
    #[command(subcommand)]
    action: IrqAction,
}

#[derive(Debug, clap::Subcommand)]
enum IrqAction {
    /// Steer the host's interrupts for the plan of a service file, and record what changed
    /// (for hosts that start services with `pinctl exec`; `pinctl run` steers by itself).
    Apply(ApplyArgs),
    /// Put back every interrupt affinity, queue mask and irqbalance setting recorded by
    /// `pinctl irq apply` (or by a `pinctl run` of the same file that was detached or killed).
    Restore(FileArg),
}

#[derive(Debug, clap::Args)]
struct ApplyArgs {
    #[command(flatten)]
    file: FileArg,
    /// Print what would be moved and change nothing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, clap::Args)]
struct FileArg {
    /// The service file (its `[host] steer-interrupts` must be on).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: PathBuf,
    /// The supervisor's state file, beside which the record is kept (default: `[host]
    /// state-file`, else /run/pinctl/NAME.state.json).
    #[arg(long, value_name = "PATH")]
    state_file: Option<PathBuf>,
}

pub(crate) fn run(args: IrqArgs) -> CmdResult {
    match args.action {
        IrqAction::Apply(a) => apply(a),
        IrqAction::Restore(a) => restore(a),
    }
}

fn apply(args: ApplyArgs) -> CmdResult {
    let host = super::host::load(std::slice::from_ref(&args.file.config), None, false)?;
    let prepared = host.own();
    if !prepared.config.interrupts.steer {
        return Err(Error::failure(anyhow::anyhow!(
            "`{}` does not steer interrupts: set `steer-interrupts = true` in its `[host]` table \
             (docs/irq.md)",
            args.file.config.display()
        )));
    }
    let (_, plan) = host.plan()?;
    let inputs = SteerSettings::of_file(prepared).of_plan(&plan);
    let topology = &prepared.loaded.topology;
    let mut out = io::BufWriter::new(io::stdout().lock());
    if args.dry_run {
        let d = pinctl_irq::decide(topology, &topology.interrupts, &inputs);
        render_decision(&mut out, &d, topology).context("writing to stdout")?;
        out.flush().context("writing to stdout")?;
        return Ok(ExitCode::SUCCESS);
    }
    by_hand::needs_root("apply").map_err(Error::failure)?;
    let held = by_hand::hold(&prepared.config, args.file.state_file).map_err(Error::failure)?;
    let record = &held.record;
    let report = Steerer::live(record).apply(topology, &inputs).map_err(Error::failure)?;
    for line in report.lines() {
        writeln!(out, "{}", escaped(&line)).context("writing to stdout")?;
    }
    writeln!(
        out,
        "steered: {} interrupts moved, {} queue masks set, {} refused, {} left to irqbalance, \
         {} managed on quiet CPUs {}; record `{}`",
        report.moved.len(),
        report.queues.len(),
        report.refused.len(),
        report.left_to_irqbalance,
        report.unmovable.len(),
        report.quiet_cpus,
        record.display()
    )
    .context("writing to stdout")?;
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

fn restore(args: FileArg) -> CmdResult {
    by_hand::needs_root("restore").map_err(Error::failure)?;
    let config = pinctl_launch::load_config(&args.config)?;
    let held = by_hand::hold(&config, args.state_file).map_err(Error::failure)?;
    let report = Steerer::live(&held.record).restore().map_err(Error::failure)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    for line in report.lines() {
        writeln!(out, "{}", escaped(&line)).context("writing to stdout")?;
    }
    writeln!(
        out,
        "restored: {} interrupts and {} queue masks put back",
        report.restored.len(),
        report.restored_queues.len()
    )
    .context("writing to stdout")?;
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// `pinctl irq apply --dry-run`: what would be moved where, and why.
fn render_decision(out: &mut impl Write, d: &pinctl_irq::Decision, t: &Topology) -> io::Result<()> {
    writeln!(out, "quiet CPUs (irqbalance would avoid them): {}", none(&d.quiet_cpus))?;
    for target in &d.irqs {
        let from =
            t.interrupts.irq(target.irq).and_then(|i| i.affinity.clone()).unwrap_or_default();
        if from == target.to {
            continue;
        }
        let why = match &target.why {
            pinctl_irq::Why::KeptFreeNic { interface } => format!("kept-free NIC {interface}"),
            pinctl_irq::Why::NicQueues { interface, instances } => {
                format!("queue of {interface} for {}", instances.join(", "))
            }
            pinctl_irq::Why::OffQuietCpus => "off quiet CPUs".to_string(),
        };
        writeln!(
            out,
            "would move IRQ {} {}: {} -> {} ({why})",
            target.irq,
            escaped(&target.name),
            from,
            target.to
        )?;
    }
    for q in &d.queues {
        let file = if q.rx { "rps_cpus" } else { "xps_cpus" };
        let kind = if q.rx { "rx" } else { "tx" };
        writeln!(out, "would set {}/{kind}-{} {file} to {}", escaped(&q.interface), q.queue, q.to)?;
    }
    for u in &d.unmovable {
        writeln!(
            out,
            "stays: IRQ {} {} on quiet CPUs {} (managed by the kernel)",
            u.irq,
            escaped(&u.name),
            u.on
        )?;
    }
    for n in &d.notes {
        writeln!(out, "note: {}", escaped(n))?;
    }
    Ok(())
}

fn none(set: &CpuSet) -> String {
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
pub(crate) fn render_interrupts(out: &mut impl Write, t: &Topology) -> io::Result<()> {
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

/// Asks the live machine's irqbalance which CPUs it avoids (root only; otherwise left unknown).
pub(crate) fn ask_irqbalance(t: &mut Topology) {
    use pinctl_irq::irqbalance::Balancer as _;
    let Some(b) = t.interrupts.irqbalance.as_mut() else { return };
    if pinctl_trust::euid() != 0 {
        return;
    }
    if let Ok(setup) = pinctl_irq::irqbalance::SocketBalancer.setup(Path::new(&b.socket)) {
        b.banned_cpus = Some(setup.banned_cpus);
    }
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
