//! The one route from a service file to its plan: [`ServiceFile`] is the file read, validated,
//! checked against a topology and given what the planner needs besides them (each `near`
//! entry resolved to devices, the NICs of the default route); its [`ServiceFile::plan`] is the
//! plan. `pinctl plan`, `check`, `watch`, `run` (and its reloads) and `exec -c` all come
//! through here, so they always agree. Also `--near`.

use std::path::Path;

use pinctl_config::{Config, Diagnostic, KeepFree, Severity};
use std::collections::BTreeMap;

use pinctl_plan::{Plan, PlanInputs};
use pinctl_sysfs::{DeviceScope, LoadedTopology, default_route_interfaces};
use pinctl_topology::Placement;
use pinctl_topology::{CpuSet, NodeSet};

use crate::error::LaunchError;

/// The live machine's topology (the planner's view of it).
pub fn live_topology() -> Result<LoadedTopology, LaunchError> {
    LoadedTopology::live().map_err(|e| LaunchError::Topology(Box::new(e)))
}

/// A service file on a topology, ready to plan, with what checking one against the other
/// found (warnings only: errors make [`ServiceFile::check`] fail with the rendered report).
#[derive(Debug)]
pub struct ServiceFile {
    /// The validated file.
    pub config: Config,
    /// The topology it is planned on.
    pub loaded: LoadedTopology,
    /// `near` entries resolved to devices, the default route's NICs, strictness.
    pub inputs: PlanInputs,
    /// Parse warnings, machine checks and `near` entries that resolve to nothing.
    pub diagnostics: Vec<Diagnostic>,
}

impl ServiceFile {
    /// Reads and validates the service file at `path`, then [`ServiceFile::check`]s it against
    /// `loaded`.
    pub fn load(path: &Path, loaded: LoadedTopology, strict: bool) -> Result<Self, LaunchError> {
        ServiceFile::check(load_config(path)?, loaded, strict)
    }

    /// Checks `config` against `loaded` and resolves what the planner needs besides them:
    /// `near` entries to devices (one that names nothing is an error on the live machine and
    /// under `strict`, a warning on another host's topology, said here once with its place in
    /// the file) and, when the file sets no `keep-free`, the default route's NICs.
    pub fn check(
        config: Config,
        loaded: LoadedTopology,
        strict: bool,
    ) -> Result<Self, LaunchError> {
        let mut diagnostics = config.warnings.clone();
        diagnostics.extend(pinctl_config::check_against(&config, &loaded.topology));
        let mut inputs = PlanInputs { strict, ..PlanInputs::default() };
        resolve_near_entries(&config, &loaded, strict, &mut inputs, &mut diagnostics);
        crate::policies::unsupported_policies(&config, &loaded, &mut diagnostics);
        if config.host.keep_free.is_none() {
            inputs.default_keep_free = default_keep_free(&config, &loaded, &mut diagnostics)?;
        }
        if diagnostics.iter().any(Diagnostic::is_error) {
            let report = pinctl_config::render_all(&diagnostics, Some(&config.path), false);
            return Err(LaunchError::Rejected { report });
        }
        Ok(ServiceFile { config, loaded, inputs, diagnostics })
    }

    /// The plan of the file.
    pub fn plan(&self) -> Result<Plan, LaunchError> {
        self.plan_keeping(&BTreeMap::new())
    }

    /// The plan of the file, keeping the instances in `current` where they run when it can
    /// (a supervisor's reload; docs/supervisor.md, "Sticky").
    pub fn plan_keeping(&self, current: &BTreeMap<String, Placement>) -> Result<Plan, LaunchError> {
        let inputs = PlanInputs { current: current.clone(), ..self.inputs.clone() };
        pinctl_plan::plan(&self.loaded.topology, &self.config, &inputs).map_err(|source| {
            LaunchError::Plan { path: self.config.path.clone(), source: Box::new(source) }
        })
    }
}

fn resolve_near_entries(
    config: &Config,
    loaded: &LoadedTopology,
    strict: bool,
    inputs: &mut PlanInputs,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for service in &config.services {
        let spans = config.service_spans(&service.name);
        // One diagnostic per `near` entry of a service, not one per instance: the entry fails
        // the same way for each (its `{instance}` aside), and each diagnostic holds the line
        // it points at; 145 entries in 8192 instances were 1.2 million of them (12 GB).
        let mut said: Vec<Option<(usize, usize)>> = Vec::new();
        for instance in &service.instances {
            for (k, spec) in instance.near.iter().enumerate() {
                if inputs.near.contains_key(spec) {
                    continue;
                }
                if said.len() <= k {
                    said.resize(k + 1, None);
                }
                let devices = pinctl_sysfs::resolve_near(loaded, spec).unwrap_or_else(|e| {
                    // --strict refuses what a plan elsewhere would only warn about: a service
                    // file whose `near` names nothing on the topology it is checked against.
                    let (severity, what) = if loaded.is_live {
                        (Severity::Error, "")
                    } else if strict {
                        (Severity::Error, " (refused under --strict)")
                    } else {
                        (Severity::Warning, ": placed without it")
                    };
                    match &mut said[k] {
                        Some((_, more)) => *more += 1,
                        None => {
                            let span = spans.and_then(|s| s.near.get(k));
                            said[k] = Some((diagnostics.len(), 0));
                            diagnostics.push(config.diagnostic_at(
                                span,
                                severity,
                                format!("{}: near {e}{what}", instance.name),
                            ));
                        }
                    }
                    inputs.reported_near.insert(spec.clone());
                    Vec::new()
                });
                inputs.near.insert(spec.clone(), devices);
            }
        }
        for (at, more) in said.into_iter().flatten().filter(|(_, more)| *more > 0) {
            diagnostics[at].notes.push(format!(
                "the same for {more} more instance{} of `{}`",
                if more == 1 { "" } else { "s" },
                service.name
            ));
        }
    }
}

/// The NICs of the default route, the nodes the planner keeps free when the file says nothing.
fn default_keep_free(
    config: &Config,
    loaded: &LoadedTopology,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<String>, LaunchError> {
    let Some(root) = &loaded.fs_root else {
        diagnostics.push(config.diagnostic_at(
            None,
            Severity::Warning,
            format!(
                "`keep-free` is not set and {} has no routing table to find the default route's \
                 NIC: no node is kept free (set `keep-free` to choose)",
                loaded.source
            ),
        ));
        return Ok(Vec::new());
    };
    match default_route_interfaces(root) {
        Ok(nics) => Ok(nics),
        Err(e) if loaded.is_live => Err(LaunchError::DefaultRoute(Box::new(e))),
        Err(e) => {
            diagnostics.push(config.diagnostic_at(
                None,
                Severity::Warning,
                format!("`keep-free` is not set and {e}: no node is kept free"),
            ));
            Ok(Vec::new())
        }
    }
}

/// Loads and validates a service file.
pub fn load_config(path: &Path) -> Result<Config, LaunchError> {
    let config = pinctl_trust::read_regular(path, pinctl_config::MAX_CONFIG_BYTES)
        .map_err(|e| pinctl_config::ConfigError::io(path, e))
        .and_then(|bytes| pinctl_config::from_bytes(path, &bytes));
    config.map_err(|e| LaunchError::Config(Box::new(e)))
}

/// One instance's planned placement, and the CPUs of the cpuset the plan was computed
/// against (the topology's allowed CPUs).
#[derive(Debug, Clone)]
pub struct PlannedPlacement {
    /// Where the plan puts the instance.
    pub placement: Placement,
    /// The cpuset the plan saw.
    pub cpuset: Option<CpuSet>,
    /// Why the placement depends on what else runs now: the plan's word on the processes
    /// pinned outside pinctl it planned around (or could not), which a unit's start says.
    pub pinned_note: Option<String>,
}

/// The devices a plan of `config` on the machine at `root` depends on: those `near` entries
/// name (any kind), those `keep-free` names, and, when the file sets no `keep-free`, the
/// default route's NICs (read here from `root`'s routing table; all network devices when it
/// cannot be read, and `prepare` then says why). The plan on a topology read with only these
/// is the plan on the whole one (tested on every fixture tree and captured machine).
pub fn devices_needed(config: &Config, root: &Path) -> DeviceScope {
    let route = default_route_if_unset(config, root);
    scope_of(config, named_by_file(config, root).as_deref(), route.as_ref())
}

/// The default route's NICs when the file sets no `keep-free` (the planner keeps their nodes
/// free), read from `root`'s routing table; `None` when `keep-free` is set.
pub fn default_route_if_unset(
    config: &Config,
    root: &Path,
) -> Option<Result<Vec<String>, pinctl_sysfs::DiscoveryError>> {
    config.host.keep_free.is_none().then(|| default_route_interfaces(root))
}

/// [`devices_needed`], given what [`named_by_file`] and [`default_route_if_unset`] found.
fn scope_of(
    config: &Config,
    named: Option<&[String]>,
    route: Option<&Result<Vec<String>, pinctl_sysfs::DiscoveryError>>,
) -> DeviceScope {
    let Some(named) = named else { return DeviceScope::All };
    let mut named = named.to_vec();
    match (&config.host.keep_free, route) {
        (Some(_), _) if named.is_empty() => DeviceScope::None,
        (Some(_), _) => DeviceScope::Named(named),
        (None, Some(Ok(nics))) => {
            named.extend(nics.iter().cloned());
            DeviceScope::Named(named)
        }
        // The routing table unreadable (`prepare` says why) or not read: every network
        // device, or every device when `near` names some.
        (None, _) if named.is_empty() => DeviceScope::Network,
        (None, _) => DeviceScope::All,
    }
}

/// The devices the file names, in `near` and `keep-free`, when each is an entry of
/// sys/class/net or sys/class/block under `root` (a path in `near`, on the live machine: the
/// block device it lives on); `None` when some other name needs every device to resolve it,
/// or to say what it is not: an alias such as `nvidia0`, a PCI address, a path in a tree, a
/// device of another class, no device at all.
fn named_by_file(config: &Config, root: &Path) -> Option<Vec<String>> {
    let live = root == Path::new("/");
    let mut named = Vec::new();
    for entry in config.services.iter().flat_map(|s| &s.instances).flat_map(|i| &i.near) {
        if pinctl_sysfs::is_path(entry) {
            if !live {
                return None;
            }
            named.push(pinctl_sysfs::path_device(root, entry).ok()?);
        } else {
            named.push(entry.clone());
        }
    }
    if let Some(list) = &config.host.keep_free {
        named.extend(list.iter().filter_map(|k| match k {
            KeepFree::Nic(name) => Some(name.clone()),
            KeepFree::Node(_) => None,
        }));
    }
    named.iter().all(|n| is_named_device(root, n)).then_some(named)
}

/// The topology a plan of `config` on the machine at `root` needs, read by `read`: with the
/// devices [`devices_needed`] says, and again with every device when one that the file names
/// turns out to be no device (a memberless virtual device such as `lo`, or a partition, has an
/// entry in its class folder): the error that follows lists the host's devices. `route` is
/// what [`default_route_if_unset`] read. Returns the scope read last and its topology.
pub fn read_needed<E>(
    config: &Config,
    root: &Path,
    route: Option<&Result<Vec<String>, pinctl_sysfs::DiscoveryError>>,
    mut read: impl FnMut(&DeviceScope) -> Result<LoadedTopology, E>,
) -> Result<(DeviceScope, LoadedTopology), E> {
    let named = named_by_file(config, root);
    let scope = scope_of(config, named.as_deref(), route);
    let loaded = read(&scope)?;
    let missing = matches!(scope, DeviceScope::Named(_))
        && named.is_some_and(|n| n.iter().any(|d| loaded.topology.device(d).is_none()));
    if missing {
        return Ok((DeviceScope::All, read(&DeviceScope::All)?));
    }
    Ok((scope, loaded))
}

/// Whether `root` has a network or block device called `name` (an entry of sys/class/net or
/// sys/class/block).
fn is_named_device(root: &Path, name: &str) -> bool {
    pinctl_sysfs::fsroot::is_entry_name(name)
        && ["sys/class/net", "sys/class/block"]
            .iter()
            .any(|class| root.join(class).join(name).symlink_metadata().is_ok())
}

/// `--near DEVICE|PATH`: the nodes of the device(s) it names, resolved as the planner resolves
/// `near` entries (device names, `/dev` nodes, paths on filesystems; stacked devices and
/// multipath namespaces through their members).
pub fn near_nodes(spec: &str) -> Result<NodeSet, LaunchError> {
    near_nodes_on(&live_topology()?, spec)
}

/// [`near_nodes`] on a given topology (a capture in tests).
pub fn near_nodes_on(loaded: &LoadedTopology, spec: &str) -> Result<NodeSet, LaunchError> {
    let devices = pinctl_sysfs::resolve_near(loaded, spec).map_err(|source| {
        LaunchError::NearOption { spec: spec.to_string(), source: Box::new(source) }
    })?;
    let mut nodes = NodeSet::new();
    for name in &devices {
        if let Some(d) = loaded.topology.device(name) {
            nodes = nodes.union(&d.nodes);
        }
    }
    if nodes.is_empty() {
        return Err(LaunchError::NearWithoutNode {
            spec: spec.to_string(),
            devices: devices.join(", "),
        });
    }
    Ok(nodes)
}
