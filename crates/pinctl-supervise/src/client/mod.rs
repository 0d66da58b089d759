//! The client end of the control socket: one bounded request and its answer (docs/supervisor.md),
//! as `pinctl status|start|stop|restart|reload|detach`, `status --host`, `watch -c` and a plan
//! of the host's running files ask it, and the answer of every supervisor of a host
//! ([`HostStatus`]). Blocking I/O: no async runtime on this side.

use std::collections::BTreeMap;
use std::io::{self, BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pinctl_launch::LaunchError;
use pinctl_topology::NodeSet;
use serde::Serialize;

use crate::protocol::{InstanceStatus, Request, Response};
use crate::socket::SocketError;

pub mod table;

/// The longest answer read: the status of 8192 instances is a few MiB.
const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// How long `status --host` waits for each supervisor: one that hangs is reported, not
/// waited for.
pub const HOST_STATUS_WAIT: Duration = Duration::from_secs(10);

/// Why a supervisor gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket is not trusted or nobody answers on it (the message says which).
    #[error("{0}")]
    Socket(SocketError),
    #[error("setting the socket's timeout")]
    Timeout(#[source] io::Error),
    #[error("encoding the request")]
    Encode(#[source] serde_json::Error),
    #[error("writing to the control socket")]
    Write(#[source] io::Error),
    #[error("reading from the control socket")]
    Read(#[source] io::Error),
    #[error("the supervisor closed the connection")]
    Closed,
    #[error("decoding the answer")]
    Decode(#[source] serde_json::Error),
    /// The supervisor answered with a refusal: its own words.
    #[error("{0}")]
    Refused(String),
    /// The service file naming the supervisor could not be read.
    #[error(transparent)]
    Config(#[from] LaunchError),
    /// The service file names no supervisor this client can find.
    #[error("{}: {message}", file.display())]
    NoSupervisor { file: PathBuf, message: String },
}

/// The answer of the supervisor at `path` to `request`, waiting at most `wait` for each read
/// and write when given.
pub fn ask(
    path: &Path,
    request: &Request,
    wait: Option<Duration>,
) -> Result<Response, ClientError> {
    // The folder must be root's, the path a socket, and whoever serves it root (or us).
    let mut stream = crate::socket::connect(path).map_err(ClientError::Socket)?;
    stream.set_read_timeout(wait).map_err(ClientError::Timeout)?;
    stream.set_write_timeout(wait).map_err(ClientError::Timeout)?;
    let mut line = serde_json::to_string(request).map_err(ClientError::Encode)?;
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(ClientError::Write)?;
    let mut answer = String::new();
    BufReader::new((&stream).take(MAX_ANSWER_BYTES))
        .read_line(&mut answer)
        .map_err(ClientError::Read)?;
    if answer.is_empty() {
        return Err(ClientError::Closed);
    }
    let response: Response = serde_json::from_str(&answer).map_err(ClientError::Decode)?;
    if !response.ok {
        return Err(ClientError::Refused(response.error.unwrap_or_else(|| "refused".into())));
    }
    Ok(response)
}

/// Every instance of the supervisor at `path`, as `pinctl status` gets them.
pub fn instances(path: &Path) -> Result<Vec<InstanceStatus>, ClientError> {
    Ok(ask(path, &Request::Status { names: Vec::new() }, None)?.instances.unwrap_or_default())
}

/// The service files of the supervisors whose sockets are in `dir` (/run/pinctl), each asked
/// with a wait of `wait`; those that do not answer hold nothing here.
pub fn running_files(dir: &Path, wait: Duration) -> Vec<PathBuf> {
    let Ok(sockets) = crate::socket::supervisors_in(dir) else { return Vec::new() };
    let request = Request::Status { names: Vec::new() };
    sockets
        .iter()
        .filter_map(|s| ask(s, &request, Some(wait)).ok())
        .filter_map(|r| r.supervisor?.file.map(PathBuf::from))
        .collect()
}

/// The control socket of the supervisor that runs `file` (`pinctl run -c FILE`).
pub fn supervisor_of(file: &Path) -> Result<PathBuf, ClientError> {
    let config = pinctl_launch::load_config(file)?;
    let paths = config.supervisor().map_err(|e| ClientError::NoSupervisor {
        file: file.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(paths.socket)
}

/// One supervisor of the host as it answered.
#[derive(Debug, Serialize)]
pub struct HostSupervisor {
    pub name: String,
    /// Its service file; `None` from a supervisor too old to say.
    pub file: Option<String>,
    pub pid: Option<u32>,
    pub socket: PathBuf,
    pub instances: Vec<InstanceStatus>,
}

/// A control socket that did not answer.
#[derive(Debug, Serialize)]
pub struct Unreachable {
    pub socket: PathBuf,
    pub error: String,
}

/// Every supervisor of a host, what they run, and the nodes left (`pinctl status --host`).
#[derive(Debug, Serialize)]
pub struct HostStatus {
    pub supervisors: Vec<HostSupervisor>,
    pub unreachable: Vec<Unreachable>,
    /// Nodes with CPUs that no running instance's placement uses.
    pub free_nodes: Vec<u32>,
    /// Nodes the plan of the supervisors' files keeps free, and for what.
    pub kept_free_for: BTreeMap<u32, Vec<String>>,
    /// Processes pinned outside pinctl (taskset, `CPUAffinity=`, a cpuset).
    pub pinned_processes: Vec<Pinned>,
    pub warnings: Vec<String>,
}

/// A process pinned by someone else.
#[derive(Debug, Serialize)]
pub struct Pinned {
    pub pid: u32,
    pub name: String,
    pub cpus: String,
    pub nodes: String,
    /// The instance a `pinctl exec -c FILE --service NAME` runs it for (its mark).
    pub instance: Option<String>,
}

impl HostStatus {
    /// The answer of each supervisor whose socket is in `dir` (each trusted as every client
    /// trusts one, each asked with a wait of [`HOST_STATUS_WAIT`]), and the sockets that gave
    /// none; the nodes are left to [`HostStatus::nodes`].
    pub fn gather(dir: &Path) -> Result<HostStatus, String> {
        let mut status = HostStatus {
            supervisors: Vec::new(),
            unreachable: Vec::new(),
            free_nodes: Vec::new(),
            kept_free_for: BTreeMap::new(),
            pinned_processes: Vec::new(),
            warnings: Vec::new(),
        };
        for socket in crate::socket::supervisors_in(dir)? {
            let request = Request::Status { names: Vec::new() };
            match ask(&socket, &request, Some(HOST_STATUS_WAIT)) {
                Ok(r) => {
                    let who = r.supervisor;
                    let stem = socket.file_stem().map(|s| s.to_string_lossy().into_owned());
                    status.supervisors.push(HostSupervisor {
                        name: who.as_ref().map(|w| w.name.clone()).or(stem).unwrap_or_default(),
                        file: who.as_ref().and_then(|w| w.file.clone()),
                        pid: who.as_ref().map(|w| w.pid),
                        socket,
                        instances: r.instances.unwrap_or_default(),
                    });
                }
                Err(e) => {
                    let error =
                        pinctl_topology::text::escaped_but_newlines(&pinctl_launch::chain(&e));
                    status.unreachable.push(Unreachable { socket, error });
                }
            }
        }
        Ok(status)
    }

    /// The service files of the supervisors that said theirs.
    pub fn files(&self) -> Vec<PathBuf> {
        self.supervisors.iter().filter_map(|s| s.file.as_ref().map(PathBuf::from)).collect()
    }

    /// Fills the free nodes of this machine (beside the running instances), the processes
    /// pinned outside pinctl, and the nodes kept free by the plan of the supervisors' files,
    /// which `kept_free` makes (its error is said as a warning).
    pub fn nodes(
        &mut self,
        kept_free: impl FnOnce(&[PathBuf]) -> Result<BTreeMap<u32, Vec<String>>, String>,
    ) {
        let loaded = match pinctl_launch::live_topology() {
            Ok(loaded) => loaded,
            Err(e) => {
                self.warnings.push(format!("cannot read this machine's topology: {e}"));
                return;
            }
        };
        let ours: Vec<u32> = self
            .supervisors
            .iter()
            .flat_map(|s| s.instances.iter().filter_map(|i| i.pid).map(|p| p as u32).chain(s.pid))
            .collect();
        self.pinned_processes = pinctl_launch::pinned_on(&loaded)
            .into_iter()
            .filter(|p| !ours.contains(&p.pid))
            .map(|p| Pinned {
                pid: p.pid,
                name: p.name,
                cpus: p.cpus.to_string(),
                nodes: p.nodes.to_string(),
                instance: p.mark,
            })
            .collect();
        let used = self
            .supervisors
            .iter()
            .flat_map(|s| &s.instances)
            .fold(NodeSet::new(), |used, i| used.union(&i.placement.nodes));
        self.free_nodes = (loaded.topology.nodes.iter())
            .filter(|n| !n.cpus.is_empty() && !used.contains(n.id))
            .map(|n| n.id)
            .collect();
        let files = self.files();
        if files.is_empty() {
            return;
        }
        match kept_free(&files) {
            Ok(kept) => self.kept_free_for = kept,
            Err(e) => self.warnings.push(format!(
                "the supervisors' files cannot be planned, so no node is said to be kept free: {e}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;

    /// A supervisor that answers one connection with `answer` (nothing: it closes), on a
    /// thread the test joins; it waits at most 5 s for the connection.
    fn serve_once(path: &Path, answer: &'static str) -> std::thread::JoinHandle<()> {
        let listener = UnixListener::bind(path).unwrap();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let stream = loop {
                match listener.accept() {
                    Ok((stream, _)) => break stream,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        assert!(std::time::Instant::now() < deadline, "nobody connected");
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => panic!("{e}"),
                }
            };
            stream.set_nonblocking(false).unwrap();
            stream.set_read_timeout(WAIT).unwrap();
            let mut request = String::new();
            BufReader::new(&stream).read_line(&mut request).unwrap();
            (&stream).write_all(answer.as_bytes()).unwrap();
        })
    }

    const WAIT: Option<Duration> = Some(Duration::from_secs(5));

    #[test]
    fn a_refusal_is_said_in_the_supervisors_words_and_a_hang_up_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sock");
        let status = Request::Status { names: Vec::new() };
        let server = serve_once(&path, "{\"ok\":false,\"error\":\"no instance `x`\"}\n");
        let refused = ask(&path, &status, WAIT).unwrap_err();
        server.join().unwrap();
        assert_eq!(refused.to_string(), "no instance `x`");
        std::fs::remove_file(&path).unwrap();
        let server = serve_once(&path, "");
        let closed = ask(&path, &status, WAIT).unwrap_err();
        server.join().unwrap();
        assert!(matches!(closed, ClientError::Closed), "{closed}");
    }

    #[test]
    fn the_host_status_names_who_answered_and_which_sockets_did_not() {
        let dir = tempfile::tempdir().unwrap();
        let answer = "{\"ok\":true,\"instances\":[],\"supervisor\":{\"name\":\"db\",\
                      \"file\":\"/etc/pinctl/db.toml\",\"pid\":42}}\n";
        let server = serve_once(&dir.path().join("a.sock"), answer);
        // A supervisor that died: its socket is left, nobody listens.
        drop(UnixListener::bind(dir.path().join("b.sock")).unwrap());
        let status = HostStatus::gather(dir.path()).unwrap();
        server.join().unwrap();
        let [answered] = &status.supervisors[..] else { panic!("{status:?}") };
        assert_eq!((answered.name.as_str(), answered.pid), ("db", Some(42)));
        assert_eq!(status.files(), [PathBuf::from("/etc/pinctl/db.toml")]);
        let [gone] = &status.unreachable[..] else { panic!("{status:?}") };
        assert_eq!(gone.socket, dir.path().join("b.sock"));
        assert!(gone.error.starts_with("cannot reach the supervisor"), "{}", gone.error);
    }
}
