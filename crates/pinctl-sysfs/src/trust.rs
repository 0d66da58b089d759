//! Reading a small file that another user may have written (a service's PID file), the way a
//! program running as root must: the path is walked one name at a time from the root, so
//! each folder and each symbolic link on the way is seen with its owner and mode before it is
//! used; the file itself is opened without following a link and without blocking (a FIFO
//! there is an error, not a wait), must be a regular file, and is read up to a bound.
//!
//! What the walk finds decides whether the content can be believed, as systemd and OpenSSH
//! decide it (systemd's PID-file rule, OpenSSH's `StrictModes`): it can when the file, every
//! folder on the way and every link followed belong to root or to the user pinctl runs as,
//! the file is writable by its owner alone, its folder too, and no folder above lets others
//! write except with the sticky bit (`/tmp`: there nobody but an entry's owner can rename or
//! remove it). Anything else is [`Untrusted`]: the file was read, but another user could have
//! chosen what it says, and the caller must prove it some other way or refuse it.
//!
//! On top of the walk, what a supervisor running as root keeps for itself: [`read_trusted`]
//! (a file trusted or refused, its state file), [`check_folder`] (where it writes, its socket
//! and state folders), [`check_socket`] (a path replaced only when it is a socket of root's)
//! and [`lock_private`] (its locks, on files nobody else can open), with [`set_aside`] for a
//! record it refuses (kept for a person, never deleted).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

/// Symbolic links followed in one walk at most (the kernel's own limit, `MAXSYMLINKS`).
pub const MAX_LINKS: u32 = 40;

/// Why a file's content cannot be believed on its own: the first such thing met on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Untrusted {
    /// The file belongs to another user.
    FileOwner { uid: u32 },
    /// Group or others may write the file.
    FileWritable { mode: u32 },
    /// A folder on the way belongs to another user.
    FolderOwner { folder: PathBuf, uid: u32 },
    /// A folder on the way lets group or others write: the file's own folder, or one above
    /// it without the sticky bit.
    FolderWritable { folder: PathBuf, mode: u32 },
    /// A symbolic link on the way was placed by another user.
    Link { link: PathBuf, uid: u32 },
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Untrusted::FileOwner { uid } => write!(f, "owned by uid {uid}, not root"),
            Untrusted::FileWritable { mode } => {
                write!(f, "writable by group or others (mode {:04o})", mode & 0o7777)
            }
            Untrusted::FolderOwner { folder, uid } => {
                write!(f, "in `{}`, a folder owned by uid {uid}, not root", folder.display())
            }
            Untrusted::FolderWritable { folder, mode } => write!(
                f,
                "in `{}`, a folder group or others may write (mode {:04o})",
                folder.display(),
                mode & 0o7777
            ),
            Untrusted::Link { link, uid } => write!(
                f,
                "reached through `{}`, a symbolic link placed by uid {uid}, not root",
                link.display()
            ),
        }
    }
}

/// Why a file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckedReadError {
    /// The file, or a folder on the way, does not exist.
    #[error("`{}` does not exist", path.display())]
    NotFound { path: PathBuf },
    /// The file's own name is a symbolic link: never followed.
    #[error("`{}` is a symbolic link: it is not followed", path.display())]
    Link { path: PathBuf },
    /// The file is a FIFO, socket, device or folder.
    #[error("`{}` is not a regular file (a {kind})", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    /// A name on the way is not a folder.
    #[error("`{}` is not a folder", path.display())]
    NotAFolder { path: PathBuf },
    /// More than [`MAX_LINKS`] links on the way.
    #[error("`{}`: more than {MAX_LINKS} symbolic links on the way", path.display())]
    TooManyLinks { path: PathBuf },
    /// The file holds more than the bound.
    #[error("`{}` holds more than {max} bytes", path.display())]
    TooLarge { path: PathBuf, max: usize },
    /// Any other failure of a call on the way.
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// What [`read_checked`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedRead {
    /// The file's bytes, at most the bound.
    pub bytes: Vec<u8>,
    /// `None` when root (or the user pinctl runs as) alone could have chosen them.
    pub untrusted: Option<Untrusted>,
}

/// Whether `uid` may be believed: root, or the user this process runs as.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == rustix::process::geteuid().as_raw()
}

fn kind_of(ft: FileType) -> &'static str {
    match ft {
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Directory => "folder",
        FileType::Symlink => "symbolic link",
        _ => "special file",
    }
}

/// A folder reached on the way, open for the names below it.
struct Folder {
    fd: OwnedFd,
    /// Where it was reached, for messages (links followed, so not always the path given).
    shown: PathBuf,
    mode: u32,
}

/// Reads the file at `path` (absolute, taken under `root`: `/` on the live machine) as the
/// module says, at most `max` bytes. Links on the way are followed inside `root` (an absolute
/// target starts again at `root`, `..` never climbs above it); the file's own name must not
/// be a link.
pub fn read_checked(root: &Path, path: &Path, max: usize) -> Result<CheckedRead, CheckedReadError> {
    let mut walk = Walk::start(root, path)?;
    let Some(name) = walk.walk_to_last_name()? else {
        // No name at all: the path was the root itself.
        return Err(CheckedReadError::NotRegular { path: path.to_path_buf(), kind: "folder" });
    };
    let folder = walk.folders.last().expect("the root stays");
    let here = folder.shown.join(&name);
    if folder.mode & 0o022 != 0 {
        note(
            &mut walk.untrusted,
            Untrusted::FolderWritable { folder: folder.shown.clone(), mode: folder.mode },
        );
    }
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(&folder.fd, name.as_os_str(), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => return Err(CheckedReadError::Link { path: here }),
        // A socket cannot be opened at all.
        Err(rustix::io::Errno::NXIO) => {
            return Err(CheckedReadError::NotRegular { path: here, kind: "socket" });
        }
        Err(e) => return Err(io_at(&here)(e)),
    };
    let stat = rustix::fs::fstat(&fd).map_err(io_at(&here))?;
    let ft = FileType::from_raw_mode(stat.st_mode);
    if ft != FileType::RegularFile {
        return Err(CheckedReadError::NotRegular { path: here, kind: kind_of(ft) });
    }
    if !trusted_owner(stat.st_uid) {
        note(&mut walk.untrusted, Untrusted::FileOwner { uid: stat.st_uid });
    }
    if stat.st_mode & 0o022 != 0 {
        note(&mut walk.untrusted, Untrusted::FileWritable { mode: stat.st_mode });
    }
    let mut bytes = Vec::new();
    File::from(fd)
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| CheckedReadError::Io { path: here.clone(), source })?;
    if bytes.len() > max {
        return Err(CheckedReadError::TooLarge { path: here, max });
    }
    Ok(CheckedRead { bytes, untrusted: walk.untrusted })
}

/// Walks to the folder at `path` (under `root`) as [`read_checked`] walks to a file's: the
/// first thing on the way another user could have chosen, if any. The folder itself must not
/// let group or others write at all (sticky or not): whoever may write there may place a file
/// or link beside what pinctl keeps there.
pub fn folder_checked(root: &Path, path: &Path) -> Result<Option<Untrusted>, CheckedReadError> {
    let mut walk = Walk::start(root, path)?;
    if let Some(last) = walk.walk_to_last_name()? {
        walk.names.push_back(last);
        walk.step()?;
    }
    let folder = walk.folders.last().expect("the root stays");
    if folder.mode & 0o022 != 0 {
        let why = Untrusted::FolderWritable { folder: folder.shown.clone(), mode: folder.mode };
        note(&mut walk.untrusted, why);
    }
    Ok(walk.untrusted)
}

/// Keeps the first reason not to trust what a walk found.
fn note(untrusted: &mut Option<Untrusted>, why: Untrusted) {
    untrusted.get_or_insert(why);
}

fn io_at(at: &Path) -> impl Fn(rustix::io::Errno) -> CheckedReadError + use<> {
    let at = at.to_path_buf();
    move |e: rustix::io::Errno| {
        let source = io::Error::from(e);
        match source.kind() {
            io::ErrorKind::NotFound => CheckedReadError::NotFound { path: at.clone() },
            io::ErrorKind::NotADirectory => CheckedReadError::NotAFolder { path: at.clone() },
            _ => CheckedReadError::Io { path: at.clone(), source },
        }
    }
}

/// A walk from the root, one name at a time, each folder and link seen before it is used.
struct Walk {
    folders: Vec<Folder>,
    names: VecDeque<OsString>,
    links: u32,
    /// The path walked, for messages.
    path: PathBuf,
    /// The first thing another user could have chosen.
    untrusted: Option<Untrusted>,
}

impl Walk {
    fn start(root: &Path, path: &Path) -> Result<Walk, CheckedReadError> {
        let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let top = rustix::fs::open(root, dir_flags, Mode::empty()).map_err(io_at(root))?;
        let top_mode = rustix::fs::fstat(&top).map_err(io_at(root))?;
        let mut walk = Walk {
            folders: vec![Folder { fd: top, shown: PathBuf::from("/"), mode: top_mode.st_mode }],
            names: names_of(path),
            links: 0,
            path: path.to_path_buf(),
            untrusted: None,
        };
        if !trusted_owner(top_mode.st_uid) {
            note(
                &mut walk.untrusted,
                Untrusted::FolderOwner { folder: PathBuf::from("/"), uid: top_mode.st_uid },
            );
        }
        Ok(walk)
    }

    /// Walks every folder (and link) up to the last name, and returns that name (`None`: the
    /// path names the root).
    fn walk_to_last_name(&mut self) -> Result<Option<OsString>, CheckedReadError> {
        loop {
            match self.names.len() {
                0 => return Ok(None),
                1 if self.names[0] != ".." => return Ok(self.names.pop_front()),
                _ => self.step()?,
            }
        }
    }

    /// Takes one name: `..`, a link (its target's names go first) or a folder.
    fn step(&mut self) -> Result<(), CheckedReadError> {
        let Some(name) = self.names.pop_front() else { return Ok(()) };
        if name == ".." {
            if self.folders.len() > 1 {
                self.folders.pop();
            }
            return Ok(());
        }
        let folder = self.folders.last().expect("the root stays");
        let here = folder.shown.join(&name);
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&folder.fd, name.as_os_str(), flags, Mode::empty())
            .map_err(io_at(&here))?;
        let stat = rustix::fs::fstat(&fd).map_err(io_at(&here))?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                if !trusted_owner(stat.st_uid) {
                    note(
                        &mut self.untrusted,
                        Untrusted::Link { link: here.clone(), uid: stat.st_uid },
                    );
                }
                self.links += 1;
                if self.links > MAX_LINKS {
                    return Err(CheckedReadError::TooManyLinks { path: self.path.clone() });
                }
                // Read from the folder, not through `fd`: a link's folder that others could
                // change is already untrusted, and one nobody else can change keeps the link.
                let folder = self.folders.last().expect("the root stays");
                let target = rustix::fs::readlinkat(&folder.fd, name.as_os_str(), Vec::new())
                    .map_err(io_at(&here))?;
                let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                if target.is_absolute() {
                    self.folders.truncate(1);
                }
                for n in names_of(&target).into_iter().rev() {
                    self.names.push_front(n);
                }
            }
            FileType::Directory => {
                if !trusted_owner(stat.st_uid) {
                    note(
                        &mut self.untrusted,
                        Untrusted::FolderOwner { folder: here.clone(), uid: stat.st_uid },
                    );
                }
                // Above the file's own folder, the sticky bit keeps others from renaming or
                // removing what is not theirs (checked again if this is the file's folder).
                if stat.st_mode & 0o022 != 0 && stat.st_mode & 0o1000 == 0 {
                    note(
                        &mut self.untrusted,
                        Untrusted::FolderWritable { folder: here.clone(), mode: stat.st_mode },
                    );
                }
                self.folders.push(Folder { fd, shown: here, mode: stat.st_mode });
            }
            _ => return Err(CheckedReadError::NotAFolder { path: here }),
        }
        Ok(())
    }
}

/// This process's effective user id: the owner every trusted file must have (besides root).
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The folder that holds `path` (`.` for a bare name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A path pinctl will not act on, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}`: {why}", path.display())]
pub struct Refused {
    /// The file, folder or socket refused.
    pub path: PathBuf,
    /// What is wrong with it (`owned by uid 1000, not root`).
    pub why: String,
}

/// What `refused` says about `path`: only why, when it is about `path` itself; else which
/// path and why (a folder on the way).
pub fn about(path: &Path, refused: &Refused) -> String {
    if refused.path == path { refused.why.clone() } else { refused.to_string() }
}

/// Why [`read_trusted`] or [`check_folder`] refused, or could not look.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// `path` made absolute against the working folder (a walk starts at the root).
fn absolute(path: &Path) -> Result<PathBuf, TrustError> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(path))
        .map_err(|source| TrustError::Io { path: path.to_path_buf(), source })
}

/// What `u` says of `path`, without repeating `path` when it is about `path` itself.
fn refused(path: &Path, u: &Untrusted) -> TrustError {
    let why = match u {
        Untrusted::FolderOwner { folder, uid } if folder == path => {
            format!("owned by uid {uid}, not root")
        }
        Untrusted::FolderWritable { folder, mode } if folder == path => {
            format!("writable by group or others (mode {:04o})", mode & 0o7777)
        }
        _ => u.to_string(),
    };
    TrustError::Refused(Refused { path: path.to_path_buf(), why })
}

/// A failed walk as a refusal (the path is not what a trusted file or folder is) or an I/O
/// error (it could not be looked at).
fn refused_by(path: &Path, e: CheckedReadError) -> TrustError {
    match e {
        CheckedReadError::Io { path, source } => TrustError::Io { path, source },
        CheckedReadError::NotFound { path } => {
            TrustError::Io { path, source: io::ErrorKind::NotFound.into() }
        }
        other => {
            let why = other.to_string();
            // The messages name the path first (`` `p` is ... ``): keep what follows.
            let why = why.split_once("` ").map_or(why.clone(), |(_, w)| w.to_string());
            TrustError::Refused(Refused { path: path.to_path_buf(), why })
        }
    }
}

/// Checks the live machine's folder `dir` and every folder above it (see the module
/// documentation; `dir` itself must not let group or others write at all). A folder that does
/// not exist is an [`TrustError::Io`] of kind `NotFound`.
pub fn check_folder(dir: &Path) -> Result<(), TrustError> {
    let dir = absolute(dir)?;
    match folder_checked(Path::new("/"), &dir) {
        Ok(None) => Ok(()),
        Ok(Some(u)) => Err(refused(&dir, &u)),
        Err(e) => Err(refused_by(&dir, e)),
    }
}

/// Reads the live machine's file at `path`, up to `max` bytes, only when nobody but root (or
/// this user) could have written it: `Ok(None)` when it does not exist, a [`Refused`] when it
/// is not trusted, a link, not a regular file or too large.
pub fn read_trusted(path: &Path, max: usize) -> Result<Option<Vec<u8>>, TrustError> {
    let path = absolute(path)?;
    match read_checked(Path::new("/"), &path, max) {
        Ok(CheckedRead { bytes, untrusted: None }) => Ok(Some(bytes)),
        Ok(CheckedRead { untrusted: Some(u), .. }) => Err(refused(&path, &u)),
        Err(CheckedReadError::NotFound { .. }) => Ok(None),
        Err(e) => Err(refused_by(&path, e)),
    }
}

/// Checks what is at `path` before it is replaced or trusted as a socket: `Ok(true)` when a
/// socket owned by root or this user is there, `Ok(false)` when nothing is there, an error for
/// anything else (a regular file, a link, someone else's socket): such a path is never
/// removed.
pub fn check_socket(path: &Path) -> Result<bool, TrustError> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(TrustError::Io { path: path.to_path_buf(), source }),
    };
    let refuse = |why: String| TrustError::Refused(Refused { path: path.to_path_buf(), why });
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
        return Err(refuse(format!("{what}, not a socket")));
    }
    if !trusted_owner(m.uid()) {
        return Err(refuse(format!("a socket owned by uid {}, not root", m.uid())));
    }
    Ok(true)
}

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

/// Moves a file pinctl refused to act on aside, beside it, as
/// `NAME.refused-<why>-<seconds since 1970>` (never over another file), so that what it holds
/// is kept for a person to look at: the new path.
pub fn set_aside(path: &Path, why: &str) -> io::Result<PathBuf> {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    for n in 0..100u32 {
        let mut aside = name.to_os_string();
        aside.push(format!(".refused-{why}-{seconds}"));
        if n > 0 {
            aside.push(format!("-{n}"));
        }
        let to = path.with_file_name(aside);
        let cwd = rustix::fs::CWD;
        match rustix::fs::renameat_with(cwd, path, cwd, &to, rustix::fs::RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(to),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no free name to set it aside under"))
}

/// The names of a path, `..` kept (the walk resolves it), `/` and `.` dropped.
fn names_of(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .filter(|n| !n.as_bytes().is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    use super::*;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A root with `run/db/db.pid` (folders 0755, file 0644): trusted.
    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("run/db")).unwrap();
        chmod(&d.path().join("run"), 0o755);
        chmod(&d.path().join("run/db"), 0o755);
        std::fs::write(d.path().join("run/db/db.pid"), "100\n").unwrap();
        chmod(&d.path().join("run/db/db.pid"), 0o644);
        d
    }

    fn read(root: &Path, path: &str) -> Result<CheckedRead, CheckedReadError> {
        read_checked(root, Path::new(path), 64)
    }

    #[test]
    fn a_file_only_root_could_write_is_trusted() {
        let d = tree();
        let r = read(d.path(), "/run/db/db.pid").unwrap();
        assert_eq!((r.bytes.as_slice(), r.untrusted), (&b"100\n"[..], None));
        // A link root placed is followed, relative or absolute (inside the root).
        symlink("db", d.path().join("run/alias")).unwrap();
        symlink("/run/db", d.path().join("run/abs")).unwrap();
        assert_eq!(read(d.path(), "/run/alias/db.pid").unwrap().untrusted, None);
        assert_eq!(read(d.path(), "/run/abs/../db/db.pid").unwrap().untrusted, None);
        // `..` never climbs above the root.
        assert_eq!(read(d.path(), "/../../run/db/db.pid").unwrap().untrusted, None);
    }

    #[test]
    fn writable_files_and_folders_are_untrusted() {
        let d = tree();
        chmod(&d.path().join("run/db/db.pid"), 0o666);
        let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
        assert_eq!(why, Untrusted::FileWritable { mode: 0o100666 });
        assert_eq!(why.to_string(), "writable by group or others (mode 0666)");
        chmod(&d.path().join("run/db/db.pid"), 0o644);
        // The file's own folder: writable by others, even sticky, is not safe.
        chmod(&d.path().join("run/db"), 0o1777);
        let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
        assert!(
            why.to_string().starts_with("in `/run/db`, a folder group or others may write"),
            "{why}"
        );
        // A folder above it: sticky keeps others from renaming what is not theirs...
        chmod(&d.path().join("run/db"), 0o755);
        chmod(&d.path().join("run"), 0o1777);
        assert_eq!(read(d.path(), "/run/db/db.pid").unwrap().untrusted, None);
        // ...without it, `db` could be replaced.
        chmod(&d.path().join("run"), 0o775);
        let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
        assert_eq!(why, Untrusted::FolderWritable { folder: "/run".into(), mode: 0o40775 });
    }

    #[test]
    fn files_and_links_of_other_users_are_untrusted() {
        // Giving a file to another user takes root, as the rule is for root.
        let euid = rustix::process::geteuid().as_raw();
        assert_eq!(euid, 0, "this test gives files to uid 65534: run it as root");
        let d = tree();
        let pid = d.path().join("run/db/db.pid");
        std::os::unix::fs::lchown(&pid, Some(65534), None).unwrap();
        let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
        assert_eq!(why.to_string(), "owned by uid 65534, not root");
        std::os::unix::fs::lchown(&pid, Some(0), None).unwrap();
        std::os::unix::fs::lchown(d.path().join("run/db"), Some(65534), None).unwrap();
        let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
        assert_eq!(why, Untrusted::FolderOwner { folder: "/run/db".into(), uid: 65534 });
        std::os::unix::fs::lchown(d.path().join("run/db"), Some(0), None).unwrap();
        // A link someone else placed: followed, but what it leads to is not believed.
        let link = d.path().join("run/elsewhere");
        symlink("db", &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), None).unwrap();
        let why = read(d.path(), "/run/elsewhere/db.pid").unwrap().untrusted.unwrap();
        assert_eq!(why, Untrusted::Link { link: "/run/elsewhere".into(), uid: 65534 });
    }

    #[test]
    fn links_fifos_devices_and_large_files_are_refused_without_blocking() {
        let d = tree();
        symlink("db.pid", d.path().join("run/db/last.pid")).unwrap();
        assert!(matches!(read(d.path(), "/run/db/last.pid"), Err(CheckedReadError::Link { .. })));
        // A FIFO with no writer: opened without blocking, refused.
        let fifo = d.path().join("run/db/fifo.pid");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let e = read(d.path(), "/run/db/fifo.pid").unwrap_err();
        assert_eq!(e.to_string(), format!("`/run/db/fifo.pid` is not a regular file (a FIFO)"));
        let e = read_checked(Path::new("/"), Path::new("/dev/null"), 64).unwrap_err();
        assert!(matches!(e, CheckedReadError::NotRegular { kind: "character device", .. }));
        std::fs::write(d.path().join("run/db/big.pid"), "1".repeat(65)).unwrap();
        assert!(matches!(
            read(d.path(), "/run/db/big.pid"),
            Err(CheckedReadError::TooLarge { max: 64, .. })
        ));
        assert!(matches!(
            read(d.path(), "/run/none/x.pid"),
            Err(CheckedReadError::NotFound { .. })
        ));
        assert!(matches!(
            read(d.path(), "/run/db/db.pid/x"),
            Err(CheckedReadError::NotAFolder { .. })
        ));
        // A loop of links ends.
        symlink("loop", d.path().join("run/loop")).unwrap();
        assert!(matches!(
            read(d.path(), "/run/loop/db.pid"),
            Err(CheckedReadError::TooManyLinks { .. })
        ));
    }

    #[test]
    fn a_supervisor_reads_only_what_root_alone_could_write() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("state.json");
        std::fs::write(&f, "{}").unwrap();
        chmod(&f, 0o600);
        assert_eq!(read_trusted(&f, 100).unwrap().unwrap(), b"{}");
        assert!(read_trusted(&dir.path().join("missing"), 100).unwrap().is_none());
        assert!(read_trusted(&dir.path().join("no/such/folder/x"), 100).unwrap().is_none());
        chmod(&f, 0o666);
        let e = read_trusted(&f, 100).unwrap_err().to_string();
        assert!(e.ends_with("state.json`: writable by group or others (mode 0666)"), "{e}");
        chmod(&f, 0o600);
        let e = read_trusted(&f, 1).unwrap_err().to_string();
        assert!(e.ends_with("holds more than 1 bytes"), "{e}");
        symlink(&f, dir.path().join("link")).unwrap();
        let e = read_trusted(&dir.path().join("link"), 100).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link"), "{e}");
        chmod(dir.path(), 0o777);
        let e = read_trusted(&f, 100).unwrap_err().to_string();
        assert!(e.contains("a folder group or others may write (mode 0777)"), "{e}");
        let e = check_folder(dir.path()).unwrap_err().to_string();
        assert!(e.ends_with("`: writable by group or others (mode 0777)"), "{e}");
        chmod(dir.path(), 0o700);
        check_folder(dir.path()).unwrap();
        // /tmp, root's and sticky, may be above a trusted folder but not hold state itself.
        assert!(check_folder(Path::new("/tmp")).unwrap_err().to_string().contains("mode 1777"));
    }

    #[test]
    fn only_sockets_of_root_are_sockets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pinctl.sock");
        assert!(!check_socket(&p).unwrap());
        std::fs::write(&p, "precious").unwrap();
        let e = check_socket(&p).unwrap_err().to_string();
        assert!(e.ends_with("a regular file, not a socket"), "{e}");
        std::fs::remove_file(&p).unwrap();
        let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        assert!(check_socket(&p).unwrap());
        symlink(&p, dir.path().join("link.sock")).unwrap();
        let e = check_socket(&dir.path().join("link.sock")).unwrap_err().to_string();
        assert!(e.ends_with("a symbolic link, not a socket"), "{e}");
    }

    #[test]
    fn private_locks_live_where_nobody_else_can_open_them() {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o755);
        let locks = dir.path().join("locks");
        let a = lock_private(&locks, "db.lock", LOCK_PATIENCE).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!((mode(&locks), mode(a.path())), (0o700, 0o600));
        assert_eq!(std::fs::read_to_string(a.path()).unwrap(), format!("{}\n", std::process::id()));
        // A second taker waits, then names the holder.
        match lock_private(&locks, "db.lock", std::time::Duration::from_millis(30)) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, Some(std::process::id())),
            other => panic!("{other:?}"),
        }
        drop(a);
        // A lock file others could read is made private before it is used.
        chmod(&locks.join("db.lock"), 0o644);
        let b = lock_private(&locks, "db.lock", LOCK_PATIENCE).unwrap();
        assert_eq!(mode(b.path()), 0o600);
        // A folder others may enter is not a lock folder: what is in it could be open already.
        chmod(&locks, 0o755);
        let e = lock_private(&locks, "other.lock", LOCK_PATIENCE).unwrap_err().to_string();
        assert!(e.contains("with mode 0755"), "{e}");
        chmod(&locks, 0o700);
        // Nor a link, in place of the folder or the file.
        symlink(&locks, dir.path().join("link")).unwrap();
        let e = lock_private(&dir.path().join("link"), "x.lock", LOCK_PATIENCE).unwrap_err();
        assert!(e.to_string().contains("is not a folder"), "{e}");
        symlink(locks.join("db.lock"), locks.join("y.lock")).unwrap();
        let e = lock_private(&locks, "y.lock", LOCK_PATIENCE).unwrap_err();
        assert!(e.to_string().contains("is a symbolic link"), "{e}");
        // In a folder others may write, nothing is locked.
        chmod(dir.path(), 0o777);
        let e = lock_private(&locks, "db2.lock", LOCK_PATIENCE).unwrap_err();
        assert!(e.to_string().contains("writable by group or others"), "{e}");
        chmod(dir.path(), 0o700);
    }

    #[test]
    fn a_file_set_aside_is_kept_under_a_name_that_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("db.irq.json");
        std::fs::write(&f, "first").unwrap();
        let one = set_aside(&f, "damaged").unwrap();
        std::fs::write(&f, "second").unwrap();
        let two = set_aside(&f, "damaged").unwrap();
        assert_ne!(one, two, "never over another");
        assert!(!f.exists());
        let name = one.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("db.irq.json.refused-damaged-"), "{name}");
        assert_eq!(std::fs::read_to_string(&one).unwrap(), "first");
        assert_eq!(std::fs::read_to_string(&two).unwrap(), "second");
    }

    #[test]
    fn a_lock_held_elsewhere_is_waited_for_then_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let a = File::create(&path).unwrap();
        let b = File::open(&path).unwrap();
        assert!(lock_exclusive(&a, LOCK_PATIENCE).unwrap());
        assert!(!lock_exclusive(&b, std::time::Duration::from_millis(30)).unwrap());
        drop(a);
        assert!(lock_exclusive(&b, std::time::Duration::ZERO).unwrap());
    }
}
