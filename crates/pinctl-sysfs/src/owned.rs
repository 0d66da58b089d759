//! Files that only this user (root, for a supervisor) could have written: the checks pinctl
//! makes before it acts on a file whose contents decide which process it adopts or signals
//! (its state file, its lock), where it listens (its control socket) or whose folder it
//! writes into. OpenSSH's StrictModes and systemd's PID-file rule are the model:
//!
//! - every folder on the way is owned by root or by this user; none of them is writable by
//!   group or others, except a folder with the sticky bit owned by root (`/tmp`), in which
//!   nobody else can rename or remove what this user put there. The folder that holds the
//!   file itself must not be writable by group or others at all;
//! - a symbolic link on the way is followed only when root or this user owns it (its folder
//!   was checked first, so nobody else could have placed or changed it);
//! - the file is opened without following a final link and without blocking (a FIFO placed
//!   there must not hang the caller), must be a regular file owned by this user and not
//!   writable by group or others, and is read up to a bound.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

use crate::fsroot::{open_regular, read_all};

/// Why a path is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}` {why}", path.display())]
pub struct Untrusted {
    /// The file or folder that failed the check.
    pub path: PathBuf,
    /// What is wrong with it (`is owned by uid 1000`, `is writable by others (mode 0777)`).
    pub why: String,
}

/// A failed trusted read: the path is not trusted, or it could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OwnedError {
    #[error(transparent)]
    Untrusted(#[from] Untrusted),
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// This process's effective user id: the owner every trusted file must have (besides root).
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn untrusted(path: &Path, why: impl Into<String>) -> Untrusted {
    Untrusted { path: path.to_path_buf(), why: why.into() }
}

/// Whether `uid` may own what this process trusts: root, or this process's own user.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == euid()
}

fn owner_and_mode(path: &Path, m: &fs::Metadata, strict: bool) -> Result<(), Untrusted> {
    if !trusted_owner(m.uid()) {
        return Err(untrusted(path, format!("is owned by uid {}, not root", m.uid())));
    }
    let mode = m.mode() & 0o7777;
    let sticky = mode & 0o1000 != 0;
    if mode & 0o022 != 0 && (strict || !(sticky && m.uid() == 0)) {
        let who = if mode & 0o002 != 0 { "others" } else { "its group" };
        return Err(untrusted(path, format!("is writable by {who} (mode {mode:04o})")));
    }
    Ok(())
}

/// How many symbolic links one check may follow (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Checks `dir` and every folder above it (see the module documentation): `Ok` with the folder
/// as the links resolve, or which component is not trusted. A folder that does not exist is an
/// error of kind `NotFound` inside [`OwnedError::Io`].
pub fn check_folder(dir: &Path) -> Result<PathBuf, OwnedError> {
    let io_err = |path: &Path, source| OwnedError::Io { path: path.to_path_buf(), source };
    let absolute = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| io_err(dir, e))?.join(dir)
    };
    // Components still to walk, last first.
    let mut pending: Vec<std::ffi::OsString> = absolute
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .rev()
        .collect();
    let mut current = PathBuf::from("/");
    let root = fs::symlink_metadata(&current).map_err(|e| io_err(&current, e))?;
    owner_and_mode(&current, &root, pending.is_empty())?;
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            current.pop();
            continue;
        }
        let next = current.join(&name);
        let m = fs::symlink_metadata(&next).map_err(|e| io_err(&next, e))?;
        if m.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(untrusted(&next, "leads through too many symbolic links").into());
            }
            if !trusted_owner(m.uid()) {
                return Err(untrusted(
                    &next,
                    format!("is a symbolic link owned by uid {}, not root", m.uid()),
                )
                .into());
            }
            let target = fs::read_link(&next).map_err(|e| io_err(&next, e))?;
            if target.is_absolute() {
                current = PathBuf::from("/");
            }
            for c in target.components().rev() {
                match c {
                    Component::Normal(n) => pending.push(n.to_os_string()),
                    Component::ParentDir => pending.push("..".into()),
                    _ => {}
                }
            }
            continue;
        }
        if !m.is_dir() {
            return Err(untrusted(&next, "is not a folder").into());
        }
        owner_and_mode(&next, &m, pending.is_empty())?;
        current = next;
    }
    Ok(current)
}

/// The folder that holds `path` (`.` for a bare name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Reads the file at `path` when it, and every folder on its way, could only have been written
/// by root or this user (see the module documentation), up to `max` bytes. `Ok(None)`: there
/// is no such file (its folder being trusted).
pub fn read_owned(path: &Path, max: usize) -> Result<Option<Vec<u8>>, OwnedError> {
    let io_err = |source| OwnedError::Io { path: path.to_path_buf(), source };
    match check_folder(folder_of(path)) {
        Ok(_) => {}
        Err(OwnedError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    }
    let file = match open_regular(path, true) {
        Ok(Some(f)) => f,
        Ok(None) => {
            return Err(untrusted(path, "is not a regular file (a FIFO, socket or device?)").into());
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // ELOOP: O_NOFOLLOW met a link.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(untrusted(path, "is a symbolic link").into());
        }
        Err(e) => return Err(io_err(e)),
    };
    let m = file.metadata().map_err(io_err)?;
    owner_and_mode(path, &m, true)?;
    if m.len() > max as u64 {
        return Err(untrusted(path, format!("is {} bytes, more than {max}", m.len())).into());
    }
    let mut buf = Vec::new();
    if !read_all(&file, &mut buf, max).map_err(io_err)? {
        return Err(untrusted(path, format!("holds more than {max} bytes")).into());
    }
    Ok(Some(buf))
}

/// Checks an existing socket (or anything) at `path` before it is replaced or trusted: `Ok(true)`
/// when a socket owned by root or this user is there, `Ok(false)` when nothing is there, an
/// error for anything else (a regular file, a link, someone else's socket): such a path is
/// never removed.
pub fn check_socket(path: &Path) -> Result<bool, OwnedError> {
    use std::os::unix::fs::FileTypeExt as _;
    let m = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(OwnedError::Io { path: path.to_path_buf(), source }),
    };
    if !m.file_type().is_socket() {
        let what = if m.file_type().is_symlink() {
            "a symbolic link"
        } else if m.is_dir() {
            "a folder"
        } else if m.is_file() {
            "a regular file"
        } else {
            "not a socket"
        };
        return Err(untrusted(path, format!("is {what}, not a socket")).into());
    }
    if !trusted_owner(m.uid()) {
        return Err(
            untrusted(path, format!("is a socket owned by uid {}, not root", m.uid())).into()
        );
    }
    Ok(true)
}

/// How long [`lock_exclusive`] waits for a lock another process holds: a supervisor killed
/// while forking leaves its lock with the child for the moment until that child's `exec`
/// closes it (the descriptor is close-on-exec, but not close-on-fork).
pub const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes an exclusive `flock` on `file` (a regular file or a folder), waiting up to `patience`
/// while another process holds it. `Ok(false)`: still held by someone else after that.
pub fn lock_exclusive(file: &fs::File, patience: std::time::Duration) -> io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    let deadline = std::time::Instant::now() + patience;
    loop {
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(path: &Path, m: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(m)).unwrap();
    }

    #[test]
    fn a_private_file_in_a_private_folder_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("state.json");
        fs::write(&f, "{}").unwrap();
        mode(&f, 0o600);
        assert_eq!(read_owned(&f, 100).unwrap().unwrap(), b"{}");
        assert!(read_owned(&dir.path().join("missing"), 100).unwrap().is_none());
        assert!(read_owned(&dir.path().join("no/such/folder/x"), 100).unwrap().is_none());
    }

    #[test]
    fn writable_by_others_links_fifos_and_large_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("state.json");
        fs::write(&f, "{}").unwrap();
        mode(&f, 0o666);
        let e = read_owned(&f, 100).unwrap_err().to_string();
        assert!(e.contains("writable by others (mode 0666)"), "{e}");
        mode(&f, 0o620);
        assert!(read_owned(&f, 100).unwrap_err().to_string().contains("its group"));
        mode(&f, 0o600);
        assert!(read_owned(&f, 1).unwrap_err().to_string().contains("more than 1"));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert!(read_owned(&link, 100).unwrap_err().to_string().contains("symbolic link"));
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600))
            .unwrap();
        assert!(read_owned(&fifo, 100).unwrap_err().to_string().contains("not a regular file"));
        mode(dir.path(), 0o777);
        let e = read_owned(&f, 100).unwrap_err().to_string();
        assert!(e.contains("is writable by others (mode 0777)"), "{e}");
        assert!(e.contains(&dir.path().display().to_string()), "{e}");
        mode(dir.path(), 0o700);
    }

    #[test]
    fn files_and_folders_of_other_users_are_refused() {
        if euid() != 0 {
            // Only root can give a file away; as another user the ownership check is the
            // same comparison against this user's id, exercised by the cases above.
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("state.json");
        fs::write(&f, "{}").unwrap();
        mode(&f, 0o600);
        std::os::unix::fs::chown(&f, Some(65534), None).unwrap();
        let e = read_owned(&f, 100).unwrap_err().to_string();
        assert!(e.contains("owned by uid 65534, not root"), "{e}");
        std::os::unix::fs::chown(&f, Some(0), None).unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        std::os::unix::fs::chown(&sub, Some(65534), None).unwrap();
        let e = check_folder(&sub).unwrap_err().to_string();
        assert!(e.contains("owned by uid 65534"), "{e}");
        // A link placed by another user is not followed.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), None).unwrap();
        let e = check_folder(&link).unwrap_err().to_string();
        assert!(e.contains("symbolic link owned by uid 65534"), "{e}");
    }

    #[test]
    fn sticky_root_folders_above_are_accepted_but_not_as_the_folder_itself() {
        let tmp = Path::new("/tmp");
        let m = fs::metadata(tmp).unwrap();
        if m.uid() != 0 || m.mode() & 0o1777 != 0o1777 {
            panic!("/tmp is expected to be root's, mode 1777: {:o}", m.mode());
        }
        let dir = tempfile::tempdir_in(tmp).unwrap();
        assert!(check_folder(dir.path()).is_ok());
        let e = check_folder(tmp).unwrap_err().to_string();
        assert!(e.contains("writable by others (mode 1777)"), "{e}");
        // A root-owned link in a trusted folder is followed, and its target checked.
        let link = dir.path().join("to-tmp");
        std::os::unix::fs::symlink(tmp, &link).unwrap();
        assert!(check_folder(&link).unwrap_err().to_string().contains("mode 1777"));
        let inner = dir.path().join("inner");
        fs::create_dir(&inner).unwrap();
        mode(&inner, 0o755);
        let to_inner = dir.path().join("to-inner");
        std::os::unix::fs::symlink("inner", &to_inner).unwrap();
        assert_eq!(check_folder(&to_inner).unwrap(), inner);
    }

    #[test]
    fn only_sockets_are_sockets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pinctl.sock");
        assert!(!check_socket(&p).unwrap());
        fs::write(&p, "precious").unwrap();
        assert!(check_socket(&p).unwrap_err().to_string().contains("a regular file, not a socket"));
        fs::remove_file(&p).unwrap();
        let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        assert!(check_socket(&p).unwrap());
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(check_socket(&link).unwrap_err().to_string().contains("a symbolic link"));
    }
}
