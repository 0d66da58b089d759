//! Interrupts: `pinctl irq apply|restore -c FILE` (steering for hosts whose services start
//! with `pinctl exec` from systemd units; `pinctl run` steers by itself), the interrupts part
//! of `pinctl topology` and `pinctl plan`, and what `pinctl run` hands its steering observer
//! (docs/irq.md). The work is pinctl-irq's; this module renders.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use pinctl_irq::{SteerSettings, Steerer, by_hand};
use pinctl_topology::Topology;
use pinctl_topology::text::escaped;

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
    writeln!(
        out,
        "quiet CPUs (irqbalance would avoid them): {}",
        super::render::interrupts::none(&d.quiet_cpus)
    )?;
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
