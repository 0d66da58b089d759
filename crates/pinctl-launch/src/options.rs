//! `pinctl exec`'s placement options, numactl's among them, and the one [`Request`] they
//! state: at most one source of nodes (`--nodes`, `--near`, `-c FILE --service NAME`), one of
//! CPUs and one memory policy, contradictions refused with the options named. Plain data the
//! binary's command line fills (with the `clap` feature, the same structs are its arguments).

use std::path::PathBuf;

use pinctl_topology::{CpuSet, MemoryPolicy};

use crate::spec::{CpuSpec, NodeSpec};
use crate::{CpuTarget, LaunchError, Nodes, Request};

/// Why options state no request.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// The options contradict each other or a list does not parse (a usage error).
    #[error("{0}")]
    Usage(String),
    /// `--near` or `-c FILE --service NAME` could not be resolved.
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// Where to run and where memory goes, as `pinctl exec` states it.
#[derive(Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PlacementOptions {
    /// Run on the CPUs of these nodes and allocate memory there (policy bind unless --mem
    /// says otherwise).
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST"))]
    pub nodes: Option<String>,
    /// Run on these CPUs (overrides the CPUs of --nodes).
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST"))]
    pub cpus: Option<String>,
    /// Memory policy: default, bind, preferred, preferred-many, interleave,
    /// weighted-interleave, local.
    #[cfg_attr(feature = "clap", arg(long, value_name = "POLICY"))]
    pub mem: Option<MemoryPolicy>,
    /// Nodes of the memory policy, when memory goes elsewhere than --nodes.
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST"))]
    pub mem_nodes: Option<String>,
    /// Run on the node(s) of a device (eth0, nvme0n1, /dev/sdb, 0000:3b:00.0) or of the
    /// block device holding a path.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DEVICE|PATH"))]
    pub near: Option<String>,
    /// Service file whose plan gives the placement (with --service).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'c', long = "config", value_name = "FILE", requires = "service")
    )]
    pub config: Option<PathBuf>,
    /// Service instance to place as the plan places it (with -c).
    #[cfg_attr(feature = "clap", arg(long, value_name = "NAME", requires = "config"))]
    pub service: Option<String>,
}

/// numactl's own options, accepted by `pinctl exec` so `ExecStart=numactl ...` lines keep
/// working with `numactl` replaced by `pinctl exec`.
#[derive(Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct NumactlOptions {
    /// numactl: memory only from these nodes (bind).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'm', long, value_name = "NODES", help_heading = "numactl options")
    )]
    pub membind: Option<String>,
    /// numactl: run on the CPUs of these nodes.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'N', long, value_name = "NODES", help_heading = "numactl options")
    )]
    pub cpunodebind: Option<String>,
    /// numactl: run on these CPUs.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'C', long, value_name = "CPUS", help_heading = "numactl options")
    )]
    pub physcpubind: Option<String>,
    /// numactl: prefer memory from this node.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'p', long, value_name = "NODE", help_heading = "numactl options")
    )]
    pub preferred: Option<String>,
    /// numactl: prefer memory from these nodes (Linux 5.15+).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'P', long, value_name = "NODES", help_heading = "numactl options")
    )]
    pub preferred_many: Option<String>,
    /// numactl: interleave memory over these nodes.
    #[cfg_attr(
        feature = "clap",
        arg(short = 'i', long, value_name = "NODES", help_heading = "numactl options")
    )]
    pub interleave: Option<String>,
    /// numactl: weighted interleave over these nodes (Linux 6.9+).
    #[cfg_attr(
        feature = "clap",
        arg(short = 'w', long, value_name = "NODES", help_heading = "numactl options")
    )]
    pub weighted_interleave: Option<String>,
    /// numactl: allocate on the node of the CPU that faults.
    #[cfg_attr(feature = "clap", arg(short = 'l', long, help_heading = "numactl options"))]
    pub localalloc: bool,
    /// numactl: let NUMA balancing migrate pages within the bind set (Linux 5.12+).
    #[cfg_attr(feature = "clap", arg(short = 'b', long, help_heading = "numactl options"))]
    pub balancing: bool,
    /// numactl: read lists against every possible node/CPU, not this process's cpuset.
    #[cfg_attr(feature = "clap", arg(short = 'a', long, help_heading = "numactl options"))]
    pub all: bool,
}

fn node_spec(text: &str) -> Result<Nodes, OptionsError> {
    let spec = NodeSpec::parse(text).map_err(|e| OptionsError::Usage(e.to_string()))?;
    Ok(Nodes::Spec(spec))
}

fn usage(message: &str) -> OptionsError {
    OptionsError::Usage(message.to_string())
}

/// The nodes `--nodes`, `--near` or `-c FILE --service NAME` stand for, with what a plan adds.
struct Home {
    nodes: Option<Nodes>,
    /// The plan's policy; bind for the others.
    policy: MemoryPolicy,
    /// The plan's CPUs.
    cpus: Option<CpuSet>,
    /// The cpuset the plan was computed against.
    planned_cpuset: Option<CpuSet>,
    /// The plan's word on processes pinned outside pinctl.
    pinned_note: Option<String>,
}

impl PlacementOptions {
    /// The request these options and numactl's state, refusing contradictions; the plan of
    /// `-c FILE --service NAME` is made with the files of the host's running supervisors,
    /// which `running_files` lists (asked only then).
    pub fn request(
        &self,
        numactl: &NumactlOptions,
        running_files: impl FnOnce() -> Vec<PathBuf>,
    ) -> Result<Request, OptionsError> {
        let numactl_memory = self.numactl_memory(numactl)?;
        let home = self.home(running_files)?;
        let cpus = self.cpus(numactl, &home)?;
        let memory = match numactl_memory {
            Some(memory) => {
                if self.mem_nodes.as_deref().map(node_spec).transpose()?.is_some() {
                    return Err(usage(
                        "--mem-nodes goes with --mem, not with numactl's policy options",
                    ));
                }
                Some(memory)
            }
            None => self.memory(&home)?,
        };
        if numactl.balancing && !matches!(memory, Some((MemoryPolicy::Bind, _))) {
            return Err(usage(
                "--balancing applies to the bind policy only (--membind or --mem bind)",
            ));
        }
        let (all, balancing, planned_cpuset, pinned_note) =
            (numactl.all, numactl.balancing, home.planned_cpuset, home.pinned_note);
        Ok(Request { all, cpus, memory, balancing, planned_cpuset, pinned_note })
    }

    /// The memory policy of numactl's options, refusing two sources of one (`--mem` included).
    fn numactl_memory(
        &self,
        numactl: &NumactlOptions,
    ) -> Result<Option<(MemoryPolicy, Option<Nodes>)>, OptionsError> {
        let numactl_policies = [
            (&numactl.membind, MemoryPolicy::Bind, "--membind"),
            (&numactl.preferred, MemoryPolicy::Preferred, "--preferred"),
            (&numactl.preferred_many, MemoryPolicy::PreferredMany, "--preferred-many"),
            (&numactl.interleave, MemoryPolicy::Interleave, "--interleave"),
            (
                &numactl.weighted_interleave,
                MemoryPolicy::WeightedInterleave,
                "--weighted-interleave",
            ),
        ];
        let mut given: Vec<&str> =
            numactl_policies.iter().filter(|(v, ..)| v.is_some()).map(|(.., n)| *n).collect();
        if numactl.localalloc {
            given.push("--localalloc");
        }
        if self.mem.is_some() {
            given.push("--mem");
        }
        if given.len() > 1 {
            let given = given.join(", ");
            return Err(OptionsError::Usage(format!("conflicting memory policies: {given}")));
        }
        if let Some((v, p, _)) = numactl_policies.iter().find(|(v, ..)| v.is_some()) {
            return Ok(Some((*p, Some(node_spec(v.as_deref().unwrap_or_default())?))));
        }
        Ok(numactl.localalloc.then_some((MemoryPolicy::Local, None)))
    }

    /// The nodes that `--nodes`, `--near` or `--service` stand for (one of them at most).
    fn home(&self, running_files: impl FnOnce() -> Vec<PathBuf>) -> Result<Home, OptionsError> {
        let sources = [self.nodes.is_some(), self.near.is_some(), self.service.is_some()];
        if sources.iter().filter(|&&b| b).count() > 1 {
            return Err(usage("--nodes, --near and --service each choose the nodes: give one"));
        }
        let mut home = Home {
            nodes: None,
            policy: MemoryPolicy::Bind,
            cpus: None,
            planned_cpuset: None,
            pinned_note: None,
        };
        if let Some(n) = &self.nodes {
            home.nodes = Some(node_spec(n)?);
        } else if let Some(near) = &self.near {
            home.nodes = Some(Nodes::Set(crate::near_nodes(near)?));
        } else if let (Some(config), Some(service)) = (&self.config, &self.service) {
            let planned = crate::planned_placement(config, service, &running_files())?;
            home.planned_cpuset = planned.cpuset;
            home.pinned_note = planned.pinned_note;
            home.policy = planned.placement.memory_policy;
            home.cpus = Some(planned.placement.cpus);
            home.nodes = Some(Nodes::Set(planned.placement.memory_nodes));
        }
        Ok(home)
    }

    /// The CPUs: `--cpus` or `-C`, else `-N`, else the home's.
    fn cpus(
        &self,
        numactl: &NumactlOptions,
        home: &Home,
    ) -> Result<Option<CpuTarget>, OptionsError> {
        if self.cpus.is_some() && numactl.physcpubind.is_some() {
            return Err(usage("--cpus and --physcpubind both set the CPUs: give one"));
        }
        Ok(if let Some(c) = self.cpus.as_ref().or(numactl.physcpubind.as_ref()) {
            let cpus = CpuSpec::parse(c).map_err(|e| OptionsError::Usage(e.to_string()))?;
            Some(CpuTarget::Cpus(cpus))
        } else if let Some(n) = &numactl.cpunodebind {
            Some(CpuTarget::Nodes(node_spec(n)?))
        } else if let Some(cpus) = &home.cpus {
            Some(CpuTarget::Set(cpus.clone()))
        } else {
            home.nodes.clone().map(CpuTarget::Nodes)
        })
    }

    /// The memory policy of `--mem` and `--mem-nodes`, else the home's, when numactl's options
    /// gave none.
    fn memory(&self, home: &Home) -> Result<Option<(MemoryPolicy, Option<Nodes>)>, OptionsError> {
        let mem_nodes = match &self.mem_nodes {
            Some(m) => Some(node_spec(m)?),
            None => home.nodes.clone(),
        };
        match (self.mem, mem_nodes) {
            (Some(p), _) if !p.takes_nodes() => Ok(Some((p, None))),
            (Some(p), Some(n)) => Ok(Some((p, Some(n)))),
            (Some(p), None) => Err(OptionsError::Usage(format!(
                "--mem {p} needs nodes: add --mem-nodes, --nodes, --near or --service"
            ))),
            (None, Some(n)) => Ok(Some((home.policy, Some(n)))),
            (None, None) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage_of(placement: &PlacementOptions, numactl: &NumactlOptions) -> String {
        match placement.request(numactl, Vec::new) {
            Err(OptionsError::Usage(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn a_policy_without_nodes_is_refused_with_where_to_get_them() {
        let placement = PlacementOptions { mem: Some(MemoryPolicy::Bind), ..Default::default() };
        let message = usage_of(&placement, &NumactlOptions::default());
        assert!(message.contains("--mem bind needs nodes"), "{message}");
    }

    #[test]
    fn mem_nodes_do_not_go_with_numactls_policies() {
        let placement = PlacementOptions { mem_nodes: Some("0".into()), ..Default::default() };
        let numactl = NumactlOptions { membind: Some("0".into()), ..Default::default() };
        assert!(usage_of(&placement, &numactl).contains("--mem-nodes goes with --mem"));
    }

    #[test]
    fn the_home_nodes_give_cpus_and_bound_memory_and_no_plan_is_asked_for() {
        let placement = PlacementOptions { nodes: Some("0".into()), ..Default::default() };
        let asked = std::cell::Cell::new(false);
        let running = || {
            asked.set(true);
            Vec::new()
        };
        let r = placement.request(&NumactlOptions::default(), running).unwrap();
        assert!(matches!(r.cpus, Some(CpuTarget::Nodes(_))));
        assert!(matches!(r.memory, Some((MemoryPolicy::Bind, Some(_)))));
        assert!(!asked.get(), "the running files are asked only for -c FILE --service NAME");
    }
}
