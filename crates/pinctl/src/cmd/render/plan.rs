//! A plan's text form, as `pinctl plan` prints it and `pinctl fleet` prints it per host: what
//! it is of, one row per instance with its reasons, the free, kept-free and shared nodes, the
//! interrupts on the instances' CPUs, then the plan's and the host's warnings.

use std::io::{self, Write};

use pinctl_plan::{InterruptLanding, Placement, Plan};
use pinctl_topology::text::escaped;

/// What a plan's text form says it is of: the files asked for, the topology, the host's
/// other files planned with them, and each instance's supervisor.
pub(crate) struct PlanOf<'a> {
    pub(crate) files: &'a [std::path::PathBuf],
    pub(crate) loaded: &'a pinctl_sysfs::LoadedTopology,
    pub(crate) others: Vec<String>,
    pub(crate) supervisor: &'a dyn Fn(&str) -> String,
}

/// The text form of `plan`, described by `of`.
pub(crate) fn render(
    out: &mut impl Write,
    plan: &Plan,
    of: &PlanOf<'_>,
    landing: &[InterruptLanding],
    verbose: bool,
) -> io::Result<()> {
    heading(out, plan, of)?;
    placements(out, plan, of)?;
    nodes(out, plan)?;
    super::interrupts::render_landing(out, &of.loaded.topology, landing, verbose)?;
    let host = &of.loaded.topology.warnings;
    if !plan.warnings.is_empty() || !host.is_empty() {
        writeln!(out)?;
        for w in &plan.warnings {
            writeln!(out, "warning: {}", escaped(w))?;
        }
        for w in host {
            writeln!(out, "warning: host: {}", escaped(w))?;
        }
    }
    Ok(())
}

/// `plan for FILES on SOURCE`, the host's other files, and what distances were compared.
fn heading(out: &mut impl Write, plan: &Plan, of: &PlanOf<'_>) -> io::Result<()> {
    let files: Vec<String> =
        of.files.iter().map(|p| format!("`{}`", escaped(&p.display().to_string()))).collect();
    let source = escaped(&of.loaded.source.to_string());
    writeln!(out, "plan for {} on {source}", files.join(", "))?;
    if !of.others.is_empty() {
        writeln!(out, "planned with the host's other files: {}", escaped(&of.others.join(", ")))?;
    }
    if let Some(line) = distances_line(&plan.distances) {
        writeln!(out, "{}", escaped(&line))?;
    }
    writeln!(out)
}

/// One row per instance (its nodes, CPUs and memory), each followed by its reasons.
fn placements(out: &mut impl Write, plan: &Plan, of: &PlanOf<'_>) -> io::Result<()> {
    // Several files: each instance's supervisor (`[host] name`) says whose it is.
    let several = of.files.len() > 1;
    let rows: Vec<[String; 4]> = plan
        .placements
        .iter()
        .map(|p| {
            let name = if several {
                format!("{} ({})", escaped(&p.instance), escaped(&(of.supervisor)(&p.instance)))
            } else {
                escaped(&p.instance)
            };
            let nodes = p.placement.nodes.to_string();
            [name, nodes, p.placement.cpus.to_string(), memory(&p.placement)]
        })
        .collect();
    let header =
        [if several { "INSTANCE (SUPERVISOR)" } else { "INSTANCE" }, "NODES", "CPUS", "MEMORY"];
    let mut lines = super::aligned(header, &rows).into_iter();
    writeln!(out, "{}", lines.next().unwrap_or_default())?;
    for (line, placement) in lines.zip(&plan.placements) {
        writeln!(out, "{line}")?;
        for reason in &placement.reasons {
            writeln!(out, "    - {}", escaped(reason))?;
        }
    }
    writeln!(out)
}

/// The free and kept-free nodes, the nodes whose CPUs instances share, and the sharing groups.
fn nodes(out: &mut impl Write, plan: &Plan) -> io::Result<()> {
    let none = |s: String| if s.is_empty() { "none".to_string() } else { s };
    writeln!(out, "free nodes: {}", none(plan.free_nodes.to_string()))?;
    let kept: Vec<String> = plan
        .kept_free_nodes
        .iter()
        .map(|n| match plan.kept_free_for.get(&n) {
            Some(why) => format!("{n} (for {})", why.join(", ")),
            None => n.to_string(),
        })
        .collect();
    writeln!(out, "kept free:  {}", escaped(&none(kept.join(", "))))?;
    let shared: Vec<&pinctl_plan::NodeUse> =
        plan.node_use.iter().filter(|u| u.overlaps(&plan.sharing_groups)).collect();
    if !shared.is_empty() {
        writeln!(out, "shared CPUs:")?;
        for u in shared {
            writeln!(
                out,
                "  node {}: {} ({} CPUs of instances on {} usable CPUs: {} per CPU)",
                u.node,
                escaped(&u.instances.join(", ")),
                u.cpus_given,
                u.usable_cpus,
                u.cpus_per_cpu()
            )?;
        }
    }
    if !plan.sharing_groups.is_empty() {
        writeln!(out, "sharing groups (instances whose CPUs overlap):")?;
        for (g, group) in plan.sharing_groups.iter().enumerate() {
            writeln!(
                out,
                "  {g}: CPUs {} of node{} {}: {}",
                group.cpus,
                if group.nodes.len() == 1 { "" } else { "s" },
                group.nodes,
                escaped(&group.members.join(", "))
            )?;
        }
    }
    Ok(())
}

/// `distances: measured idle latency (...)`: what the plan compared nodes by, when that is
/// not simply the SLIT table of a topology that has nothing better.
fn distances_line(d: &pinctl_plan::DistanceReport) -> Option<String> {
    use pinctl_plan::DistanceMeasure;
    let note = d.note.as_deref()?;
    Some(match d.measure {
        DistanceMeasure::Measured | DistanceMeasure::Hmat => format!("distances: {note}"),
        DistanceMeasure::Slit => format!("distances: SLIT ({note})"),
        DistanceMeasure::Assumed => format!("distances: unknown ({note})"),
    })
}

/// `bind 2`, `preferred 2-3`, `local`.
fn memory(p: &Placement) -> String {
    if p.memory_nodes.is_empty() {
        p.memory_policy.to_string()
    } else {
        format!("{} {}", p.memory_policy, p.memory_nodes)
    }
}
