//! The FIFOs the instances write into: one folder of them beside the supervisor's state file.

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, FileType, Mode, OFlags};

/// How many bytes an instance's FIFO holds: the most an unprivileged pipe may, so that an
/// instance writes on while its writer is between two reads, and each read takes much at once.
const FIFO_BYTES: usize = 1 << 20;

/// The FIFOs of a supervisor's instances: one folder beside its state file.
#[derive(Debug, Clone)]
pub struct Fifos {
    dir: PathBuf,
    /// Where pinctl before 0.1 kept them (`db.state.json` -> `db.state.output`): read for an
    /// adoption only, when the instance's FIFO is not in `dir`.
    legacy: Option<PathBuf>,
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn refused(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, what)
}

impl Fifos {
    /// The folder for the supervisor whose state file is `state_file`, named after the whole
    /// file name (`/run/pinctl/db.state.json` -> `/run/pinctl/db.state.json.output`), so
    /// that two state files (`X` and `X.json`) never share one.
    pub fn beside(state_file: &Path) -> Fifos {
        let name = state_file.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let legacy = name
            .strip_suffix(".json")
            .map(|stem| state_file.with_file_name(format!("{stem}.output")));
        Fifos { dir: state_file.with_file_name(format!("{name}.output")), legacy }
    }

    /// The FIFO of `instance` (a name checked to be one path component).
    pub fn path(&self, instance: &str) -> PathBuf {
        self.dir.join(instance)
    }

    /// The folder, made (mode 0700) when missing; one that is there must be a folder of this
    /// user's that nobody else may write, not a link.
    fn ensure(&self) -> io::Result<()> {
        match fs::DirBuilder::new().mode(0o700).create(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        check_folder(&self.dir)
    }

    /// A new FIFO for `instance`: the end the supervisor reads (not blocking), and the end
    /// the instance gets as its stdout and stderr (blocking, as a pipe's). An earlier FIFO of
    /// the instance is replaced; anything else at its path is refused.
    pub fn create(&self, instance: &str) -> io::Result<(OwnedFd, OwnedFd)> {
        self.ensure()?;
        let path = self.path(instance);
        remove_fifo(&path)?;
        rustix::fs::mkfifoat(CWD, &path, Mode::from_raw_mode(0o600))?;
        // The reader first, so that opening the writer does not wait for one.
        let reader = open_reader(&path)?;
        let writer = rustix::fs::open(
            &path,
            OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if rustix::fs::fstat(&writer).map(|st| FileType::from_raw_mode(st.st_mode))?
            != FileType::Fifo
        {
            return Err(refused(format!("`{}` is not the FIFO pinctl made", path.display())));
        }
        rustix::fs::fcntl_setfl(&writer, OFlags::empty())?;
        // A smaller FIFO only costs speed.
        let _ = rustix::pipe::fcntl_setpipe_size(&reader, FIFO_BYTES);
        Ok((reader, writer))
    }

    /// The FIFO of an instance an earlier supervisor started, opened for reading (not
    /// blocking); `None` when it has none (started by a pinctl that relayed through a pipe).
    pub fn reopen(&self, instance: &str) -> Option<io::Result<OwnedFd>> {
        let (dir, m) = std::iter::once(&self.dir)
            .chain(&self.legacy)
            .find_map(|dir| Some((dir, fs::symlink_metadata(dir.join(instance)).ok()?)))?;
        let path = dir.join(instance);
        Some(check_folder(dir).and_then(|()| {
            if !m.file_type().is_fifo() || m.uid() != euid() || m.mode() & 0o077 != 0 {
                return Err(refused(format!(
                    "`{}` is not a FIFO of pinctl's: its output is not read",
                    path.display()
                )));
            }
            open_reader(&path)
        }))
    }

    /// Removes the FIFO of `instance` (it is gone from the file).
    pub fn remove(&self, instance: &str) {
        let _ = remove_fifo(&self.path(instance));
    }

    /// Gives the FIFO of `from` the name `to` (a reload renamed the instance; its process
    /// keeps writing into it).
    pub fn rename(&self, from: &str, to: &str) {
        let (from, to) = (self.path(from), self.path(to));
        if fs::symlink_metadata(&from).is_ok_and(|m| m.file_type().is_fifo() && m.uid() == euid())
            && remove_fifo(&to).is_ok()
        {
            let _ = fs::rename(from, to);
        }
    }

    /// Removes every FIFO and the folder (the supervisor stopped its instances), and the
    /// legacy folder's once it is empty.
    pub fn remove_all(&self) {
        for dir in std::iter::once(&self.dir).chain(&self.legacy) {
            if check_folder(dir).is_err() {
                continue;
            }
            if let Ok(entries) = fs::read_dir(dir) {
                for e in entries.flatten() {
                    let _ = remove_fifo(&e.path());
                }
            }
            let _ = fs::remove_dir(dir);
        }
    }
}

/// A folder of this user's that nobody else may write, not a link.
fn check_folder(dir: &Path) -> io::Result<()> {
    let m = fs::symlink_metadata(dir)?;
    if !m.is_dir() || m.uid() != euid() || m.mode() & 0o022 != 0 {
        return Err(refused(format!(
            "`{}` is not a folder of pinctl's that only it may write (a link, another user's, \
             or writable by others)",
            dir.display()
        )));
    }
    Ok(())
}

fn open_reader(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    Ok(rustix::fs::open(path, flags, Mode::empty())?)
}

/// Removes a FIFO of this user's at `path`; nothing there is fine; anything else is refused.
fn remove_fifo(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.file_type().is_fifo() && m.uid() == euid() => fs::remove_file(path),
        Ok(_) => Err(refused(format!(
            "`{}` is not a FIFO of pinctl's: left alone, and the instance not started",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_are_made_replaced_and_refused_where_something_else_is() {
        let d = tempfile::tempdir().unwrap();
        let fifos = Fifos::beside(&d.path().join("db.state.json"));
        assert_eq!(fifos.dir, d.path().join("db.state.json.output"));
        let (_reader, _writer) = fifos.create("db-0").unwrap();
        let m = fs::symlink_metadata(fifos.path("db-0")).unwrap();
        assert!(m.file_type().is_fifo());
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(&fifos.dir).unwrap().mode() & 0o777, 0o700);
        // Made again for the next start; reopened for an adoption.
        let (_r, _w) = fifos.create("db-0").unwrap();
        assert!(fifos.reopen("db-0").unwrap().is_ok());
        assert!(fifos.reopen("db-1").is_none());
        // A file someone put at an instance's path is neither removed nor read.
        fs::write(fifos.path("db-2"), "not a fifo").unwrap();
        assert!(fifos.create("db-2").is_err());
        assert!(fifos.reopen("db-2").unwrap().is_err());
        assert_eq!(fs::read_to_string(fifos.path("db-2")).unwrap(), "not a fifo");
        fs::remove_file(fifos.path("db-2")).unwrap();
        // A folder others may write is refused.
        fs::set_permissions(&fifos.dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        assert!(fifos.create("db-0").is_err());
        fs::set_permissions(&fifos.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        fifos.remove_all();
        assert!(!fifos.dir.exists());
    }

    #[test]
    fn two_state_files_that_differ_by_json_never_share_a_fifo_folder() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (Fifos::beside(&d.path().join("x.json")), Fifos::beside(&d.path().join("x")));
        assert_ne!(a.dir, b.dir);
        let (_ra, _wa) = a.create("web").unwrap();
        let (_rb, _wb) = b.create("web").unwrap();
        b.remove_all();
        assert!(
            fs::symlink_metadata(a.path("web")).is_ok_and(|m| m.file_type().is_fifo()),
            "stopping one supervisor left the other's FIFO alone"
        );
    }

    #[test]
    fn an_instance_of_an_older_pinctl_is_read_from_the_old_folder() {
        let d = tempfile::tempdir().unwrap();
        let old = d.path().join("db.output");
        fs::DirBuilder::new().mode(0o700).create(&old).unwrap();
        rustix::fs::mkfifoat(CWD, old.join("db-0"), Mode::from_raw_mode(0o600)).unwrap();
        let fifos = Fifos::beside(&d.path().join("db.json"));
        // Someone (the instance) holds the write end; the reader opens without waiting.
        let _w = rustix::fs::open(old.join("db-0"), OFlags::RDWR, Mode::empty()).unwrap();
        assert!(fifos.reopen("db-0").unwrap().is_ok());
        fifos.remove_all();
        assert!(!old.exists());
    }
}
