//! Files written whole or not at all: a temporary file in the destination's folder, written,
//! fsynced, then renamed over the destination (and the folder fsynced). A failure half-way
//! (disk full) leaves the old file in place; a symbolic link at the destination is replaced,
//! never followed. Captures, emitted units and the supervisor's state file all go through it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file written and synced beside its destination, not yet in place. Dropping it without
/// [`StagedFile::commit`] removes it, so a set of files is all-or-none: stage every one, then
/// commit them.
#[derive(Debug)]
pub struct StagedFile {
    tmp: tempfile::NamedTempFile,
    dest: PathBuf,
}

impl StagedFile {
    /// A staged file for `dest`, to be filled through [`StagedFile::file`]; mode 0644 before
    /// the umask, as `File::create` gives.
    pub fn new(dest: &Path) -> io::Result<StagedFile> {
        StagedFile::with_mode(dest, 0o644)
    }

    /// A staged file for `dest` created with permission bits `mode` (before the umask): 0600
    /// for what only root may read.
    pub fn with_mode(dest: &Path, mode: u32) -> io::Result<StagedFile> {
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = dest
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
            .tempfile_in(dir)?;
        Ok(StagedFile { tmp, dest: dest.to_path_buf() })
    }

    /// Stages `bytes` for `dest`, synced to disk.
    pub fn with_contents(dest: &Path, bytes: &[u8]) -> io::Result<StagedFile> {
        let mut staged = StagedFile::new(dest)?;
        staged.file().write_all(bytes)?;
        Ok(staged)
    }

    /// The temporary file to write into.
    pub fn file(&mut self) -> &mut fs::File {
        self.tmp.as_file_mut()
    }

    /// Syncs the temporary file and renames it over the destination.
    pub fn commit(self) -> io::Result<()> {
        self.tmp.as_file().sync_all()?;
        let dest = self.dest;
        self.tmp.persist(&dest).map_err(|e| e.error)?;
        // The rename is durable once the folder is synced too.
        if let Some(dir) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// Writes `bytes` to `dest` whole or not at all.
pub fn write_atomically(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    StagedFile::with_contents(dest, bytes)?.commit()
}

/// Writes `bytes` to `dest` whole or not at all, readable by its owner only (mode 0600).
pub fn write_privately(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut staged = StagedFile::with_mode(dest, 0o600)?;
    staged.file().write_all(bytes)?;
    staged.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_a_link_without_following_it_and_drops_what_was_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, "keep").unwrap();
        let dest = dir.path().join("dest");
        std::os::unix::fs::symlink(&target, &dest).unwrap();
        write_atomically(&dest, b"new").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(fs::read_to_string(&dest).unwrap(), "new");
        assert!(!fs::symlink_metadata(&dest).unwrap().file_type().is_symlink());
        let staged = StagedFile::with_contents(&dir.path().join("other"), b"x").unwrap();
        drop(staged);
        let names: Vec<_> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn private_files_are_for_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("state.json");
        fs::write(&dest, "old").unwrap();
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o644)).unwrap();
        write_privately(&dest, b"new").unwrap();
        assert_eq!(fs::read_to_string(&dest).unwrap(), "new");
        assert_eq!(fs::metadata(&dest).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
