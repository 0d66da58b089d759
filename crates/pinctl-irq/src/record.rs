//! What pinctl changed, kept so it can be put back: each interrupt's affinity, each queue's
//! RPS or XPS mask and irqbalance's settings as they were before pinctl first changed them.
//!
//! The record is written before anything is changed (so a pinctl killed half-way leaves the
//! originals behind, and the next one puts them back or keeps steering from them), as a file
//! only root can read and write, beside the supervisor's state file
//! (`/run/pinctl/NAME.irq.json`). It decides what pinctl writes into `/proc` as root, so it is
//! believed only when nobody but root could have written it ([`pinctl_sysfs::trust`]), when
//! it is pinctl's, and when it was written in this boot (interrupt numbers are not stable
//! across boots).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use pinctl_sysfs::trust::{self, TrustError};
use pinctl_topology::CpuSet;
use serde::{Deserialize, Serialize};

/// Marks the file as pinctl's.
pub const FORMAT: &str = "pinctl-irq-v1";

/// The largest record read: every interrupt number a host can have, each a short entry.
pub const MAX_BYTES: usize = 16 << 20;

/// The record of the supervisor named `name` whose state file is `state_file`: beside it.
pub fn path_for(state_file: &Path, name: &str) -> PathBuf {
    trust::folder_of(state_file).join(format!("{name}.irq.json"))
}

/// Everything pinctl changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub format: String,
    /// `/proc/sys/kernel/random/boot_id` when written.
    pub boot_id: Option<String>,
    /// The affinity each changed interrupt had before pinctl, by number.
    pub irqs: BTreeMap<u32, OriginalIrq>,
    /// The mask each changed queue had before pinctl.
    #[serde(default)]
    pub queues: Vec<OriginalQueue>,
    /// irqbalance's settings before pinctl told it anything.
    #[serde(default)]
    pub irqbalance: Option<IrqbalanceRecord>,
}

/// An interrupt's affinity before pinctl changed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginalIrq {
    /// Its name then: an interrupt number given to another device since is not written.
    pub name: String,
    pub affinity: CpuSet,
}

/// A queue's RPS (`rx`) or XPS mask before pinctl changed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginalQueue {
    pub interface: String,
    pub rx: bool,
    pub queue: u32,
    pub cpus: CpuSet,
}

/// The irqbalance pinctl told which CPUs to avoid, and what it avoided before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IrqbalanceRecord {
    pub pid: u32,
    /// Field 22 of its `/proc/PID/stat`: a PID reused by another irqbalance is not it.
    pub start_time: u64,
    /// The CPUs it avoided before pinctl told it anything.
    pub avoided_cpus: CpuSet,
    /// Whether those were its own choice (`IRQBALANCE_BANNED_CPULIST`, else isolated and
    /// `nohz_full` CPUs), given back with `settings cpus NULL`; otherwise someone had set them
    /// on its socket, and they are set again.
    pub own_choice: bool,
    /// The interrupts it left alone before (`--banirq`, `settings ban irqs`).
    pub banned_irqs: Vec<u32>,
    /// What it avoids and leaves alone now, as pinctl last told it (or found it).
    pub told_cpus: CpuSet,
    pub told_irqs: Vec<u32>,
}

impl Record {
    /// An empty record of this boot.
    pub fn new() -> Record {
        Record {
            format: FORMAT.into(),
            boot_id: pinctl_supervise::statefile::boot_id(),
            ..Record::default()
        }
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.irqs.is_empty() && self.queues.is_empty() && self.irqbalance.is_none()
    }

    /// The recorded mask of a queue.
    pub fn queue(&self, interface: &str, rx: bool, queue: u32) -> Option<&OriginalQueue> {
        self.queues.iter().find(|q| q.interface == interface && q.rx == rx && q.queue == queue)
    }
}

/// Why the record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` is not trusted: {}: ignored, nothing is put back from it", path.display(), trust::about(path, reason))]
    Untrusted { path: PathBuf, reason: trust::Refused },
    #[error("`{}` is not pinctl's or is damaged ({reason}): ignored, nothing is put back from it", path.display())]
    Foreign { path: PathBuf, reason: String },
    #[error("`{}` was written before the last reboot: ignored (interrupt numbers change across boots)", path.display())]
    OtherBoot { path: PathBuf },
}

/// Reads the record at `path`; `Ok(None)` when there is none.
pub fn read(path: &Path) -> Result<Option<Record>, RecordError> {
    let bytes = match trust::read_trusted(path, MAX_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(TrustError::Refused(reason)) => {
            return Err(RecordError::Untrusted { path: path.to_path_buf(), reason });
        }
        Err(TrustError::Io { source, .. }) => {
            return Err(RecordError::Read { path: path.to_path_buf(), source });
        }
    };
    let foreign = |reason: String| RecordError::Foreign { path: path.to_path_buf(), reason };
    let record: Record = serde_json::from_slice(&bytes).map_err(|e| foreign(e.to_string()))?;
    if record.format != FORMAT {
        return Err(foreign(format!("format `{}`, expected `{FORMAT}`", record.format)));
    }
    if record.boot_id.is_none() || record.boot_id != pinctl_supervise::statefile::boot_id() {
        return Err(RecordError::OtherBoot { path: path.to_path_buf() });
    }
    Ok(Some(record))
}

/// Writes the record whole or not at all, readable and writable by root only.
pub fn write(path: &Path, record: &Record) -> Result<(), RecordError> {
    let err = |source| RecordError::Write { path: path.to_path_buf(), source };
    let mut text = serde_json::to_vec_pretty(record).map_err(|e| err(io::Error::other(e)))?;
    text.push(b'\n');
    pinctl_sysfs::atomic::write_privately(path, &text).map_err(err)
}

/// Removes the record (everything was put back).
pub fn remove(path: &Path) -> Result<(), RecordError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(RecordError::Write { path: path.to_path_buf(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn round_trip_private_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.irq.json");
        assert!(read(&path).unwrap().is_none());
        let mut r = Record::new();
        r.irqs.insert(
            45,
            OriginalIrq { name: "eth0-TxRx-0".into(), affinity: "0-7".parse().unwrap() },
        );
        write(&path, &r).unwrap();
        assert_eq!(read(&path).unwrap(), Some(r.clone()));
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        // Another boot's record is not believed.
        r.boot_id = Some("another-boot".into());
        write(&path, &r).unwrap();
        assert!(matches!(read(&path), Err(RecordError::OtherBoot { .. })));
        // Nor a foreign file, nor one others may write.
        std::fs::write(&path, "{\"format\":\"x\"}").unwrap();
        assert!(matches!(read(&path), Err(RecordError::Foreign { .. })));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(read(&path), Err(RecordError::Untrusted { .. })), "{:?}", read(&path));
        remove(&path).unwrap();
        remove(&path).unwrap();
        assert_eq!(
            path_for(Path::new("/run/pinctl/db.state.json"), "db"),
            Path::new("/run/pinctl/db.irq.json")
        );
    }
}
