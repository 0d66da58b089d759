//! `-c FILE --service NAME` and `--near`: the placement the planner gives one instance on
//! this machine, computed from the same inputs `pinctl plan` uses (the live topology, each
//! `near` entry resolved to devices, the NICs of the default route).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use pinctl_config::Config;
use pinctl_plan::{Placement, PlanInputs};
use pinctl_sysfs::{LoadedTopology, TopologySource, default_route_interfaces, load_topology};
use pinctl_topology::{CpuSet, NodeSet};

use crate::exit::{Failed, Status};

/// The live machine's topology (the planner's view of it).
pub(crate) fn live_topology() -> Result<LoadedTopology, Failed> {
    load_topology(&TopologySource::Live)
        .context("cannot read this machine's topology")
        .map_err(Failed::from)
}

/// The inputs the planner needs besides topology and config, resolved on `loaded`.
pub(crate) fn plan_inputs(config: &Config, loaded: &LoadedTopology) -> Result<PlanInputs, Failed> {
    let mut near = BTreeMap::new();
    for (_, instance) in config.instances() {
        for spec in &instance.near {
            if near.contains_key(spec) {
                continue;
            }
            let devices = pinctl_sysfs::resolve_near(loaded, spec)
                .with_context(|| format!("`near` entry of instance `{}`", instance.name))?;
            near.insert(spec.clone(), devices);
        }
    }
    let root = loaded.fs_root.clone().unwrap_or_else(|| "/".into());
    // The planner only reads the default route's NICs when the file sets no `keep-free`.
    let default_keep_free = if loaded.is_live && config.host.keep_free.is_none() {
        default_route_interfaces(&root).context("cannot read the default route")?
    } else {
        Vec::new()
    };
    Ok(PlanInputs { near, default_keep_free, strict: false })
}

/// Loads the service file, printing its diagnostics the way `pinctl check` does on failure.
pub(crate) fn load_config(path: &Path) -> Result<Config, Failed> {
    pinctl_config::load(path).map_err(|e| {
        let _ = write!(std::io::stderr().lock(), "{}", e.render(false));
        Failed::reported(Status::Failure)
    })
}

/// The placement of instance `service` of `config_path`, and the CPUs of the cpuset the plan
/// was computed against (the topology's allowed CPUs).
pub(crate) fn placement(
    config_path: &Path,
    service: &str,
) -> Result<(Placement, Option<CpuSet>), Failed> {
    let config = load_config(config_path)?;
    let loaded = live_topology()?;
    let inputs = plan_inputs(&config, &loaded)?;
    let plan = pinctl_plan::plan(&loaded.topology, &config, &inputs)
        .with_context(|| format!("cannot place the services of `{}`", config_path.display()))?;
    let cpuset = loaded.topology.host.allowed_cpus.clone();
    match plan.placement(service) {
        Some(p) => Ok((p.clone(), cpuset)),
        None => {
            let names: Vec<&str> = plan.placements.iter().map(|p| p.instance.as_str()).collect();
            Err(Failed::new(
                Status::Failure,
                anyhow::anyhow!(
                    "`{}` has no instance `{service}` (instances: {})",
                    config_path.display(),
                    names.join(", ")
                ),
            ))
        }
    }
}

/// `--near DEVICE|PATH`: the nodes of the device(s) it names, resolved as the planner resolves
/// `near` entries (device names, `/dev` nodes, paths on filesystems; stacked devices and
/// multipath namespaces through their members).
pub(crate) fn near_nodes(spec: &str) -> Result<NodeSet, Failed> {
    let loaded = live_topology()?;
    let devices = pinctl_sysfs::resolve_near(&loaded, spec).map_err(|e| {
        Failed::new(Status::Usage, anyhow::Error::new(e).context(format!("--near `{spec}`")))
    })?;
    let mut nodes = NodeSet::new();
    for name in &devices {
        if let Some(d) = loaded.topology.device(name) {
            nodes = nodes.union(&d.nodes);
        }
    }
    if nodes.is_empty() {
        return Err(Failed::new(
            Status::Failure,
            anyhow::anyhow!(
                "--near `{spec}`: the firmware does not say which node {} is on (numa_node -1); \
                 name the nodes with --nodes",
                devices.join(", ")
            ),
        ));
    }
    Ok(nodes)
}
