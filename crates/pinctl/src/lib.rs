//! The `pinctl` command line: parses arguments, calls the libraries, renders their answers and
//! maps failures to the exit codes documented in docs/exit-codes.md. Decisions belong to the
//! libraries (pinctl-launch places and launches, pinctl-sysfs reads the host, pinctl-plan
//! plans); this crate spells no path under /sys or /proc and makes no system call of its own
//! beyond the standard library's I/O.
//!
//! It is a library only so that [`command`], the clap definition, can be read by
//! `pinctl-gen` (man pages and shell completions) without linking those generators into the
//! binary; `src/main.rs` just calls [`run`]. Nothing else here is public.
#![forbid(unsafe_code)]

mod cmd;
mod error;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// `0.1.0 (1a2b3c4)`: the crate version and, when built from a git checkout, the commit
/// (build.rs); just the version when built from a tarball.
const LONG_VERSION: &str = env!("PINCTL_VERSION");

/// Launch and supervise services pinned to NUMA nodes.
#[derive(Debug, Parser)]
#[command(name = "pinctl", version = LONG_VERSION, about, propagate_version = true)]
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
    /// Plan many hosts offline, each on its own capture; fill in a TiUP topology's NUMA fields.
    Fleet(cmd::fleet::FleetArgs),
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
    /// Open every instance's `output` file again at its path (after logrotate moved it).
    ReopenLogs(cmd::control::SocketArg),
    /// Watch where the planned instances' memory and threads are; alert, export, rebalance.
    Watch(cmd::watch::WatchArgs),
    /// Steer interrupts as a service file's plan says, or put them back (for services
    /// started with `pinctl exec`; `pinctl run` steers by itself).
    Irq(cmd::irq::IrqArgs),
    /// Measure memory latency and bandwidth between every CPU node and memory node, beside
    /// SLIT and HMAT; save them with the topology for plans.
    Probe(cmd::probe::ProbeArgs),
}

/// Runs pinctl with `args` (the program name first) and returns its exit status.
pub fn run(args: Vec<OsString>) -> ExitCode {
    // Invoked through a symlink named `numactl`: speak numactl's command line as is.
    if invoked_as(&args, "numactl") {
        return error::report(cmd::numactl::run(&args[1..]));
    }
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Topology(a) => cmd::topology::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Fleet(a) => cmd::fleet::run(a),
        Command::Exec(a) => cmd::exec::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Status(a) => cmd::control::status(a),
        Command::Start(a) => cmd::control::names(cmd::control::Verb::Start, a),
        Command::Stop(a) => cmd::control::names(cmd::control::Verb::Stop, a),
        Command::Restart(a) => cmd::control::names(cmd::control::Verb::Restart, a),
        Command::Reload(a) => cmd::control::reload(a),
        Command::Detach(a) => cmd::control::detach(a),
        Command::ReopenLogs(a) => cmd::control::reopen_logs(a),
        Command::Watch(a) => cmd::watch::run(a),
        Command::Irq(a) => cmd::irq::run(a),
        Command::Probe(a) => cmd::probe::run(a),
    };
    error::report(result)
}

/// The command-line definition with the plain crate version, for generated documentation:
/// the man pages and completions are committed, and a commit id in them would make every
/// commit stale them.
pub fn command() -> clap::Command {
    Cli::command().version(env!("CARGO_PKG_VERSION"))
}

fn invoked_as(args: &[OsString], name: &str) -> bool {
    args.first().and_then(|a| std::path::Path::new(a).file_name()).is_some_and(|f| f == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        // clap's own checks (conflicting names, bad defaults, ...) run only in debug builds
        // when an argument is parsed; this runs them on every subcommand at once.
        Cli::command().debug_assert();
        command().debug_assert();
    }

    /// What build.rs should have found: the short commit when this package is a git
    /// checkout of its own (not a tarball inside another repository) and git runs.
    fn checkout_commit() -> Option<String> {
        let dir = env!("CARGO_MANIFEST_DIR");
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output();
            let out = out.ok().filter(|o| o.status.success())?;
            Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
        };
        let top = std::fs::canonicalize(git(&["rev-parse", "--show-toplevel"])?).ok()?;
        (top == std::fs::canonicalize(dir).ok()?).then(|| git(&["rev-parse", "--short", "HEAD"]))?
    }

    #[test]
    fn version_names_the_commit_it_was_built_from() {
        let shown = Cli::try_parse_from(["pinctl", "--version"]).unwrap_err();
        assert_eq!(shown.kind(), clap::error::ErrorKind::DisplayVersion);
        let version = env!("CARGO_PKG_VERSION");
        let expected = match checkout_commit() {
            Some(commit) => format!("pinctl {version} ({commit})\n"),
            None => format!("pinctl {version}\n"),
        };
        assert_eq!(shown.to_string(), expected);
    }

    #[test]
    fn documentation_gets_the_plain_version() {
        assert_eq!(command().get_version(), Some(env!("CARGO_PKG_VERSION")));
        assert!(LONG_VERSION.starts_with(env!("CARGO_PKG_VERSION")), "{LONG_VERSION}");
    }
}
