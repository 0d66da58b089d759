//! `pinctl status|start|stop|restart|reload|detach`: clients of a running `pinctl run`, over
//! its control socket (one JSON request per line, one JSON answer per line;
//! docs/supervisor.md). Blocking I/O: no async runtime on this path.

mod host_status;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use pinctl_supervise::client::{self, table::render};
use pinctl_supervise::protocol::{Request, Response};

use crate::error::{CmdResult, Error};

/// Which supervisor to talk to: `--socket`, else the one running `-c FILE`, else
/// `PINCTL_SOCKET`, else the one found in /run/pinctl (docs/supervisor.md, "Finding the
/// supervisor").
#[derive(Debug, clap::Args)]
pub(crate) struct SocketArg {
    /// The supervisor's control socket.
    #[arg(long, value_name = "PATH", conflicts_with = "config")]
    socket: Option<PathBuf>,
    /// The service file whose supervisor to ask (its `[host] socket`, else
    /// /run/pinctl/NAME.sock as `pinctl run -c FILE` chose).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The environment variable naming the control socket when no flag does.
pub(crate) const SOCKET_ENV: &str = "PINCTL_SOCKET";

impl SocketArg {
    /// The socket this client talks to (see [`SocketArg`]).
    pub(crate) fn path(&self) -> Result<PathBuf, Error> {
        if let Some(path) = &self.socket {
            return Ok(path.clone());
        }
        if let Some(file) = &self.config {
            return Ok(client::supervisor_of(file)?);
        }
        if let Some(path) = std::env::var_os(SOCKET_ENV).filter(|p| !p.is_empty()) {
            return Ok(path.into());
        }
        pinctl_supervise::socket::find_supervisor(std::path::Path::new(pinctl_config::RUNTIME_DIR))
            .map_err(|e| Error::failure(anyhow::anyhow!(e)))
    }
}

/// Arguments of `pinctl status`.
#[derive(Debug, clap::Args)]
pub(crate) struct StatusArgs {
    /// Print the answer as JSON (`instances`, as in docs/supervisor.md).
    #[arg(long)]
    json: bool,
    /// Only these instances (names, service names or patterns, as `pinctl restart` takes).
    #[arg(value_name = "NAME")]
    names: Vec<String>,
    #[command(flatten)]
    socket: SocketArg,
    /// Every supervisor of the host (each control socket of the runtime folder): its file,
    /// instances, placements and states, then the nodes no instance uses.
    #[arg(long, conflicts_with_all = ["names", "socket", "config"])]
    host: bool,
    /// The runtime folder of `--host`.
    #[arg(long, value_name = "DIR", requires = "host", default_value = pinctl_config::RUNTIME_DIR)]
    runtime_dir: PathBuf,
}

/// Arguments of `pinctl start|stop|restart`.
#[derive(Debug, clap::Args)]
pub(crate) struct NamesArgs {
    /// Instances: a name (`tikv-0`), a service's name (all its instances) or a shell-style
    /// pattern over instance names (`'tikv-*'`, quoted for the shell).
    #[arg(value_name = "NAME", required = true)]
    names: Vec<String>,
    #[command(flatten)]
    socket: SocketArg,
}

/// Arguments of `pinctl reload`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReloadArgs {
    /// Print what a reload would change, change nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    socket: SocketArg,
}

/// Which control command.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Verb {
    Start,
    Stop,
    Restart,
}

fn ask(socket: &SocketArg, request: &Request) -> Result<Response, Error> {
    Ok(client::ask(&socket.path()?, request, None)?)
}

pub(crate) fn status(args: StatusArgs) -> CmdResult {
    if args.host {
        return host_status::run(&args.runtime_dir, args.json);
    }
    let response = ask(&args.socket, &Request::Status { names: args.names })?;
    let instances = response.instances.unwrap_or_default();
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &serde_json::json!({ "instances": instances }))
            .context("writing JSON")?;
        writeln!(out).context("writing to stdout")?;
    } else {
        render(&mut out, &instances).context("writing to stdout")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn names(verb: Verb, args: NamesArgs) -> CmdResult {
    let names = args.names;
    let request = match verb {
        Verb::Start => Request::Start { names },
        Verb::Stop => Request::Stop { names },
        Verb::Restart => Request::Restart { names },
    };
    let response = ask(&args.socket, &request)?;
    let mut out = io::stdout().lock();
    render(&mut out, response.instances.as_deref().unwrap_or_default())
        .context("writing to stdout")?;
    let failed = start_failures(&mut out, &response).context("writing to stdout")?;
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Error::failure(anyhow::anyhow!("failed to start: {}", failed.join(", "))))
    }
}

/// Says which instances did not survive their start, and why; their names.
fn start_failures(out: &mut impl Write, response: &Response) -> io::Result<Vec<String>> {
    for f in &response.failed_to_start {
        writeln!(out, "{}: did not start: {}", f.name, f.reason)?;
    }
    Ok(response.failed_to_start.iter().map(|f| f.name.clone()).collect())
}

pub(crate) fn reload(args: ReloadArgs) -> CmdResult {
    let response = ask(&args.socket, &Request::Reload { dry_run: args.dry_run })?;
    let mut out = io::stdout().lock();
    let changes = response.changes.clone().unwrap_or_default();
    writeln!(out, "{}", if args.dry_run { "a reload would:" } else { "reloaded:" })
        .context("writing to stdout")?;
    for c in &changes {
        let name = c["name"].as_str().unwrap_or("?");
        let change = c["change"].as_str().unwrap_or("?");
        let fields: Vec<&str> = c["fields"]
            .as_array()
            .map(|f| f.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        match (c["from"].as_str(), fields.is_empty()) {
            (Some(from), _) => writeln!(out, "  {name}: keep (was `{from}`)"),
            (None, true) => writeln!(out, "  {name}: {change}"),
            (None, false) => writeln!(out, "  {name}: {change} ({} changed)", fields.join(", ")),
        }
        .context("writing to stdout")?;
    }
    for w in &response.warnings {
        writeln!(out, "warning: {w}").context("writing to stdout")?;
    }
    for n in &response.not_applied {
        writeln!(out, "not applied: {n}").context("writing to stdout")?;
    }
    // The instances the reload started or restarted, once they settled.
    if let Some(instances) = response.instances.as_deref().filter(|i| !i.is_empty()) {
        render(&mut out, instances).context("writing to stdout")?;
    }
    let failed = start_failures(&mut out, &response).context("writing to stdout")?;
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Error::failure(anyhow::anyhow!("failed to start: {}", failed.join(", "))))
    }
}

pub(crate) fn detach(args: SocketArg) -> CmdResult {
    ask(&args, &Request::Detach)?;
    writeln!(io::stdout().lock(), "the supervisor exited; its instances keep running")
        .context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn reopen_logs(args: SocketArg) -> CmdResult {
    let response = ask(&args, &Request::ReopenLogs)?;
    let mut out = io::stdout().lock();
    if response.reopened.is_empty() {
        writeln!(out, "no instance writes to an output file").context("writing to stdout")?;
    }
    let mut failed = Vec::new();
    for r in &response.reopened {
        match &r.error {
            None => writeln!(out, "{}: reopened {}", r.name, r.path),
            Some(e) => {
                failed.push(r.name.clone());
                writeln!(out, "{}: cannot reopen {}: {e}", r.name, r.path)
            }
        }
        .context("writing to stdout")?;
    }
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Error::failure(anyhow::anyhow!("not reopened: {}", failed.join(", "))))
    }
}
