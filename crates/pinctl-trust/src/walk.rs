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
pub(crate) fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == rustix::process::geteuid().as_raw()
}

pub(crate) fn kind_of(ft: FileType) -> &'static str {
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
