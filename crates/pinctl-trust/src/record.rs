//! The JSON files pinctl keeps for itself and acts on as root: the supervisor's state file
//! (which processes it adopts, and so signals) and the interrupt record (what it writes into
//! `/proc` to put interrupts back). One reader and one writer, so that each kind of file says
//! only what it holds ([`Record`]) and how it is named in messages ([`Kind`]).
//!
//! A file is believed only when nobody but root could have written it ([`read_trusted`]: a
//! regular file owned by root, not writable by group or others, in folders with the same
//! property, opened without following links or blocking, at most [`Kind::max_bytes`]), when it
//! is pinctl's (its `format`, and whatever else [`Record::check`] holds it to), and when it was
//! written in this boot ([`boot_id`]: PIDs and interrupt numbers mean something else after a
//! reboot). It is written whole or not at all, readable by root only (a state file holds every
//! instance's command line and environment, where database passwords often are). A file
//! refused for what it holds is set aside for a person ([`RecordError::set_aside`]), never
//! deleted nor written over: it may be the only word on what an earlier pinctl did.

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Refused, TrustError, about, boot_id, read_trusted};

/// What a kind of file is called and what refusing it means, for its messages; which formats
/// are its own; how large it may be.
#[derive(Debug)]
pub struct Kind {
    /// What messages call the file before its path (`state file `, with the space), empty
    /// when the path says enough.
    pub noun: &'static str,
    /// Marks a file as pinctl's and of this kind (a foreign JSON file is never acted on).
    pub format: &'static str,
    /// Formats of pinctl from before it recorded the boot: still read, for upgrades, without
    /// a boot to check.
    pub before_boot_ids: &'static [&'static str],
    /// The largest file read.
    pub max_bytes: usize,
    /// What refusing what the file holds means to the reader (`ignored, nothing adopted`).
    pub refused: &'static str,
    /// What refusing a file of an earlier boot means to the reader.
    pub other_boot: &'static str,
}

/// What a file of one [`Kind`] holds.
pub trait Record: Serialize + DeserializeOwned {
    /// Its kind.
    const KIND: &'static Kind;
    /// The `format` it says it has.
    fn format(&self) -> &str;
    /// The boot it says it was written in.
    fn boot_id(&self) -> Option<&str>;
    /// What its type cannot hold it to (a name's grammar): why the file is not pinctl's.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Why a record could not be read, written or believed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot read {}`{}`: {source}", kind.noun, path.display())]
    Read {
        kind: &'static Kind,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {}`{}`: {source}", kind.noun, path.display())]
    Write {
        kind: &'static Kind,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{}`{}` is not pinctl's or is damaged ({reason}): {}",
        kind.noun,
        path.display(),
        kind.refused
    )]
    Foreign { kind: &'static Kind, path: PathBuf, reason: String },
    #[error(
        "{}`{}` is not trusted: {}: {}",
        kind.noun,
        path.display(),
        about(path, reason),
        kind.refused
    )]
    Untrusted { kind: &'static Kind, path: PathBuf, reason: Refused },
    #[error(
        "{}`{}` was written before the last reboot: {}",
        kind.noun,
        path.display(),
        kind.other_boot
    )]
    OtherBoot { kind: &'static Kind, path: PathBuf },
}

impl RecordError {
    /// A file of `kind` at `path` that is not pinctl's, for `reason`.
    pub fn foreign(kind: &'static Kind, path: &Path, reason: String) -> RecordError {
        RecordError::Foreign { kind, path: path.to_path_buf(), reason }
    }

    /// The word a file this error refuses is set aside under (`unreadable`, `untrusted`,
    /// `other-boot`); `None` when the error is not about what the file holds.
    pub fn refusal(&self) -> Option<&'static str> {
        match self {
            RecordError::Foreign { .. } => Some("unreadable"),
            RecordError::Untrusted { .. } => Some("untrusted"),
            RecordError::OtherBoot { .. } => Some("other-boot"),
            RecordError::Read { .. } | RecordError::Write { .. } => None,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            RecordError::Read { path, .. }
            | RecordError::Write { path, .. }
            | RecordError::Foreign { path, .. }
            | RecordError::Untrusted { path, .. }
            | RecordError::OtherBoot { path, .. } => path,
        }
    }

    /// Moves the file this error refuses aside ([`crate::set_aside`]:
    /// `NAME.refused-<why>-<time>`), so that the next write does not replace it: the new path;
    /// `None` when the error does not refuse the file's content (it stays where it is).
    pub fn set_aside(&self) -> Option<io::Result<PathBuf>> {
        Some(crate::set_aside(self.path(), self.refusal()?))
    }
}

/// Reads the record at `path`. `Ok(None)`: there is none. A file that is not trusted, not
/// pinctl's, or was written in another boot is an error: the caller acts on none of it.
pub fn read<R: Record>(path: &Path) -> Result<Option<R>, RecordError> {
    let kind = R::KIND;
    let bytes = match read_trusted(path, kind.max_bytes) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(TrustError::Refused(reason)) => {
            return Err(RecordError::Untrusted { kind, path: path.to_path_buf(), reason });
        }
        Err(TrustError::Io { source, .. }) => {
            return Err(RecordError::Read { kind, path: path.to_path_buf(), source });
        }
    };
    let foreign = |reason: String| RecordError::foreign(kind, path, reason);
    let record: R = serde_json::from_slice(&bytes).map_err(|e| foreign(e.to_string()))?;
    let format = record.format();
    if format != kind.format && !kind.before_boot_ids.contains(&format) {
        return Err(foreign(format!("format `{format}`, expected `{}`", kind.format)));
    }
    record.check().map_err(foreign)?;
    if format == kind.format
        && (record.boot_id().is_none() || record.boot_id() != boot_id().as_deref())
    {
        return Err(RecordError::OtherBoot { kind, path: path.to_path_buf() });
    }
    Ok(Some(record))
}

/// Writes `record` to `path` whole or not at all, readable and writable by root only.
pub fn write<R: Record>(path: &Path, record: &R) -> Result<(), RecordError> {
    let err = |source| RecordError::Write { kind: R::KIND, path: path.to_path_buf(), source };
    let mut text = serde_json::to_vec_pretty(record).map_err(|e| err(io::Error::other(e)))?;
    text.push(b'\n');
    crate::atomic::write_privately(path, &text).map_err(err)
}

/// Removes the record of `kind` at `path` (nothing is left to keep); none there is no error.
pub fn remove(kind: &'static Kind, path: &Path) -> Result<(), RecordError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(RecordError::Write { kind, path: path.to_path_buf(), source }),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use serde::Deserialize;

    use super::*;

    const NOTES: Kind = Kind {
        noun: "notes file ",
        format: "notes-v2",
        before_boot_ids: &["notes-v1"],
        max_bytes: 4096,
        refused: "ignored",
        other_boot: "ignored (it held PIDs)",
    };

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Notes {
        format: String,
        boot_id: Option<String>,
        lines: Vec<String>,
    }

    impl Record for Notes {
        const KIND: &'static Kind = &NOTES;
        fn boot_id(&self) -> Option<&str> {
            self.boot_id.as_deref()
        }
        fn format(&self) -> &str {
            &self.format
        }
        fn check(&self) -> Result<(), String> {
            let broken = self.lines.iter().filter(|l| l.contains('\n')).count();
            if broken > 0 { Err(format!("{broken} lines hold a line break")) } else { Ok(()) }
        }
    }

    fn notes(lines: &[&str]) -> Notes {
        Notes {
            format: NOTES.format.into(),
            boot_id: boot_id(),
            lines: lines.iter().map(|l| l.to_string()).collect(),
        }
    }

    fn refused(path: &Path) -> RecordError {
        read::<Notes>(path).unwrap_err()
    }

    #[test]
    fn a_record_of_this_boot_comes_back_whole_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.json");
        assert!(read::<Notes>(&path).unwrap().is_none());
        write(&path, &notes(&["a"])).unwrap();
        write(&path, &notes(&["a", "b"])).unwrap();
        assert_eq!(read::<Notes>(&path).unwrap(), Some(notes(&["a", "b"])));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 1, "no temporary file left behind");
        remove(&NOTES, &path).unwrap();
        remove(&NOTES, &path).unwrap();
        assert!(!path.exists());
    }

    /// Puts a file at the path that [`read`] must refuse.
    type Spoil = fn(&Path);

    #[test]
    fn each_refusal_names_the_kind_says_what_follows_and_is_set_aside_under_its_word() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.json");
        let shown = path.display();
        let damaged = format!("notes file `{shown}` is not pinctl's or is damaged (");
        let cases: [(Spoil, String, &str); 5] = [
            (|p| std::fs::write(p, "{\"format\":\"other\"").unwrap(), damaged, "unreadable"),
            (
                |p| write(p, &Notes { format: "other".into(), ..notes(&[]) }).unwrap(),
                format!(
                    "notes file `{shown}` is not pinctl's or is damaged (format `other`, \
                     expected `notes-v2`): ignored"
                ),
                "unreadable",
            ),
            (
                |p| write(p, &notes(&["two\nlines"])).unwrap(),
                format!(
                    "notes file `{shown}` is not pinctl's or is damaged (1 lines hold a line \
                     break): ignored"
                ),
                "unreadable",
            ),
            (
                |p| {
                    write(p, &Notes { boot_id: Some("another-boot".into()), ..notes(&[]) }).unwrap()
                },
                format!(
                    "notes file `{shown}` was written before the last reboot: ignored (it held \
                     PIDs)"
                ),
                "other-boot",
            ),
            (
                |p| {
                    write(p, &notes(&[])).unwrap();
                    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o646)).unwrap();
                },
                format!(
                    "notes file `{shown}` is not trusted: writable by group or others (mode \
                     0646): ignored"
                ),
                "untrusted",
            ),
        ];
        for (spoil, said, word) in cases {
            spoil(&path);
            let e = refused(&path);
            assert!(e.to_string().starts_with(&said), "{e}\nwanted: {said}");
            assert_eq!(e.refusal(), Some(word));
            let kept = e.set_aside().unwrap().unwrap();
            assert!(!path.exists(), "set aside, not left to be written over");
            let name = kept.file_name().unwrap().to_str().unwrap();
            assert!(name.starts_with(&format!("n.json.refused-{word}-")), "{name}");
        }
        // What could not be read at all is no refusal of its content: it stays.
        let source = io::ErrorKind::Other.into();
        let e = RecordError::Read { kind: &NOTES, path: path.clone(), source };
        assert!(e.set_aside().is_none());
        assert_eq!(e.to_string(), format!("cannot read notes file `{shown}`: other error"));
    }

    #[test]
    fn an_older_format_is_read_without_a_boot_but_the_current_one_needs_this_boot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n.json");
        let mut n = notes(&["a"]);
        n.boot_id = None;
        write(&path, &n).unwrap();
        assert!(matches!(refused(&path), RecordError::OtherBoot { .. }));
        n.format = "notes-v1".into();
        write(&path, &n).unwrap();
        assert_eq!(read::<Notes>(&path).unwrap(), Some(n));
    }
}
