//! The state file: what a new supervisor needs to adopt the running instances of an old one.
//! Written atomically (a temporary file in the same folder, fsync, rename, fsync of the
//! folder), so a reader sees the old file or the new one, never half of one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::adopt::Recorded;
use crate::spec::InstanceSpec;

/// Marks the file as pinctl's (a foreign JSON file is ignored, never acted on).
pub const FORMAT: &str = "pinctl-state-v1";

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateFile {
    pub format: String,
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

/// Errors reading or writing the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot write state file `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read state file `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("state file `{}` is not pinctl's or is damaged ({reason}): ignored, nothing adopted", path.display())]
    Foreign { path: PathBuf, reason: String },
}

/// Writes `state` to `path` atomically, readable by root only: it holds every instance's
/// command line and environment, where database passwords often are.
pub fn write(path: &Path, state: &StateFile) -> Result<(), StateError> {
    let err = |source| StateError::Write { path: path.to_path_buf(), source };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(err)?;
    let mut text = serde_json::to_vec_pretty(state).map_err(|e| err(io::Error::other(e)))?;
    text.push(b'\n');
    pinctl_sysfs::atomic::write_privately(path, &text).map_err(err)
}

/// Reads the state file. `Ok(None)`: there is none (a first start).
pub fn read(path: &Path) -> Result<Option<StateFile>, StateError> {
    let text = match fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StateError::Read { path: path.to_path_buf(), source }),
    };
    let foreign = |reason: String| StateError::Foreign { path: path.to_path_buf(), reason };
    let state: StateFile = serde_json::from_slice(&text).map_err(|e| foreign(e.to_string()))?;
    if state.format != FORMAT {
        return Err(foreign(format!("format `{}`, expected `{FORMAT}`", state.format)));
    }
    Ok(Some(state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::spec;

    #[test]
    fn round_trip_and_atomic_replace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        assert!(read(&path).unwrap().is_none());
        let s = spec("a-0");
        let state = StateFile {
            format: FORMAT.into(),
            supervisor_pid: 1,
            instances: vec![Entry {
                name: "a-0".into(),
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
        };
        write(&path, &state).unwrap();
        write(&path, &state).unwrap();
        assert_eq!(read(&path).unwrap(), Some(state));
        let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "commands and environments are root's to read");
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
            assert!(matches!(e, StateError::Foreign { .. }), "{e}");
            assert!(e.to_string().contains("nothing adopted"), "{e}");
        }
    }
}
