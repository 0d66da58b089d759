//! The `pinctl` command line: parses arguments, calls the libraries, renders their answers and
//! maps failures to the exit codes documented in docs/exit-codes.md. Decisions belong to the
//! libraries; this crate must not plan, discover or call the kernel itself.
#![forbid(unsafe_code)]

mod cmd;
mod exit;

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
    /// Supervise every instance of a service file: start, restart, reload, adopt.
    Run(cmd::run::RunArgs),
    /// Show the supervised instances: state, PID, uptime, restarts, placement.
    Status(cmd::control::StatusArgs),
    /// Start instances of the running supervisor (clears `failed`).
    Start(cmd::control::NamesArgs),
    /// Stop instances of the running supervisor.
    Stop(cmd::control::NamesArgs),
    /// Stop and start instances of the running supervisor.
    Restart(cmd::control::NamesArgs),
    /// Re-read the service file and apply the difference (`--dry-run`: only show it).
    Reload(cmd::control::ReloadArgs),
    /// Make the supervisor exit, leaving its instances running for the next one to adopt.
    Detach(cmd::control::SocketArg),
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Invoked through a symlink named `numactl`: speak numactl's command line as is.
    if invoked_as(&args, "numactl") {
        return exit::report(cmd::numactl::run(&args[1..]));
    }
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Topology(a) => cmd::topology::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Exec(a) => cmd::exec::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Status(a) => cmd::control::status(a),
        Command::Start(a) => cmd::control::names(cmd::control::Verb::Start, a),
        Command::Stop(a) => cmd::control::names(cmd::control::Verb::Stop, a),
        Command::Restart(a) => cmd::control::names(cmd::control::Verb::Restart, a),
        Command::Reload(a) => cmd::control::reload(a),
        Command::Detach(a) => cmd::control::detach(a),
    };
    exit::report(result)
}

fn invoked_as(args: &[OsString], name: &str) -> bool {
    args.first().and_then(|a| std::path::Path::new(a).file_name()).is_some_and(|f| f == name)
}
