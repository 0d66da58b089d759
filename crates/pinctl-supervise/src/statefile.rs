//! The state file: what a new supervisor needs to adopt the running instances of an old one.
//!
//! Its contents decide which processes a supervisor running as root adopts, and so signals:
//! it is one of pinctl's trusted records ([`pinctl_trust::record`]: read only when nobody but
//! root could have written it, when it is pinctl's and when it was written since the last
//! boot; written atomically, readable by root only, set aside when refused), and besides every
//! name in it must be an instance name. One supervisor holds it: [`StateLock`] is an exclusive
//! lock on `locks/<state file>.lock` beside it, in a folder only root may enter, that a second
//! `pinctl run` on the same file meets and refuses on.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use pinctl_trust::record::{self, Kind, Record, RecordError};
use pinctl_trust::{LockError, TrustError};
use serde::{Deserialize, Serialize};

use crate::adopt::Recorded;
use crate::spec::InstanceSpec;

/// Marks the file as pinctl's (a foreign JSON file is ignored, never acted on). `v2` records
/// the boot it was written in.
pub const FORMAT: &str = "pinctl-state-v2";
/// The format of pinctl before the boot id was recorded: still read, so that an upgrade adopts
/// what the older supervisor ran.
pub const FORMAT_V1: &str = "pinctl-state-v1";
/// The largest state file read: 8192 instances (the most a file may have) of a few hundred
/// bytes each, with room for long command lines and environments.
pub const MAX_BYTES: usize = 16 << 20;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateFile {
    pub format: String,
    /// `/proc/sys/kernel/random/boot_id` when it was written: nothing is adopted across a
    /// reboot (a PID and start time can repeat in another boot). `None` in `v1` files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The supervisor that wrote it.
    pub supervisor_pid: i32,
    pub instances: Vec<Entry>,
}

/// One running instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    #[serde(flatten)]
    pub process: Recorded,
    /// `InstanceSpec::digest` of `spec`.
    pub digest: String,
    /// What it was started with (placement included).
    pub spec: InstanceSpec,
    /// Automatic restarts so far.
    pub restarts: u32,
}

/// Errors reading or writing the state file, or claiming it.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading, writing or believing the file ([`KIND`] names it in the message).
    #[error(transparent)]
    File(#[from] RecordError),
    #[error(
        "another `pinctl run` (PID {holder}) holds `{}`: it supervises this state file. Stop it \
         first, or give this service file a supervisor of its own (`[host] name`)",
        lock.display()
    )]
    Locked { lock: PathBuf, holder: String },
    #[error(
        "cannot keep state in `{}`: {}. pinctl keeps its state only where nobody but root \
         can write (a folder such as /run/pinctl, mode 0755 or 0700)",
        path.display(),
        pinctl_trust::about(path, reason)
    )]
    UntrustedFolder { path: PathBuf, reason: pinctl_trust::Refused },
    #[error("cannot lock `{}`: {source}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl StateError {
    /// The word a state file this error refuses is set aside under (`unreadable`,
    /// `untrusted`, `other-boot`); `None` when the error is not about what the file holds.
    pub fn refusal(&self) -> Option<&'static str> {
        match self {
            StateError::File(e) => e.refusal(),
            _ => None,
        }
    }
}

/// The state file as a trusted record.
pub const KIND: Kind = Kind {
    noun: "state file ",
    format: FORMAT,
    before_boot_ids: &[FORMAT_V1],
    max_bytes: MAX_BYTES,
    refused: "ignored, nothing adopted",
    other_boot: "ignored, nothing adopted",
};

impl Record for StateFile {
    const KIND: &'static Kind = &KIND;
    fn format(&self) -> &str {
        &self.format
    }
    fn boot_id(&self) -> Option<&str> {
        self.boot_id.as_deref()
    }
    fn check(&self) -> Result<(), String> {
        match self.instances.iter().find(|e| !pinctl_config::is_instance_name(&e.name)) {
            Some(bad) => Err(format!("`{}` is not an instance name", bad.name.escape_debug())),
            None => Ok(()),
        }
    }
}

/// Moves a state file that [`read`] refused aside ([`pinctl_trust::set_aside`]:
/// `NAME.refused-<why>-<time>`), so that the next write does not replace it: it may be the
/// only word on which processes an earlier supervisor ran. The new path; `None` when `refused`
/// does not refuse the file's content.
pub fn set_aside(path: &Path, refused: &StateError) -> Option<io::Result<PathBuf>> {
    Some(pinctl_trust::set_aside(path, refused.refusal()?))
}

/// The boot this kernel is in: what a state file records (the supervisor stamps it here).
pub use pinctl_trust::boot_id;

/// Writes `state` to `path` atomically, readable by root only: it holds every instance's
/// command line and environment, where database passwords often are.
pub fn write(path: &Path, state: &StateFile) -> Result<(), StateError> {
    Ok(record::write(path, state)?)
}

/// Reads the state file. `Ok(None)`: there is none (a first start). A file that is not
/// trusted, not pinctl's, names something that is not an instance, or was written in another
/// boot is an error: the caller adopts nothing.
pub fn read(path: &Path) -> Result<Option<StateFile>, StateError> {
    Ok(record::read(path)?)
}

/// Takes over, from the shared state file of a pinctl from before supervisors were named
/// (`/run/pinctl/state.json`, one file for every service file on the host), the entries of
/// the instances named in `names`: returned, and removed from that file (which is removed once
/// nothing is left in it), so that each is taken by one supervisor only. Nothing is taken
/// while the older supervisor that wrote it still runs.
pub fn take_legacy(path: &Path, names: &[&str]) -> Result<Vec<Entry>, StateError> {
    let Some(mut state) = read(path)? else { return Ok(Vec::new()) };
    let mut proc = pinctl_sysfs::FsRoot::new(Path::new("/"));
    let writer = u32::try_from(state.supervisor_pid).ok();
    let writer_runs = writer
        .and_then(|pid| pinctl_sysfs::proc::pid::comm::read(&mut proc, pid).ok().flatten())
        .is_some_and(|comm| comm == "pinctl");
    if writer_runs && state.supervisor_pid != std::process::id() as i32 {
        let reason = format!("pinctl {} still runs and keeps it", state.supervisor_pid);
        return Err(RecordError::foreign(&KIND, path, reason).into());
    }
    let (taken, kept): (Vec<Entry>, Vec<Entry>) =
        state.instances.into_iter().partition(|e| names.contains(&e.name.as_str()));
    if taken.is_empty() {
        return Ok(taken);
    }
    if kept.is_empty() {
        record::remove(&KIND, path)?;
    } else {
        state.instances = kept;
        write(path, &state)?;
    }
    Ok(taken)
}

/// The folder, beside the state file, that holds the supervisors' locks (`/run/pinctl/locks`).
pub const LOCKS: &str = "locks";

/// The lock that makes one supervisor the only one for a state file: `flock(LOCK_EX)` on
/// `locks/<state file name>.lock` beside the state file, held open (close-on-exec, so no
/// instance inherits it) for the life of the process. The `locks` folder is root's with mode
/// 0700, so no other user can open the file, and so none can take the lock
/// ([`pinctl_trust::lock_private`]). The file holds the PID of its holder, for the error a second
/// supervisor prints. It is never removed: removing a lock file lets two processes lock two
/// files.
#[derive(Debug)]
pub struct StateLock {
    lock: pinctl_trust::PrivateLock,
}

impl StateLock {
    /// The lock file of `state_file`.
    pub fn path_for(state_file: &Path) -> PathBuf {
        let mut name = state_file.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        pinctl_trust::folder_of(state_file).join(LOCKS).join(name)
    }

    /// Creates the state file's folder (mode 0700) when it is missing, checks that nobody but
    /// root can write it, and takes the lock; refuses (naming the holder's PID) when another
    /// supervisor holds it.
    pub fn acquire(state_file: &Path) -> Result<StateLock, StateError> {
        let path = StateLock::path_for(state_file);
        let dir = pinctl_trust::folder_of(state_file);
        let lock_err = |source| StateError::Lock { path: path.clone(), source };
        if !dir.exists() {
            fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(lock_err)?;
        }
        match pinctl_trust::check_folder(dir) {
            Ok(_) => {}
            Err(TrustError::Refused(reason)) => {
                return Err(StateError::UntrustedFolder { path: dir.to_path_buf(), reason });
            }
            Err(TrustError::Io { source, .. }) => return Err(lock_err(source)),
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let folder = pinctl_trust::folder_of(&path);
        match pinctl_trust::lock_private(folder, &name, pinctl_trust::LOCK_PATIENCE) {
            Ok(lock) => Ok(StateLock { lock }),
            Err(LockError::Held { holder, .. }) => Err(StateError::Locked {
                lock: path,
                holder: holder.map_or("unknown".into(), |p| p.to_string()),
            }),
            Err(LockError::Untrusted(TrustError::Refused(reason))) => {
                Err(StateError::UntrustedFolder { path: reason.path.clone(), reason })
            }
            Err(LockError::Untrusted(TrustError::Io { source, .. })) => Err(lock_err(source)),
        }
    }

    /// Where the lock is.
    pub fn path(&self) -> &Path {
        self.lock.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::spec;
    use std::os::unix::fs::PermissionsExt as _;

    fn state(name: &str) -> StateFile {
        let s = spec("a-0");
        StateFile {
            format: FORMAT.into(),
            boot_id: boot_id(),
            supervisor_pid: 1,
            instances: vec![Entry {
                name: name.into(),
                process: Recorded {
                    pid: 10,
                    start_time: 99,
                    cgroup: None,
                    cmdline: vec!["/bin/sleep".into()],
                },
                digest: s.digest(),
                spec: s,
                restarts: 2,
            }],
        }
    }

    #[test]
    fn round_trip_and_atomic_replace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        assert!(read(&path).unwrap().is_none());
        let _lock = StateLock::acquire(&path).unwrap();
        let state = state("a-0");
        write(&path, &state).unwrap();
        write(&path, &state).unwrap();
        assert_eq!(read(&path).unwrap(), Some(state));
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file left behind: {names:?}");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "commands and environments are root's to read");
        let dir_mode = fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700, "a folder pinctl creates is root's alone");
    }

    #[test]
    fn foreign_or_damaged_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        for text in
            ["{\"format\":\"other\",\"supervisor_pid\":1,\"instances\":[]}", "{not json", ""]
        {
            fs::write(&path, text).unwrap();
            let e = read(&path).unwrap_err();
            assert!(matches!(e, StateError::File(RecordError::Foreign { .. })), "{e}");
            assert!(e.to_string().contains("nothing adopted"), "{e}");
        }
    }

    #[test]
    fn names_outside_the_instance_grammar_make_the_file_foreign() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        for bad in ["../victim", "a/b", "_supervisor", ""] {
            write(&path, &state(bad)).unwrap();
            let e = read(&path).unwrap_err();
            assert!(matches!(e, StateError::File(RecordError::Foreign { .. })), "{bad}: {e}");
            assert!(e.to_string().contains("is not an instance name"), "{e}");
        }
    }

    #[test]
    fn files_of_another_boot_are_not_adopted_but_older_formats_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut other = state("a-0");
        other.boot_id = Some("00000000-0000-0000-0000-000000000000".into());
        write(&path, &other).unwrap();
        assert!(matches!(
            read(&path).unwrap_err(),
            StateError::File(RecordError::OtherBoot { .. })
        ));
        other.boot_id = None;
        write(&path, &other).unwrap();
        assert!(matches!(
            read(&path).unwrap_err(),
            StateError::File(RecordError::OtherBoot { .. })
        ));
        // What pinctl wrote before it recorded the boot: read, for upgrades.
        other.format = FORMAT_V1.into();
        write(&path, &other).unwrap();
        assert_eq!(read(&path).unwrap().unwrap().instances.len(), 1);
    }

    #[test]
    fn files_others_could_write_are_untrusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write(&path, &state("a-0")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o646)).unwrap();
        let e = read(&path).unwrap_err();
        assert!(matches!(e, StateError::File(RecordError::Untrusted { .. })), "{e}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.to_string().contains("a folder group or others may write (mode 0777)"), "{e}");
        let e = StateLock::acquire(&path).unwrap_err();
        assert!(matches!(e, StateError::UntrustedFolder { .. }), "{e}");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[test]
    fn an_older_shared_file_is_taken_over_entry_by_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut shared = state("a-0");
        let mut b = shared.instances[0].clone();
        b.name = "b-0".into();
        shared.instances.push(b);
        shared.format = FORMAT_V1.into();
        shared.boot_id = None;
        shared.supervisor_pid = i32::MAX;
        write(&path, &shared).unwrap();
        assert!(take_legacy(&path, &["c"]).unwrap().is_empty());
        let taken = take_legacy(&path, &["a-0"]).unwrap();
        assert_eq!(taken.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["a-0"]);
        let left = read(&path).unwrap().unwrap();
        assert_eq!(left.instances.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["b-0"]);
        assert_eq!(take_legacy(&path, &["a-0", "b-0"]).unwrap().len(), 1);
        assert!(!path.exists(), "an emptied file is removed");
    }

    #[test]
    fn a_refused_file_is_set_aside_never_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut other = state("a-0");
        other.boot_id = Some("00000000-0000-0000-0000-000000000000".into());
        write(&path, &other).unwrap();
        let e = read(&path).unwrap_err();
        let kept = set_aside(&path, &e).unwrap().unwrap();
        assert!(!path.exists());
        let name = kept.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("state.json.refused-other-boot-"), "{name}");
        let text = fs::read_to_string(&kept).unwrap();
        assert!(text.contains("00000000-0000-0000-0000-000000000000"), "kept whole: {text}");
        fs::write(&path, "{\"format\": \"pinctl-state-v2\", \"supervis").unwrap();
        let e = read(&path).unwrap_err();
        let kept = set_aside(&path, &e).unwrap().unwrap();
        assert!(kept.to_str().unwrap().contains(".refused-unreadable-"), "{}", kept.display());
        // A file that could not be read at all is not a refusal of its content.
        let source = io::ErrorKind::Other.into();
        let e = StateError::File(RecordError::Read { kind: &KIND, path: path.clone(), source });
        assert!(set_aside(&path, &e).is_none());
    }

    #[test]
    fn the_lock_is_on_a_file_nobody_else_can_open() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("db.state.json");
        let lock = StateLock::acquire(&path).unwrap();
        assert_eq!(lock.path(), dir.path().join("locks/db.state.json.lock"));
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("locks")), 0o700);
        assert_eq!(mode(lock.path()), 0o600);
        // Where pinctl locked before (`<state file>.lock`, once mode 0644): never again.
        assert!(!dir.path().join("db.state.json.lock").exists());
    }

    #[test]
    fn a_second_holder_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let lock = StateLock::acquire(&path).unwrap();
        let e = StateLock::acquire(&path).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&format!("(PID {})", std::process::id())), "{text}");
        assert!(text.contains("[host] name"), "{text}");
        drop(lock);
        StateLock::acquire(&path).unwrap();
    }
}
