//! `pinctl exec`: apply a placement to this process (CPU affinity, then memory policy, then
//! read both back) and exec a command. This is how a systemd unit replaces `numactl`, so it is
//! kept on a fast path: no async runtime, no hwloc, only the procfs/sysfs files the placement
//! needs. The options are parsed here; resolving and applying them is pinctl-launch's.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use pinctl_launch::spec::{CpuSpec, NodeSpec};
use pinctl_launch::{CpuTarget, Launch, Nodes, Request, Resolved};
use pinctl_sys::LinuxKernel;
use pinctl_sysfs::Host;
use pinctl_topology::MemoryPolicy;

use crate::error::{CmdResult, Error};

/// What to do when the kernel lacks a requested policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum IfUnsupported {
    /// Refuse to run the command (the default: a service must not run unpinned by surprise).
    Fail,
    /// Run the command without the unsupported policy or flag, with a warning.
    Ignore,
}

/// numactl's own options, accepted by `pinctl exec` so `ExecStart=numactl ...` lines keep
/// working with `numactl` replaced by `pinctl exec`.
#[derive(Debug, clap::Args)]
pub(crate) struct NumactlArgs {
    /// numactl: memory only from these nodes (bind).
    #[arg(short = 'm', long, value_name = "NODES", help_heading = "numactl options")]
    membind: Option<String>,
    /// numactl: run on the CPUs of these nodes.
    #[arg(short = 'N', long, value_name = "NODES", help_heading = "numactl options")]
    cpunodebind: Option<String>,
    /// numactl: run on these CPUs.
    #[arg(short = 'C', long, value_name = "CPUS", help_heading = "numactl options")]
    physcpubind: Option<String>,
    /// numactl: prefer memory from this node.
    #[arg(short = 'p', long, value_name = "NODE", help_heading = "numactl options")]
    preferred: Option<String>,
    /// numactl: prefer memory from these nodes (Linux 5.15+).
    #[arg(short = 'P', long, value_name = "NODES", help_heading = "numactl options")]
    preferred_many: Option<String>,
    /// numactl: interleave memory over these nodes.
    #[arg(short = 'i', long, value_name = "NODES", help_heading = "numactl options")]
    interleave: Option<String>,
    /// numactl: weighted interleave over these nodes (Linux 6.9+).
    #[arg(short = 'w', long, value_name = "NODES", help_heading = "numactl options")]
    weighted_interleave: Option<String>,
    /// numactl: allocate on the node of the CPU that faults.
    #[arg(short = 'l', long, help_heading = "numactl options")]
    localalloc: bool,
    /// numactl: let NUMA balancing migrate pages within the bind set (Linux 5.12+).
    #[arg(short = 'b', long, help_heading = "numactl options")]
    balancing: bool,
    /// numactl: read lists against every possible node/CPU, not this process's cpuset.
    #[arg(short = 'a', long, help_heading = "numactl options")]
    all: bool,
}

/// Arguments of `pinctl exec`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Node lists use numactl's grammar: 0-3,8  all  !1 (all but 1)  +0 \
                        (first allowed)  netdev:eth0  block:nvme0n1  file:/srv/db  pci:3b:00.0")]
pub(crate) struct ExecArgs {
    /// Run on the CPUs of these nodes and allocate memory there (policy bind unless --mem
    /// says otherwise).
    #[arg(long, value_name = "LIST")]
    nodes: Option<String>,
    /// Run on these CPUs (overrides the CPUs of --nodes).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Memory policy: default, bind, preferred, preferred-many, interleave,
    /// weighted-interleave, local.
    #[arg(long, value_name = "POLICY")]
    mem: Option<MemoryPolicy>,
    /// Nodes of the memory policy, when memory goes elsewhere than --nodes.
    #[arg(long, value_name = "LIST")]
    mem_nodes: Option<String>,
    /// Run on the node(s) of a device (eth0, nvme0n1, /dev/sdb, 0000:3b:00.0) or of the
    /// block device holding a path.
    #[arg(long, value_name = "DEVICE|PATH")]
    near: Option<String>,
    /// Service file whose plan gives the placement (with --service).
    #[arg(short = 'c', long = "config", value_name = "FILE", requires = "service")]
    config: Option<std::path::PathBuf>,
    /// Service instance to place as the plan places it (with -c).
    #[arg(long, value_name = "NAME", requires = "config")]
    service: Option<String>,
    /// Print the resolved placement and exit without running anything.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: print JSON.
    #[arg(long, requires = "dry_run")]
    json: bool,
    /// What to do when the kernel lacks the requested policy.
    #[arg(long, value_enum, value_name = "WHAT", default_value = "fail")]
    if_unsupported: IfUnsupported,

    #[command(flatten)]
    numactl: Box<NumactlArgs>,

    /// The command and its arguments. An option before the command is pinctl's (an unknown
    /// one is a usage error with a suggestion); after `--` or the command's name everything
    /// is the command's.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

fn usage(msg: impl std::fmt::Display) -> Error {
    Error::usage(msg)
}

fn node_spec(text: &str) -> Result<Nodes, Error> {
    Ok(Nodes::Spec(NodeSpec::parse(text).map_err(usage)?))
}

impl ExecArgs {
    /// The request the options state, refusing contradictions.
    fn request(&self) -> Result<Request, Error> {
        let mut req = Request {
            all: self.numactl.all,
            balancing: self.numactl.balancing,
            ..Default::default()
        };

        // Memory policy: at most one source.
        let numactl_policies = [
            (&self.numactl.membind, MemoryPolicy::Bind, "--membind"),
            (&self.numactl.preferred, MemoryPolicy::Preferred, "--preferred"),
            (&self.numactl.preferred_many, MemoryPolicy::PreferredMany, "--preferred-many"),
            (&self.numactl.interleave, MemoryPolicy::Interleave, "--interleave"),
            (
                &self.numactl.weighted_interleave,
                MemoryPolicy::WeightedInterleave,
                "--weighted-interleave",
            ),
        ];
        let mut given: Vec<&str> =
            numactl_policies.iter().filter(|(v, ..)| v.is_some()).map(|(.., n)| *n).collect();
        if self.numactl.localalloc {
            given.push("--localalloc");
        }
        if self.mem.is_some() {
            given.push("--mem");
        }
        if given.len() > 1 {
            return Err(usage(format!("conflicting memory policies: {}", given.join(", "))));
        }
        if let Some((v, p, _)) = numactl_policies.iter().find(|(v, ..)| v.is_some()) {
            req.memory = Some((*p, Some(node_spec(v.as_deref().unwrap_or_default())?)));
        } else if self.numactl.localalloc {
            req.memory = Some((MemoryPolicy::Local, None));
        }

        // The nodes that --nodes/--near/--service stand for.
        let sources = [self.nodes.is_some(), self.near.is_some(), self.service.is_some()];
        if sources.iter().filter(|&&b| b).count() > 1 {
            return Err(usage("--nodes, --near and --service each choose the nodes: give one"));
        }
        let mut home: Option<Nodes> = None;
        let mut home_policy = MemoryPolicy::Bind;
        let mut home_cpus = None;
        if let Some(n) = &self.nodes {
            home = Some(node_spec(n)?);
        } else if let Some(near) = &self.near {
            home = Some(Nodes::Set(pinctl_launch::near_nodes(near)?));
        } else if let (Some(config), Some(service)) = (&self.config, &self.service) {
            let running = super::host::running_files();
            let planned = pinctl_launch::planned_placement(config, service, &running)?;
            req.planned_cpuset = planned.cpuset;
            home_policy = planned.placement.memory_policy;
            home_cpus = Some(planned.placement.cpus);
            home = Some(Nodes::Set(planned.placement.memory_nodes));
        }

        // CPUs: --cpus / -C, else -N, else the home nodes.
        if self.cpus.is_some() && self.numactl.physcpubind.is_some() {
            return Err(usage("--cpus and --physcpubind both set the CPUs: give one"));
        }
        if let Some(c) = self.cpus.as_ref().or(self.numactl.physcpubind.as_ref()) {
            req.cpus = Some(CpuTarget::Cpus(CpuSpec::parse(c).map_err(usage)?));
        } else if let Some(n) = &self.numactl.cpunodebind {
            req.cpus = Some(CpuTarget::Nodes(node_spec(n)?));
        } else if let Some(cpus) = home_cpus {
            req.cpus = Some(CpuTarget::Set(cpus));
        } else if let Some(h) = &home {
            req.cpus = Some(CpuTarget::Nodes(h.clone()));
        }

        // Memory from --mem/--mem-nodes/home when no numactl policy option gave it.
        let mem_nodes = match &self.mem_nodes {
            Some(m) => Some(node_spec(m)?),
            None => home.clone(),
        };
        if req.memory.is_none() {
            match (self.mem, mem_nodes) {
                (Some(p), _) if !p.takes_nodes() => req.memory = Some((p, None)),
                (Some(p), Some(n)) => req.memory = Some((p, Some(n))),
                (Some(p), None) => {
                    return Err(usage(format!(
                        "--mem {p} needs nodes: add --mem-nodes, --nodes, --near or --service"
                    )));
                }
                (None, Some(n)) => req.memory = Some((home_policy, Some(n))),
                (None, None) => {}
            }
        } else if self.mem_nodes.is_some() {
            return Err(usage("--mem-nodes goes with --mem, not with numactl's policy options"));
        }
        if self.numactl.balancing && !matches!(req.memory, Some((MemoryPolicy::Bind, _))) {
            return Err(usage(
                "--balancing applies to the bind policy only (--membind or --mem bind)",
            ));
        }
        Ok(req)
    }
}

pub(crate) fn run(args: ExecArgs) -> CmdResult {
    let request = args.request()?;
    if args.command.is_empty() && !args.dry_run {
        return Err(usage("no command given: pinctl exec [OPTIONS] -- COMMAND [ARGS...]"));
    }
    let mut host = Host::live();
    let allowed = request.allowed(host.allowed().map_err(pinctl_launch::LaunchError::Allowed)?);
    let resolved =
        request.resolve(&mut host, &allowed).map_err(pinctl_launch::LaunchError::from)?;
    resolved.check().map_err(pinctl_launch::LaunchError::from)?;
    if args.dry_run {
        print_dry_run(&resolved, &args.command, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let launch =
        Launch { verify: true, ignore_unsupported: args.if_unsupported == IfUnsupported::Ignore };
    let kernel = LinuxKernel;
    let prepared =
        pinctl_launch::setup(&kernel, &resolved, &allowed, launch, || host.kernel_release())?;
    let warnings = pinctl_launch::apply_to_self(&kernel, prepared, &resolved, &allowed, launch)?;
    crate::error::warn_all(&warnings);
    Err(pinctl_launch::exec(&args.command, args.service.as_deref()).into())
}

fn print_dry_run(resolved: &Resolved, command: &[OsString], json: bool) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    let command: Vec<String> = command.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    if json {
        #[derive(serde::Serialize)]
        struct DryRun<'a> {
            #[serde(flatten)]
            placement: &'a Resolved,
            command: &'a [String],
        }
        serde_json::to_writer_pretty(&mut out, &DryRun { placement: resolved, command: &command })
            .map_err(anyhow::Error::from)?;
        writeln!(out).map_err(anyhow::Error::from)?;
    } else {
        let or = |s: Option<String>, d: &str| s.unwrap_or_else(|| d.to_string());
        writeln!(out, "cpus: {}", or(resolved.cpus.as_ref().map(|c| c.to_string()), "inherited"))
            .and_then(|()| {
                writeln!(
                    out,
                    "memory policy: {}",
                    or(resolved.memory_policy.map(|p| p.name().to_string()), "inherited")
                )
            })
            .and_then(|()| {
                writeln!(
                    out,
                    "memory nodes: {}",
                    or(resolved.memory_nodes.as_ref().map(|n| n.to_string()), "-")
                )
            })
            .and_then(|()| {
                writeln!(
                    out,
                    "numa balancing: {}",
                    if resolved.numa_balancing { "yes" } else { "no" }
                )
            })
            .and_then(|()| {
                let shown =
                    if command.is_empty() { "(none)".to_string() } else { command.join(" ") };
                writeln!(out, "command: {shown}")
            })
            .map_err(anyhow::Error::from)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        exec: ExecArgs,
    }

    fn request(args: &[&str]) -> Result<Request, String> {
        let cli = Cli::try_parse_from(std::iter::once("exec").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.exec.request().map_err(|e| match e {
            Error::Usage(m) => m,
            other => format!("{other:?}"),
        })
    }

    fn policy(r: &Request) -> Option<MemoryPolicy> {
        r.memory.as_ref().map(|(p, _)| *p)
    }

    #[test]
    fn nodes_mean_their_cpus_and_bind_unless_mem_says_otherwise() {
        let r = request(&["--nodes", "0", "--", "true"]).unwrap();
        assert!(matches!(r.cpus, Some(CpuTarget::Nodes(_))));
        assert_eq!(policy(&r), Some(MemoryPolicy::Bind));
        let r = request(&["--nodes", "0", "--mem", "preferred", "true"]).unwrap();
        assert_eq!(policy(&r), Some(MemoryPolicy::Preferred));
        let r = request(&["--nodes", "0", "--cpus", "1", "true"]).unwrap();
        assert!(matches!(r.cpus, Some(CpuTarget::Cpus(_))));
        let r = request(&["--mem", "local", "true"]).unwrap();
        assert!(matches!(r.memory, Some((MemoryPolicy::Local, None))));
        assert!(r.cpus.is_none());
    }

    #[test]
    fn numactl_options_mix_with_pinctl_options() {
        let r = request(&["-N", "0", "--mem", "interleave", "--mem-nodes", "all", "cmd"]).unwrap();
        assert_eq!(policy(&r), Some(MemoryPolicy::Interleave));
        let r = request(&["-b", "-m", "0", "cmd", "-m", "1"]).unwrap();
        assert!(r.balancing);
        assert_eq!(policy(&r), Some(MemoryPolicy::Bind));
        assert!(request(&["-m", "0", "--mem", "bind", "cmd"]).unwrap_err().contains("conflicting"));
        assert!(request(&["-l", "-p", "0", "cmd"]).unwrap_err().contains("conflicting"));
        assert!(request(&["-b", "-p", "0", "cmd"]).unwrap_err().contains("bind policy only"));
        assert!(request(&["-m", "0", "--mem-nodes", "0", "cmd"]).is_err());
        assert!(request(&["--cpus", "0", "-C", "0", "cmd"]).is_err());
        assert!(request(&["--service", "x", "cmd"]).is_err(), "--service needs -c");
    }
}
