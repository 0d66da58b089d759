//! `pinctl status|start|stop|restart|reload|detach`: clients of a running `pinctl run`, over
//! its control socket (one JSON request per line, one JSON answer per line;
//! docs/supervisor.md). Blocking I/O: no async runtime on this path.

use std::io::{self, BufRead as _, BufReader, Read as _, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use pinctl_supervise::protocol::{DriftState, InstanceStatus, Request, Response};

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
            return supervisor_of(file);
        }
        if let Some(path) = std::env::var_os(SOCKET_ENV).filter(|p| !p.is_empty()) {
            return Ok(path.into());
        }
        pinctl_supervise::socket::find_supervisor(std::path::Path::new(pinctl_config::RUNTIME_DIR))
            .map_err(|e| Error::failure(anyhow::anyhow!(e)))
    }
}

/// The control socket of the supervisor that runs `file` (`pinctl run -c FILE`).
pub(crate) fn supervisor_of(file: &std::path::Path) -> Result<PathBuf, Error> {
    let config = pinctl_launch::load_config(file)?;
    let paths = config
        .supervisor()
        .map_err(|e| Error::failure(anyhow::anyhow!("{}: {e}", file.display())))?;
    Ok(paths.socket)
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

/// The longest answer read: the status of 8192 instances is a few MiB.
const MAX_ANSWER_BYTES: u64 = 64 << 20;

fn ask(socket: &SocketArg, request: &Request) -> Result<Response, Error> {
    ask_at(&socket.path()?, request, None)
}

/// Every instance of the supervisor at `path`, as `pinctl status` gets them.
pub(crate) fn instances_at(path: &std::path::Path) -> Result<Vec<InstanceStatus>, Error> {
    Ok(ask_at(path, &Request::Status { names: Vec::new() }, None)?.instances.unwrap_or_default())
}

/// How long `status --host` waits for each supervisor: one that hangs is reported, not
/// waited for.
pub(crate) const HOST_STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The answer of the supervisor at `path` to `request`, waiting at most `wait` for each read
/// and write when given.
pub(crate) fn ask_at(
    path: &std::path::Path,
    request: &Request,
    wait: Option<std::time::Duration>,
) -> Result<Response, Error> {
    // The folder must be root's, the path a socket, and whoever serves it root (or us).
    let mut stream = pinctl_supervise::socket::connect(path)
        .map_err(|e| Error::failure(anyhow::anyhow!("{e}")))?;
    stream.set_read_timeout(wait).context("setting the socket's timeout")?;
    stream.set_write_timeout(wait).context("setting the socket's timeout")?;
    let mut line = serde_json::to_string(request).context("encoding the request")?;
    line.push('\n');
    stream.write_all(line.as_bytes()).context("writing to the control socket")?;
    let mut answer = String::new();
    BufReader::new((&stream).take(MAX_ANSWER_BYTES))
        .read_line(&mut answer)
        .context("reading from the control socket")?;
    if answer.is_empty() {
        return Err(Error::failure(anyhow::anyhow!("the supervisor closed the connection")));
    }
    let response: Response = serde_json::from_str(&answer).context("decoding the answer")?;
    if !response.ok {
        let message = response.error.unwrap_or_else(|| "refused".into());
        return Err(Error::failure(anyhow::anyhow!(message)));
    }
    Ok(response)
}

pub(crate) fn status(args: StatusArgs) -> CmdResult {
    if args.host {
        return super::host_status::run(&args.runtime_dir, args.json);
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

fn uptime(s: f64) -> String {
    let s = s as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        3600..86400 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

/// Resident memory the way `ps` and `top` readers scan it: `5.7MiB`, `812KiB`, `1.2GiB`.
fn rss(bytes: u64) -> String {
    match bytes {
        0..1_048_576 => format!("{}KiB", bytes / 1024),
        1_048_576..1_073_741_824 => format!("{:.1}MiB", bytes as f64 / 1_048_576.0),
        _ => format!("{:.1}GiB", bytes as f64 / 1_073_741_824.0),
    }
}

/// The share of memory on the planned nodes at the watcher's last sample.
/// `<min` where the instance holds less than `min-memory` (the reason is on a line below).
fn local(drift: Option<&DriftState>) -> String {
    match drift {
        Some(d) if d.locality_not_judged.is_some() => "<min".into(),
        d => d.and_then(|d| d.local_fraction).map_or("-".into(), |f| format!("{:.1}%", f * 100.0)),
    }
}

/// `in-place`, the kinds of drift going on, or `-` where nothing watched the instance.
fn drift(drift: Option<&DriftState>) -> String {
    match drift {
        None => "-".into(),
        Some(d) if d.error.is_some() => "unsampled".into(),
        Some(d) if d.drifting.is_empty() => "in-place".into(),
        Some(d) => d.drifting.join(","),
    }
}

pub(crate) fn render(out: &mut impl Write, instances: &[InstanceStatus]) -> io::Result<()> {
    let header = [
        "INSTANCE",
        "STATE",
        "PID",
        "UPTIME",
        "RESTARTS",
        "CPU TIME",
        "RSS",
        "NODES",
        "CPUS",
        "MEMORY",
        "LOCAL",
        "DRIFT",
        "LAST EXIT",
    ];
    let rows: Vec<[String; 13]> = instances
        .iter()
        .map(|i| {
            let p = &i.placement;
            let memory = if p.memory_nodes.is_empty() {
                p.memory_policy.to_string()
            } else {
                format!("{} {}", p.memory_policy, p.memory_nodes)
            };
            [
                i.name.clone(),
                if i.adopted { format!("{} (adopted)", i.state) } else { i.state.clone() },
                i.pid.map_or("-".into(), |p| p.to_string()),
                i.uptime_s.map_or("-".into(), uptime),
                i.restarts.to_string(),
                i.cpu_s.map_or("-".into(), |s| format!("{s:.2}s")),
                i.rss_bytes.map_or("-".into(), rss),
                p.nodes.to_string(),
                p.cpus.to_string(),
                memory,
                local(i.drift.as_ref()),
                drift(i.drift.as_ref()),
                i.last_exit.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut width = header.map(str::len);
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (k, cell) in cells.iter().enumerate() {
            if k + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = width[k]));
            }
        }
        s
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for (row, i) in rows.iter().zip(instances) {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
        if let Some(reason) = &i.reason {
            writeln!(out, "    failed: {reason}")?;
        }
        if let Some(error) = i.drift.as_ref().and_then(|d| d.error.as_ref()) {
            writeln!(out, "    not sampled: {error}")?;
        }
        if let Some(why) = i.drift.as_ref().and_then(|d| d.locality_not_judged.as_ref()) {
            writeln!(out, "    locality not judged: {why}")?;
        }
    }
    Ok(())
}
