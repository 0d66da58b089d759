//! Who opens an instance's `output` file: the one rule that `pinctl run` (each start, each
//! adoption, each `reopen-logs`) and `pinctl check` share.
//!
//! The rule is systemd's `StandardOutput=file:` made safe for folders that others can write:
//! - a path whose every folder is root's and lets nobody else write (the sticky bit of `/tmp`
//!   counts only above the file's own folder) cannot be changed under pinctl by anyone but
//!   root, so pinctl opens the file itself, for any `user`: a `user = "mysql"` service logs into
//!   a root-owned `/var/log/db/` as it does under systemd; a file it creates is given to the
//!   instance's user and group, as if the instance had made it;
//! - any other path is opened with the instance's own rights (the writer thread takes the
//!   user's file-system ids, nothing else: see [`pinctl_sys::set_thread_file_identity`]), so a
//!   link or a swapped folder someone placed leads only where that user could write anyway;
//! - an instance that runs as root has no such user to fall back on: its path must be
//!   root's all the way, or the start is refused.
//!
//! Either way the file itself is never a link (`O_NOFOLLOW`), never a FIFO or socket (opened
//! without blocking, then checked), and a regular file must belong to root or the user.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use pinctl_trust::TrustError;
use rustix::fs::{FileType, Mode, OFlags};

/// Who an output file is written for: the instance's user, group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOwner {
    /// The user's name, for messages.
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// Who opens an output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opener {
    /// pinctl, with its own rights: every folder on the path is root's alone. A file it
    /// creates goes to `owner` (`None`: stays root's).
    Supervisor { owner: Option<FileOwner> },
    /// The instance's user: the path passes a folder others may write.
    User(FileOwner),
}

impl Opener {
    /// Who this is, for messages: `pinctl (root)` or ``user `mysql` ``.
    pub fn who(&self) -> String {
        match self {
            Opener::Supervisor { .. } => "pinctl (root)".to_string(),
            Opener::User(o) => format!("user `{}`", o.name),
        }
    }
}

/// Decides who opens `path` for an instance running as `owner` (`None`: as pinctl, root).
/// Looks at the folders on the path each time it is asked: a folder's owner or mode may have
/// changed since the last open.
pub fn opener(path: &Path, owner: Option<&FileOwner>) -> Result<Opener, String> {
    let folder = pinctl_trust::folder_of(path);
    let refused = match pinctl_trust::check_folder(folder) {
        Ok(()) => return Ok(Opener::Supervisor { owner: owner.cloned() }),
        Err(TrustError::Refused(r)) => pinctl_trust::about(folder, &r),
        Err(e) => return Err(format!("cannot look at the folder of `{}`: {e}", path.display())),
    };
    let Some(user) = owner.filter(|o| o.uid != 0) else {
        return Err(format!(
            "refusing output `{}`: {refused}; an instance that runs as root writes its output \
             only where every folder is root's and nobody else may write (or set `user`)",
            path.display()
        ));
    };
    let m = fs::metadata(folder).map_err(|e| format!("`{}`: {e}", folder.display()))?;
    if m.mode() & 0o002 != 0 && m.mode() & 0o1000 == 0 {
        return Err(format!(
            "refusing output `{}`: `{}` is writable by everyone without the sticky bit (mode \
             {:04o}): anyone could replace the file",
            path.display(),
            folder.display(),
            m.mode() & 0o7777
        ));
    }
    Ok(Opener::User(user.clone()))
}

/// Opens `path` for appending as `opener` says, as an instance would open it itself:
/// created with mode 0640, the last name never followed, never blocking on a FIFO, only a
/// regular file of root's or the user's (or a character device of root's, such as
/// `/dev/null`). For [`Opener::User`], the calling thread must already have the user's
/// file-system ids ([`pinctl_sys::set_thread_file_identity`]).
pub fn open(path: &Path, opener: &Opener) -> Result<fs::File, String> {
    let describe = |e: rustix::io::Errno| io::Error::from(e).to_string();
    let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::NOCTTY;
    let flags = flags | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(0o640);
    // Made here, or there already: a file pinctl makes is given to the instance's user.
    let (fd, made) = match rustix::fs::open(path, flags | OFlags::CREATE | OFlags::EXCL, mode) {
        Ok(fd) => (fd, true),
        Err(rustix::io::Errno::EXIST) => {
            (rustix::fs::open(path, flags, mode).map_err(describe)?, false)
        }
        Err(e) => return Err(describe(e)),
    };
    if let (true, Opener::Supervisor { owner: Some(o) }) = (made, opener) {
        let (uid, gid) = (rustix::fs::Uid::from_raw(o.uid), rustix::fs::Gid::from_raw(o.gid));
        rustix::fs::fchown(&fd, Some(uid), Some(gid)).map_err(describe)?;
    }
    let st = rustix::fs::fstat(&fd).map_err(describe)?;
    writable_kind(FileType::from_raw_mode(st.st_mode), st.st_uid, opener)?;
    rustix::fs::fcntl_setfl(&fd, OFlags::APPEND).map_err(describe)?;
    Ok(fs::File::from(fd))
}

/// What `pinctl run` will do with `path` for an instance running as `owner`, found the way
/// `run` finds it but creating nothing: who opens it, or why it cannot be opened.
pub fn check(path: &Path, owner: Option<&FileOwner>) -> Result<String, String> {
    let opener = opener(path, owner)?;
    let looked = match &opener {
        Opener::Supervisor { .. } => may_open(path, &opener),
        // Asked with the user's file rights, on a thread of its own that takes them.
        Opener::User(o) => {
            let (o, p, who) = (o.clone(), path.to_path_buf(), opener.clone());
            std::thread::scope(|s| {
                s.spawn(move || {
                    pinctl_sys::set_thread_file_identity(o.uid, o.gid, &o.groups)
                        .map_err(|e| e.to_string())
                        .and_then(|()| may_open(&p, &who))
                })
                .join()
                .unwrap_or_else(|_| Err("the check's thread failed".to_string()))
            })
        }
    };
    looked.map_err(|e| format!("cannot be opened as {}: {e}", opener.who()))?;
    Ok(match &opener {
        Opener::Supervisor { owner: Some(o) } => format!(
            "opened by pinctl (root) for user `{}`: every folder on its path is root's",
            o.name
        ),
        Opener::Supervisor { owner: None } => {
            "opened by pinctl (root): every folder on its path is root's".to_string()
        }
        Opener::User(o) => {
            format!("opened as user `{}`: a folder on its path is not root's alone", o.name)
        }
    })
}

/// Whether a file of `kind` owned by `uid` may be written for `opener`: a regular file of
/// root's or the instance's user's (only the user's when opened as the user), or a character
/// device of root's such as `/dev/null`. The one rule [`open`] and [`check`] apply.
fn writable_kind(kind: FileType, uid: u32, opener: &Opener) -> Result<(), String> {
    let user = match opener {
        Opener::Supervisor { owner } => owner.as_ref(),
        Opener::User(owner) => Some(owner),
    };
    let allowed = match kind {
        FileType::RegularFile => match opener {
            Opener::Supervisor { .. } => uid == 0 || user.is_some_and(|u| u.uid == uid),
            Opener::User(u) => uid == u.uid,
        },
        FileType::CharacterDevice => uid == 0,
        _ => false,
    };
    if allowed {
        return Ok(());
    }
    let whose = match user {
        Some(u) if u.uid != 0 => format!("root's or user `{}`'s", u.name),
        _ => "root's".to_string(),
    };
    Err(format!("it is not a regular file of {whose} (someone else's file, a FIFO or a socket?)"))
}

/// Whether the calling thread could open `path` as [`open`] does, without creating it: the
/// file, when there, is no link and is writable; else its folder lets it be created.
fn may_open(path: &Path, opener: &Opener) -> Result<(), String> {
    use rustix::fs::{Access, AtFlags, CWD};
    let writable = |p: &Path, how: Access| {
        rustix::fs::accessat(CWD, p, how, AtFlags::EACCESS)
            .map_err(|e| io::Error::from(e).to_string())
    };
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err("it is a symbolic link".to_string()),
        Ok(m) => {
            writable_kind(FileType::from_raw_mode(m.mode()), m.uid(), opener)?;
            writable(path, Access::WRITE_OK)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            writable(pinctl_trust::folder_of(path), Access::WRITE_OK | Access::EXEC_OK)
        }
        Err(e) => Err(e.to_string()),
    }
}
