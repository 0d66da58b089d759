//! What steering needs from the service file and the plan, resolved against the topology
//! once per plan: each instance's CPUs and what it wants of the interrupts on them, the NICs
//! its `near` names, and the NICs the plan keeps a node free for.

use std::collections::BTreeMap;

use pinctl_config::{Config, KeepFree, ServiceInterrupts};
use pinctl_topology::{CpuSet, DeviceKind, Topology};

/// An instance's CPUs and what it wants of the interrupts on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub instance: String,
    pub service: String,
    pub cpus: CpuSet,
    pub mode: ServiceInterrupts,
    /// The NICs (with a PCI function of their own) its `near` names: their queues go on its
    /// CPUs when `mode` is `nic-queues`.
    pub nics: Vec<String>,
}

/// Everything one steering decision starts from besides the interrupts themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SteerInputs {
    /// Every planned instance (running or not: its CPUs are its own either way).
    pub owners: Vec<Owner>,
    /// The NICs the plan keeps a node free for (`keep-free`'s NICs, else the default route's),
    /// bonds, VLANs and bridges resolved to their members with a PCI function.
    pub kept_free_nics: Vec<String>,
}

/// The service file's interrupt settings resolved against a topology: what a running
/// supervisor keeps between plans (a reload makes new ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SteerSettings {
    /// `[host] steer-interrupts`.
    pub steer: bool,
    /// Each service's `interrupts`.
    pub modes: BTreeMap<String, ServiceInterrupts>,
    /// The NICs each instance's `near` names.
    pub near_nics: BTreeMap<String, Vec<String>>,
    pub kept_free_nics: Vec<String>,
}

impl SteerSettings {
    /// Of a service file read and checked on its topology.
    pub fn of_file(file: &pinctl_launch::ServiceFile) -> SteerSettings {
        SteerSettings::of(
            &file.config,
            &file.loaded.topology,
            &file.inputs.near,
            &file.inputs.default_keep_free,
        )
    }

    /// From the file, the topology, what each `near` entry resolved to (`PlanInputs::near`)
    /// and the default route's NICs (the keep-free default).
    pub fn of(
        config: &Config,
        topology: &Topology,
        near: &BTreeMap<String, Vec<String>>,
        default_keep_free: &[String],
    ) -> SteerSettings {
        let kept: Vec<String> = match &config.host.keep_free {
            None => default_keep_free.to_vec(),
            Some(entries) => entries
                .iter()
                .filter_map(|e| match e {
                    KeepFree::Nic(n) => Some(n.clone()),
                    KeepFree::Node(_) => None,
                })
                .collect(),
        };
        let mut kept_free_nics: Vec<String> =
            kept.iter().flat_map(|n| physical_nics(topology, n)).collect();
        kept_free_nics.sort();
        kept_free_nics.dedup();
        let mut near_nics = BTreeMap::new();
        for (_, instance) in config.instances() {
            let mut nics: Vec<String> = instance
                .near
                .iter()
                .flat_map(|entry| near.get(entry).into_iter().flatten())
                .flat_map(|device| physical_nics(topology, device))
                .collect();
            nics.sort();
            nics.dedup();
            if !nics.is_empty() {
                near_nics.insert(instance.name.clone(), nics);
            }
        }
        SteerSettings {
            steer: config.interrupts.steer,
            modes: config.interrupts.services.clone(),
            near_nics,
            kept_free_nics,
        }
    }

    /// The inputs of a decision for `plan`'s instances, each on its planned CPUs.
    pub fn of_plan(&self, plan: &pinctl_plan::Plan) -> SteerInputs {
        self.inputs(
            plan.placements
                .iter()
                .map(|p| (p.instance.as_str(), p.service.as_str(), &p.placement.cpus)),
        )
    }

    /// The inputs of a decision for these instances: (instance, service, CPUs) each.
    pub fn inputs<'a>(
        &self,
        instances: impl IntoIterator<Item = (&'a str, &'a str, &'a CpuSet)>,
    ) -> SteerInputs {
        let owners = instances
            .into_iter()
            .map(|(instance, service, cpus)| Owner {
                instance: instance.to_string(),
                service: service.to_string(),
                cpus: cpus.clone(),
                mode: self.modes.get(service).copied().unwrap_or_default(),
                nics: self.near_nics.get(instance).cloned().unwrap_or_default(),
            })
            .collect();
        SteerInputs { owners, kept_free_nics: self.kept_free_nics.clone() }
    }
}

/// The NICs with a PCI function of their own behind the interface `name`: itself, or the
/// members of a bond, VLAN or bridge, recursively (at most 8 levels: a VLAN on a bond on
/// NICs is 2).
pub fn physical_nics(topology: &Topology, name: &str) -> Vec<String> {
    fn walk(t: &Topology, name: &str, depth: u32, out: &mut Vec<String>) {
        let Some(d) = t.devices.iter().find(|d| d.name == name) else { return };
        if d.kind != DeviceKind::Nic || depth > 8 {
            return;
        }
        if d.pci.is_some() && d.members.is_empty() {
            out.push(d.name.clone());
        }
        for m in &d.members {
            walk(t, m, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    walk(topology, name, 0, &mut out);
    out.sort();
    out.dedup();
    out
}
