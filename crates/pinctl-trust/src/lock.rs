//! Locks that only root can ever have taken: `flock` on a file in a folder no other user may
//! enter (anyone who can open a file can lock it).

use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::trusted::{Refused, TrustError, absolute, check_folder, folder_of};
use crate::walk::{euid, kind_of};

/// How long [`lock_exclusive`] waits for a lock another process holds: a supervisor killed
/// while forking leaves its lock with the child for the moment until that child's `exec`
/// closes it (the descriptor is close-on-exec, but not close-on-fork).
pub const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes an exclusive `flock` on `file` (a regular file or a folder), waiting up to `patience`
/// while another process holds it. `Ok(false)`: still held by someone else after that.
pub fn lock_exclusive(file: &File, patience: std::time::Duration) -> io::Result<bool> {
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

/// Why [`lock_private`] did not take its lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock's folder or file is not one only this user can open, or could not be made.
    #[error(transparent)]
    Untrusted(#[from] TrustError),
    /// Another process holds it (its PID, when the file names one).
    #[error("`{}` is held by PID {}", path.display(), holder.map_or("unknown".into(), |p| p.to_string()))]
    Held { path: PathBuf, holder: Option<u32> },
}

/// An exclusive lock that only this user (root) can ever have taken: held until dropped.
#[derive(Debug)]
pub struct PrivateLock {
    _file: File,
    path: PathBuf,
}

impl PrivateLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Takes an exclusive `flock` on the file `name` in `folder`, a lock nobody but this user can
/// hold: `flock` needs only an open descriptor, and anyone who can read a file or a folder can
/// open it, so the lock is taken only on a file in a folder that no other user may enter.
/// `folder` is created with mode 0700 (its missing parents too) and must be this user's with
/// no permission for group or others, reached through folders nobody else can write
/// ([`check_folder`]); the lock file is opened without following a link, must be a regular
/// file of this user with one name, and is made mode 0600. Waits up to `patience` while
/// another process holds it, then names that holder: the file holds its holder's PID.
pub fn lock_private(
    folder: &Path,
    name: &str,
    patience: std::time::Duration,
) -> Result<PrivateLock, LockError> {
    let folder = absolute(folder)?;
    let path = folder.join(name);
    let dir = private_folder(&folder)?;
    let io = |source: io::Error| TrustError::Io { path: path.clone(), source };
    let refuse = |why: String| TrustError::Refused(Refused { path: path.clone(), why });
    let flags =
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(&dir, name, flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => return Err(refuse("is a symbolic link".into()).into()),
        Err(e) => return Err(io(e.into()).into()),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?;
    let ft = FileType::from_raw_mode(stat.st_mode);
    if ft != FileType::RegularFile {
        return Err(refuse(format!("is not a regular file (a {})", kind_of(ft))).into());
    }
    if stat.st_uid != euid() || stat.st_nlink != 1 {
        let why = format!(
            "is not a file of uid {} with one name (uid {}, {} names)",
            euid(),
            stat.st_uid,
            stat.st_nlink
        );
        return Err(refuse(why).into());
    }
    if stat.st_mode & 0o077 != 0 {
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o600)).map_err(|e| io(e.into()))?;
    }
    let mut file = File::from(fd);
    if !lock_exclusive(&file, patience).map_err(io)? {
        let mut holder = String::new();
        let _ = (&file).take(32).read_to_string(&mut holder);
        return Err(LockError::Held { path, holder: holder.trim().parse().ok() });
    }
    {
        use std::io::{Seek as _, Write as _};
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
    }
    Ok(PrivateLock { _file: file, path })
}

/// Opens (creating it, mode 0700, when missing) a folder that only this user may enter, in a
/// folder nobody else can write.
fn private_folder(folder: &Path) -> Result<OwnedFd, TrustError> {
    let io = |source: io::Error| TrustError::Io { path: folder.to_path_buf(), source };
    let refuse = |why: String| TrustError::Refused(Refused { path: folder.to_path_buf(), why });
    use std::os::unix::fs::DirBuilderExt as _;
    match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(folder) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(e)),
    }
    check_folder(folder_of(folder))?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(folder, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
            return Err(refuse("is not a folder (a symbolic link or a file)".into()));
        }
        Err(e) => return Err(io(e.into())),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?;
    if stat.st_uid != euid() || stat.st_mode & 0o077 != 0 {
        return Err(refuse(format!(
            "a lock folder must be uid {}'s with mode 0700, so that nobody else can open (and \
             lock) what is in it; it is uid {}'s with mode {:04o}",
            euid(),
            stat.st_uid,
            stat.st_mode & 0o7777
        )));
    }
    Ok(fd)
}
