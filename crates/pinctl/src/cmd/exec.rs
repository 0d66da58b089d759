//! `pinctl exec`: apply a placement to this process (CPU affinity, then memory policy, then
//! read both back) and exec a command. This is how a systemd unit replaces `numactl`, so it is
//! kept on a fast path: no async runtime, no hwloc, only the procfs/sysfs files the placement
//! needs. The options are parsed here; resolving and applying them is pinctl-launch's.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use pinctl_launch::options::{NumactlOptions, OptionsError, PlacementOptions};
use pinctl_launch::{Launch, Request, Resolved};
use pinctl_sys::LinuxKernel;
use pinctl_sysfs::Host;

use crate::error::{CmdResult, Error};

/// What to do when the kernel lacks a requested policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum IfUnsupported {
    /// Refuse to run the command (the default: a service must not run unpinned by surprise).
    Fail,
    /// Run the command without the unsupported policy or flag, with a warning.
    Ignore,
}

/// Arguments of `pinctl exec`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Node lists use numactl's grammar: 0-3,8  all  !1 (all but 1)  +0 \
                        (first allowed)  netdev:eth0  block:nvme0n1  file:/srv/db  pci:3b:00.0")]
pub(crate) struct ExecArgs {
    #[command(flatten)]
    placement: PlacementOptions,
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
    numactl: Box<NumactlOptions>,

    /// The command and its arguments. An option before the command is pinctl's (an unknown
    /// one is a usage error with a suggestion); after `--` or the command's name everything
    /// is the command's.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

fn usage(msg: impl std::fmt::Display) -> Error {
    Error::usage(msg)
}

impl ExecArgs {
    /// The request the options state, refusing contradictions.
    fn request(&self) -> Result<Request, Error> {
        let running = super::host::running_files;
        self.placement.request(&self.numactl, running).map_err(|e| match e {
            OptionsError::Usage(m) => Error::Usage(m),
            OptionsError::Launch(e) => Error::Launch(e),
        })
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
    // A unit's placement that went around (or could not go around) processes pinned by
    // others depends on what ran when it started: the journal should say so.
    if let Some(note) = &request.pinned_note {
        crate::error::warn(note);
    }
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
    Err(pinctl_launch::exec(&args.command, args.placement.service.as_deref()).into())
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
    use pinctl_launch::CpuTarget;
    use pinctl_topology::MemoryPolicy;

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
