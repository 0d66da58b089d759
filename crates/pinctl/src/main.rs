//! The `pinctl` command line: parses arguments, calls the libraries, renders their answers and
//! maps failures to the exit codes documented in docs/exit-codes.md. Decisions belong to the
//! libraries (pinctl-launch places and launches, pinctl-sysfs reads the host, pinctl-plan
//! plans); this crate parses arguments, calls them and renders what they answer. It spells no
//! path under /sys or /proc and makes no system call of its own beyond the standard library's
//! I/O.
#![forbid(unsafe_code)]

mod cmd;
mod error;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Launch and supervise services pinned to NUMA nodes.
#[derive(Debug, Parser)]
#[command(name = "pinctl", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the machine's NUMA topology: nodes, CPUs, memory, distances, devices, warnings.
    Topology(cmd::topology::TopologyArgs),
    /// Validate a service file against a topology.
    Check(cmd::check::CheckArgs),
    /// Compute where every service instance runs, and why (a dry run: changes nothing).
    Plan(cmd::plan::PlanArgs),
    /// Apply a placement to this process and exec a command (replaces numactl in units).
    Exec(cmd::exec::ExecArgs),
    /// Watch where the planned instances' memory and threads are; alert, export, rebalance.
    Watch(cmd::watch::WatchArgs),
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Invoked through a symlink named `numactl`: speak numactl's command line as is.
    if invoked_as(&args, "numactl") {
        return error::report(cmd::numactl::run(&args[1..]));
    }
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Topology(a) => cmd::topology::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Exec(a) => cmd::exec::run(a),
        Command::Watch(a) => cmd::watch::run(a),
    };
    error::report(result)
}

fn invoked_as(args: &[OsString], name: &str) -> bool {
    args.first().and_then(|a| std::path::Path::new(a).file_name()).is_some_and(|f| f == name)
}
