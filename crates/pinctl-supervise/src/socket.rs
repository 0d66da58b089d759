//! The control socket, both ends: binding it for `pinctl run`, connecting to it for `pinctl
//! status` and the other clients, and serving it within bounds.
//!
//! What is trusted: the socket lives in a folder that nobody but root (or the user running
//! pinctl) can write ([`pinctl_trust::check_folder`]), with mode 0600. A path is
//! unlinked before `bind` only when `lstat` says it is a socket of root's that nobody answers
//! on; a regular file, a link or someone else's socket there is an error and stays. A
//! connection is served only when its peer (`SO_PEERCRED`) is root or pinctl's own user, and a
//! client talks only to a supervisor whose peer credentials say the same.
//!
//! What is bounded: at most [`MAX_CONNECTIONS`] connections at once (more are answered with an
//! error and closed), a request line of at most [`MAX_REQUEST_BYTES`], [`IDLE_TIMEOUT`] to send
//! one; an `accept` that fails (no descriptors left, EMFILE) is retried after a growing pause
//! instead of at once, so a flood neither spins the loop nor ends the listener.

use std::io;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pinctl_trust::TrustError;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;

use crate::protocol::{Request, Response};

/// The most connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The longest request line, newline included: a request names instances, and a few KiB name
/// hundreds of them.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// How long a connection may take to send its next request (and to read an answer).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest pause after a failed `accept`.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// Why the socket cannot be bound or reached.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(
        "another `pinctl run` is serving `{}`: stop it first, or give this service file a \
         supervisor of its own (`[host] name`)",
        path.display()
    )]
    InUse { path: PathBuf },
    #[error(
        "`{}` is served by a process of uid {uid}, not root: refusing to trust it",
        path.display()
    )]
    ForeignPeer { path: PathBuf, uid: u32 },
    #[error("refusing the control socket `{}`: {}", path.display(), pinctl_trust::about(path, reason))]
    Untrusted { path: PathBuf, reason: pinctl_trust::Refused },
    #[error("cannot listen on `{}`: {source}", path.display())]
    Bind {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot reach the supervisor at `{}` ({source}): is `pinctl run` running?",
        path.display()
    )]
    Connect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The uid of the process at the other end of a connected Unix socket.
fn peer_uid(stream: impl std::os::fd::AsFd) -> io::Result<u32> {
    Ok(rustix::net::sockopt::socket_peercred(stream)?.uid.as_raw())
}

/// Whether a peer of this uid may control the supervisor, or be trusted as one.
fn trusted_peer(uid: u32) -> bool {
    uid == 0 || uid == pinctl_trust::euid()
}

fn untrusted(path: &Path, e: TrustError) -> SocketError {
    match e {
        TrustError::Refused(reason) => SocketError::Untrusted { path: path.to_path_buf(), reason },
        TrustError::Io { source, .. } => SocketError::Bind { path: path.to_path_buf(), source },
    }
}

/// Binds the control socket at `path` (mode 0600), creating its folder (mode 0700) when it is
/// missing. Refuses a folder others can write, a path that is not a socket, and a socket that
/// a supervisor still answers on; replaces a socket of root's that nobody answers on (left by
/// a supervisor that died).
pub fn bind(path: &Path) -> Result<std::os::unix::net::UnixListener, SocketError> {
    let err = |source| SocketError::Bind { path: path.to_path_buf(), source };
    let dir = pinctl_trust::folder_of(path);
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(err)?;
    }
    pinctl_trust::check_folder(dir).map_err(|e| untrusted(path, e))?;
    if pinctl_trust::check_socket(path).map_err(|e| untrusted(path, e))? {
        match UnixStream::connect(path) {
            Ok(stream) => {
                let uid = peer_uid(&stream).map_err(err)?;
                return Err(if trusted_peer(uid) {
                    SocketError::InUse { path: path.to_path_buf() }
                } else {
                    SocketError::ForeignPeer { path: path.to_path_buf(), uid }
                });
            }
            // Nobody answers: a supervisor died without removing it. The folder is trusted,
            // so the socket checked above is still the one removed here.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path).map_err(err)?;
            }
            Err(e) => return Err(err(e)),
        }
    }
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let bound = std::os::unix::net::UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    listener.set_nonblocking(true).map_err(err)?;
    Ok(listener)
}

/// Connects a client to the supervisor at `path`: the socket's folder must be trusted, the path
/// a socket, and the process serving it root (or this user).
pub fn connect(path: &Path) -> Result<UnixStream, SocketError> {
    let connect_err = |source| SocketError::Connect { path: path.to_path_buf(), source };
    match pinctl_trust::check_folder(pinctl_trust::folder_of(path)) {
        Ok(_) => {}
        Err(TrustError::Io { source, .. }) => return Err(connect_err(source)),
        Err(e) => return Err(untrusted(path, e)),
    }
    match pinctl_trust::check_socket(path) {
        Ok(true) => {}
        Ok(false) => return Err(connect_err(io::ErrorKind::NotFound.into())),
        Err(TrustError::Io { source, .. }) => return Err(connect_err(source)),
        Err(e) => return Err(untrusted(path, e)),
    }
    let stream = UnixStream::connect(path).map_err(connect_err)?;
    let uid = peer_uid(&stream).map_err(connect_err)?;
    if !trusted_peer(uid) {
        return Err(SocketError::ForeignPeer { path: path.to_path_buf(), uid });
    }
    Ok(stream)
}

/// The most entries of the runtime folder looked at when finding a supervisor.
const MAX_RUNTIME_ENTRIES: usize = 4096;

/// The control socket a client talks to when it was told none, as `systemctl` finds its
/// manager: `<dir>/pinctl.sock` (the packaged unit's, for /etc/pinctl/pinctl.toml) when it
/// exists, else the one socket in `dir` (/run/pinctl). Several and no `pinctl.sock`: an error
/// listing them, since guessing could stop or restart another file's services.
pub fn find_supervisor(dir: &Path) -> Result<PathBuf, String> {
    let default = dir.join("pinctl.sock");
    if let Ok(true) = pinctl_trust::check_socket(&default) {
        return Ok(default);
    }
    let how = "name one with `-c FILE` (its service file), `--socket PATH` or PINCTL_SOCKET";
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(format!(
                "no supervisor is running here (`{}` does not exist): start one with `pinctl \
                 run -c FILE`, or {how}",
                dir.display()
            ));
        }
        Err(e) => return Err(format!("cannot look for supervisors in `{}`: {e}", dir.display())),
    };
    match &sockets_in(entries)[..] {
        [one] => Ok(one.clone()),
        [] => Err(format!(
            "no supervisor is running here (no control socket in `{}`): start one with \
             `pinctl run -c FILE`, or {how}",
            dir.display()
        )),
        several => Err(format!(
            "{} supervisors run here ({}): {how}",
            several.len(),
            several.iter().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Every supervisor's control socket in `dir` (/run/pinctl), sorted: the `*.sock` entries that
/// are sockets of root's (or this user's), as [`find_supervisor`] trusts them; none when `dir`
/// does not exist.
pub fn supervisors_in(dir: &Path) -> Result<Vec<PathBuf>, String> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(sockets_in(entries)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("cannot look for supervisors in `{}`: {e}", dir.display())),
    }
}

/// The trusted `*.sock` entries of a listing of the runtime folder, sorted.
fn sockets_in(entries: std::fs::ReadDir) -> Vec<PathBuf> {
    let mut sockets: Vec<PathBuf> = entries
        .take(MAX_RUNTIME_ENTRIES)
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .filter(|p| matches!(pinctl_trust::check_socket(p), Ok(true)))
        .collect();
    sockets.sort();
    sockets
}

/// Hands a request to the supervisor; `false` once it is gone.
pub(crate) type Submit = Arc<dyn Fn(Request, oneshot::Sender<Response>) -> bool + Send + Sync>;

/// Accepts connections until the runtime ends, within the bounds above.
pub(crate) async fn serve(listener: tokio::net::UnixListener, submit: Submit) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut backoff = Duration::from_millis(10);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // EMFILE, ENFILE, ENOBUFS, ENOMEM, ECONNABORTED: all pass; waiting lets
                // descriptors close instead of spinning on an error that repeats at once.
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(10);
        let refuse = |stream: &tokio::net::UnixStream, why: &str| {
            let line = serde_json::to_string(&Response::error(why)).unwrap_or_default() + "\n";
            let _ = stream.try_write(line.as_bytes());
        };
        match peer_uid(&stream) {
            Ok(uid) if trusted_peer(uid) => {}
            Ok(uid) => {
                refuse(&stream, &format!("uid {uid} may not control this supervisor"));
                continue;
            }
            Err(_) => continue,
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refuse(&stream, &format!("too many connections (at most {MAX_CONNECTIONS})"));
            continue;
        };
        tokio::spawn(connection(stream, slot, submit.clone()));
    }
}

/// What reading one request line gave.
enum Line {
    Request(Vec<u8>),
    TooLong,
    Closed,
}

async fn read_request(reader: &mut (impl tokio::io::AsyncBufRead + Unpin)) -> Line {
    let mut line = Vec::new();
    let limit = MAX_REQUEST_BYTES as u64;
    match tokio::time::timeout(IDLE_TIMEOUT, reader.take(limit).read_until(b'\n', &mut line)).await
    {
        Ok(Ok(0)) | Ok(Err(_)) | Err(_) => Line::Closed,
        Ok(Ok(_)) if line.ends_with(b"\n") => Line::Request(line),
        Ok(Ok(n)) if n as u64 >= limit => Line::TooLong,
        // End of stream without a newline: the last request counts.
        Ok(Ok(_)) => Line::Request(line),
    }
}

async fn connection(
    stream: tokio::net::UnixStream,
    _slot: tokio::sync::OwnedSemaphorePermit,
    submit: Submit,
) {
    let (read, mut write) = stream.into_split();
    let mut reader = tokio::io::BufReader::new(read);
    loop {
        let line = match read_request(&mut reader).await {
            Line::Request(line) => line,
            Line::Closed => return,
            Line::TooLong => {
                let e = format!("request longer than {MAX_REQUEST_BYTES} bytes");
                let mut text = serde_json::to_string(&Response::error(e)).unwrap_or_default();
                text.push('\n');
                let _ = tokio::time::timeout(IDLE_TIMEOUT, write.write_all(text.as_bytes())).await;
                return;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let response = match serde_json::from_slice::<Request>(&line) {
            Err(e) => Response::error(format!("bad request: {e}")),
            Ok(Request::Detach) => {
                // Answered before the supervisor is told: it exits at once after.
                let _ = write.write_all(b"{\"ok\":true}\n").await;
                let _ = write.flush().await;
                let (reply, _) = oneshot::channel();
                submit(Request::Detach, reply);
                return;
            }
            Ok(request) => {
                let (reply, answer) = oneshot::channel();
                if !submit(request, reply) {
                    return;
                }
                match answer.await {
                    Ok(r) => r,
                    Err(_) => Response::error("the supervisor is exiting"),
                }
            }
        };
        let mut text = serde_json::to_string(&response).unwrap_or_default();
        text.push('\n');
        match tokio::time::timeout(IDLE_TIMEOUT, write.write_all(text.as_bytes())).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_told_nothing_finds_the_default_or_the_only_supervisor_and_never_guesses() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("pinctl");
        assert!(find_supervisor(&run).unwrap_err().contains("does not exist"));
        std::fs::create_dir(&run).unwrap();
        assert!(find_supervisor(&run).unwrap_err().contains("no control socket"));
        // Not sockets: a file and a link named like one are not supervisors.
        std::fs::write(run.join("fake.sock"), "").unwrap();
        std::os::unix::fs::symlink("/dev/null", run.join("link.sock")).unwrap();
        let _db = std::os::unix::net::UnixListener::bind(run.join("db.sock")).unwrap();
        assert_eq!(find_supervisor(&run).unwrap(), run.join("db.sock"));
        let _cache = std::os::unix::net::UnixListener::bind(run.join("cache.sock")).unwrap();
        let e = find_supervisor(&run).unwrap_err();
        assert!(e.starts_with("2 supervisors run here") && e.contains("cache.sock"), "{e}");
        assert!(e.contains("-c FILE"), "{e}");
        // The packaged unit's socket wins over the others.
        let _main = std::os::unix::net::UnixListener::bind(run.join("pinctl.sock")).unwrap();
        assert_eq!(find_supervisor(&run).unwrap(), run.join("pinctl.sock"));
    }

    #[test]
    fn a_regular_file_at_the_socket_path_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pinctl.sock");
        std::fs::write(&path, "precious").unwrap();
        let e = bind(&path).unwrap_err();
        assert!(matches!(e, SocketError::Untrusted { .. }), "{e}");
        assert!(e.to_string().ends_with("a regular file, not a socket"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pinctl.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let first = bind(&path).unwrap();
        assert!(matches!(bind(&path).unwrap_err(), SocketError::InUse { .. }));
        let stream = connect(&path).unwrap();
        drop((stream, first));
    }

    #[test]
    fn folders_others_can_write_are_refused_on_both_ends() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let path = open.join("pinctl.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        for e in [bind(&path).unwrap_err(), connect(&path).unwrap_err()] {
            assert!(matches!(e, SocketError::Untrusted { .. }), "{e}");
            assert!(e.to_string().contains("writable by group or others"), "{e}");
        }
    }

    #[test]
    fn a_socket_served_by_another_user_is_not_trusted() {
        if pinctl_trust::euid() != 0 {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pinctl.sock");
        // A child that drops to `nobody` and listens: its peer credentials say uid 65534.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut child = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c"])
            .arg(
                "import socket,sys,time\n\
                 s=socket.socket(socket.AF_UNIX)\n\
                 s.bind(sys.argv[1]); s.listen(8); print('ready',flush=True); time.sleep(30)",
            )
            .arg(&path)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        let _ = io::BufRead::read_line(
            &mut io::BufReader::new(child.stdout.take().unwrap()),
            &mut ready,
        );
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // The folder is root's (mode 0755), the socket nobody's.
        let owned_by_nobody = connect(&path).unwrap_err();
        // A socket file of root's, served by nobody: the peer credentials tell.
        std::os::unix::fs::lchown(&path, Some(0), Some(0)).unwrap();
        let served_by_nobody = connect(&path).unwrap_err();
        let refused_bind = bind(&path).unwrap_err();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(ready.trim(), "ready");
        let e = owned_by_nobody;
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        assert!(matches!(served_by_nobody, SocketError::ForeignPeer { uid: 65534, .. }));
        assert!(matches!(refused_bind, SocketError::ForeignPeer { uid: 65534, .. }));
    }
}
