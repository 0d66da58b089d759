//! Checks of a valid config against one machine's topology: what can only be wrong on a
//! given host (a node it lacks, more CPUs than it has). Whether everything fits together is
//! the planner's question, not this module's: here each value is checked on its own.

use pinctl_topology::{DeviceKind, IdKind, IdSet, NodeSet, Topology};

use crate::diagnostic::{Diagnostic, Severity, Span};
use crate::model::{Config, InstanceSize, KeepFree, Service, ServiceSpans};
use crate::values::format_size;

/// Checks that depend on the machine: `only-nodes` naming a node the topology lacks,
/// `reserve-cpus` outside the online CPUs, `keep-free` nodes that don't exist or NICs the host
/// doesn't have, `nodes = N` larger than the host's nodes with CPUs, `cpus = N` larger than
/// the CPUs the service may use, a `memory-reserve` that leaves a node no memory. The
/// diagnostics point into the file when the config was parsed from one.
///
/// Paths in `near` are not checked here: whether a missing path is an error depends on the
/// command (the CLI's job).
pub fn check_against(config: &Config, topology: &Topology) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    check_reserve_cpus(config, topology, &mut out);
    check_keep_free(config, topology, &mut out);
    check_memory_reserve(config, topology, &mut out);
    for (index, service) in config.services.iter().enumerate() {
        let spans = config.spans.services.get(index);
        let candidates = check_only_nodes(config, topology, service, spans, &mut out);
        check_size(config, topology, service, spans, &candidates, &mut out);
    }
    out.sort_by_key(|d| d.location.as_ref().map(|l| (l.line(), l.column())));
    out
}

/// `reserve-cpus` must name online CPUs.
fn check_reserve_cpus(config: &Config, topology: &Topology, out: &mut Vec<Diagnostic>) {
    let online = topology.online_cpus();
    let outside = config.host.reserve_cpus.difference(&online);
    if !outside.is_empty() {
        out.push(
            config
                .diagnostic_at(
                    config.spans.host.reserve_cpus.as_ref(),
                    Severity::Error,
                    format!("`reserve-cpus` names CPUs {outside} that are not online on this host"),
                )
                .with_note(format!("online CPUs: {}", list_or_none(&online))),
        );
    }
}

/// `keep-free` must name nodes the host has and its network devices.
fn check_keep_free(config: &Config, topology: &Topology, out: &mut Vec<Diagnostic>) {
    let Some(keep_free) = &config.host.keep_free else { return };
    let node_ids = topology.node_ids();
    for (i, entry) in keep_free.iter().enumerate() {
        let span = config.spans.host.keep_free.get(i);
        match entry {
            KeepFree::Node(n) if !node_ids.contains(*n) => out.push(
                config
                    .diagnostic_at(
                        span,
                        Severity::Error,
                        format!("`keep-free` names node {n}, which this host does not have"),
                    )
                    .with_note(format!("nodes: {}", list_or_none(&node_ids))),
            ),
            KeepFree::Nic(name) => match topology.device(name) {
                None => out.push(unknown_nic(config, topology, span, name)),
                Some(d) if !matches!(d.kind, DeviceKind::Nic | DeviceKind::Infiniband) => {
                    out.push(config.diagnostic_at(
                        span,
                        Severity::Warning,
                        format!("`keep-free` names `{name}`, which is not a network device"),
                    ));
                }
                Some(_) => {}
            },
            KeepFree::Node(_) => {}
        }
    }
}

/// The error for a `keep-free` NIC the host does not have, listing those it has.
fn unknown_nic(
    config: &Config,
    topology: &Topology,
    span: Option<&Span>,
    name: &str,
) -> Diagnostic {
    let nics: Vec<&str> = topology
        .devices
        .iter()
        .filter(|d| matches!(d.kind, DeviceKind::Nic | DeviceKind::Infiniband))
        .map(|d| d.name.as_str())
        .collect();
    let note = if nics.is_empty() {
        "this host has no network devices with a known node".to_string()
    } else {
        format!("network devices: {}", nics.join(", "))
    };
    let mut d = config
        .diagnostic_at(
            span,
            Severity::Error,
            format!("`keep-free` names `{name}`, which this host does not have"),
        )
        .with_note(note);
    if name.bytes().all(|b| b.is_ascii_digit()) {
        d = d.with_help(format!("for node {name}, write it without quotes"));
    }
    d
}

/// `memory-reserve` must leave every node with memory some of it (reported once).
fn check_memory_reserve(config: &Config, topology: &Topology, out: &mut Vec<Diagnostic>) {
    let Some(reserve) = config.host.memory_reserve else { return };
    for node in &topology.nodes {
        match node.memory_bytes {
            Some(total) if node.has_memory && total > 0 && reserve >= total => {
                out.push(config.diagnostic_at(
                    config.spans.host.memory_reserve.as_ref(),
                    Severity::Error,
                    format!(
                        "`memory-reserve` of {} leaves node {} no memory: it has {}",
                        format_size(reserve),
                        node.id,
                        format_size(total)
                    ),
                ));
                break;
            }
            _ => {}
        }
    }
}

/// Reports `only-nodes` entries the host lacks, and returns the nodes the service may use.
fn check_only_nodes(
    config: &Config,
    topology: &Topology,
    service: &Service,
    spans: Option<&ServiceSpans>,
    out: &mut Vec<Diagnostic>,
) -> NodeSet {
    let node_ids = topology.node_ids();
    let Some(only) = &service.only_nodes else { return node_ids };
    // One diagnostic per place in the file: a list string ("6-9") names several.
    let mut missing: Vec<(Option<&Span>, NodeSet)> = Vec::new();
    for node in only.iter().filter(|n| !node_ids.contains(*n)) {
        let span =
            spans.and_then(|s| s.only_nodes.iter().find(|(n, _)| *n == node)).map(|(_, s)| s);
        match missing.iter_mut().find(|(s, _)| *s == span) {
            Some((_, set)) => {
                set.insert(node);
            }
            None => missing.push((span, NodeSet::from_iter([node]))),
        }
    }
    for (span, set) in missing {
        out.push(
            config
                .diagnostic_at(
                    span,
                    Severity::Error,
                    format!(
                        "service `{}`: `only-nodes` names node{} {set}, which this host does not have",
                        service.name,
                        plural(set.len())
                    ),
                )
                .with_note(format!("nodes: {}", list_or_none(&node_ids))),
        );
    }
    node_ids.intersection(only)
}

/// `nodes = N` and `cpus = N` must fit in what `candidates` offer.
fn check_size(
    config: &Config,
    topology: &Topology,
    service: &Service,
    spans: Option<&ServiceSpans>,
    candidates: &NodeSet,
    out: &mut Vec<Diagnostic>,
) {
    let size_span = spans.and_then(|s| s.size.as_ref());
    let where_ = if service.only_nodes.is_some() { " among its `only-nodes`" } else { "" };
    match service.size {
        InstanceSize::Nodes(n) => {
            let with_cpus: NodeSet = candidates
                .iter()
                .filter(|id| topology.node(*id).is_some_and(|node| !node.cpus.is_empty()))
                .collect();
            if n as usize > with_cpus.len() {
                out.push(config.diagnostic_at(
                    size_span,
                    Severity::Error,
                    format!(
                        "service `{}` needs {n} whole node{} per instance; this host has {} node{} with CPUs{where_}",
                        service.name,
                        plural(n as usize),
                        with_cpus.len(),
                        plural(with_cpus.len()),
                    ),
                ));
            }
        }
        InstanceSize::Cpus(n) => {
            let reserved = &config.host.reserve_cpus;
            let usable = topology
                .cpus_of(candidates)
                .intersection(&topology.online_cpus())
                .difference(reserved);
            if n as usize > usable.len() {
                let mut d = config.diagnostic_at(
                    size_span,
                    Severity::Error,
                    format!(
                        "service `{}` needs {n} CPU{} per instance; this host has {} usable CPU{}{where_}",
                        service.name,
                        plural(n as usize),
                        usable.len(),
                        plural(usable.len()),
                    ),
                );
                if !reserved.is_empty() {
                    d = d.with_note(format!("not counting `reserve-cpus` {reserved}"));
                }
                out.push(d);
            }
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn list_or_none<K: IdKind>(set: &IdSet<K>) -> String {
    if set.is_empty() { "none".to_string() } else { set.to_string() }
}
