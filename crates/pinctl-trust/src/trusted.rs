//! What a supervisor running as root keeps for itself, on top of the [walk](crate::walk):
//! [`read_trusted`] (a file trusted or refused: its state file and records), [`check_folder`]
//! (where it writes: its socket and state folders), [`check_socket`] (a path replaced only
//! when it is a socket of root's), with [`set_aside`] for a file it refuses (kept for a
//! person, never deleted).

use std::io;
use std::path::{Path, PathBuf};

use crate::walk::{
    CheckedRead, CheckedReadError, Untrusted, folder_checked, read_checked, trusted_owner,
};

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
pub(crate) fn absolute(path: &Path) -> Result<PathBuf, TrustError> {
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
