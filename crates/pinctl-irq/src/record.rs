//! What pinctl changed, kept so it can be put back: each interrupt's affinity, each queue's
//! RPS or XPS mask and irqbalance's settings as they were before pinctl first changed them.
//!
//! The record is written before anything is changed (so a pinctl killed half-way leaves the
//! originals behind, and the next one puts them back or keeps steering from them), as a file
//! only root can read and write, beside the supervisor's state file
//! (`/run/pinctl/NAME.irq.json`). It decides what pinctl writes into `/proc` as root, so it is
//! one of pinctl's trusted records ([`pinctl_trust::record`]): believed only when nobody but
//! root could have written it, when it is pinctl's, and when it was written in this boot
//! (interrupt numbers are not stable across boots).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pinctl_topology::CpuSet;
pub use pinctl_trust::record::RecordError;
use pinctl_trust::record::{self, Kind};
use serde::{Deserialize, Serialize};

/// Marks the file as pinctl's.
pub const FORMAT: &str = "pinctl-irq-v1";

/// The largest record read: every interrupt number a host can have, each a short entry.
pub const MAX_BYTES: usize = 16 << 20;

/// The record of the supervisor named `name` whose state file is `state_file`: beside it.
pub fn path_for(state_file: &Path, name: &str) -> PathBuf {
    pinctl_trust::folder_of(state_file).join(format!("{name}.irq.json"))
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
        Record { format: FORMAT.into(), boot_id: pinctl_trust::boot_id(), ..Record::default() }
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

/// The interrupt record as a trusted record.
pub const KIND: Kind = Kind {
    noun: "",
    format: FORMAT,
    before_boot_ids: &[],
    max_bytes: MAX_BYTES,
    refused: "refused, nothing is put back from it",
    other_boot: "refused (interrupt numbers change across boots)",
};

impl record::Record for Record {
    const KIND: &'static Kind = &KIND;
    fn format(&self) -> &str {
        &self.format
    }
    fn boot_id(&self) -> Option<&str> {
        self.boot_id.as_deref()
    }
}

/// A record steering would not act on, and where it is kept: it may hold the only copy of the
/// affinities the interrupts had before pinctl, so it is never deleted nor written over.
#[derive(Debug)]
pub struct Refused {
    pub error: RecordError,
    /// Where it was moved (`NAME.refused-<why>-<time>`), or why it could not be; `None` when
    /// it could not be read at all (it stays where it is).
    pub kept: Option<Result<PathBuf, String>>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.error)?;
        let at = match &self.kept {
            Some(Ok(kept)) => {
                write!(f, ". It is kept as `{}`", kept.display())?;
                kept.clone()
            }
            Some(Err(why)) => {
                write!(f, ". It could not be set aside ({why}) and is left as it is")?;
                return Ok(());
            }
            None => return Ok(()),
        };
        writeln!(f, "; to put back by hand, as root, what it holds (check it first):")?;
        for line in by_hand(&at) {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Sets aside the record that was refused with `error` (see [`Refused`]).
pub fn set_aside(error: RecordError) -> Refused {
    let kept = error.set_aside().map(|kept| kept.map_err(|e| e.to_string()));
    Refused { error, kept }
}

/// The commands that put back what the record at `path` lists, one a line, each value checked
/// (an interrupt number, a CPU list, an interface name) so that no line can do anything else;
/// read whatever its format, field names or boot. When it cannot be read as JSON (cut short),
/// how its entries look instead.
pub fn by_hand(path: &Path) -> Vec<String> {
    let text = pinctl_trust::read_checked(Path::new("/"), path, MAX_BYTES).map(|r| r.bytes);
    let value: Option<serde_json::Value> =
        text.ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let Some(value) = value else {
        return vec![
            "(it cannot be read as JSON: cut short?) each interrupt is listed under `irqs` as \
             `\"N\": {\"name\": ..., \"affinity\": \"CPUS\"}`: put it back with `echo CPUS > \
             /proc/irq/N/smp_affinity_list`; each queue under `queues` with `echo MASK > \
             /sys/class/net/IF/queues/rx-N/rps_cpus` (`tx-N/xps_cpus` when `rx` is false)"
                .to_string(),
        ];
    };
    let mut lines = Vec::new();
    let irqs = value.get("irqs").and_then(|v| v.as_object());
    for (irq, entry) in irqs.into_iter().flatten() {
        let cpus = entry.get("affinity").and_then(|a| a.as_str()?.parse::<CpuSet>().ok());
        let name = entry.get("name").and_then(|n| n.as_str()).unwrap_or("?");
        match (irq.parse::<u32>(), cpus) {
            (Ok(irq), Some(cpus)) => lines.push(format!(
                "echo {cpus} > /proc/irq/{irq}/smp_affinity_list   # {}",
                pinctl_topology::text::escaped(name)
            )),
            _ => lines.push(format!(
                "# IRQ {}: no affinity it could be given back",
                pinctl_topology::text::escaped(irq)
            )),
        }
    }
    let queues = value.get("queues").and_then(|v| v.as_array());
    for q in queues.into_iter().flatten() {
        let interface = q.get("interface").and_then(|i| i.as_str()).unwrap_or_default();
        let cpus = q.get("cpus").and_then(|c| c.as_str()?.parse::<CpuSet>().ok());
        let (rx, queue) =
            (q.get("rx").and_then(|r| r.as_bool()), q.get("queue").and_then(|n| n.as_u64()));
        let plain = interface.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b));
        match (pinctl_config::is_interface_name(interface) && plain, rx, queue, cpus) {
            (true, Some(rx), Some(n), Some(cpus)) => {
                let file = if rx { format!("rx-{n}/rps_cpus") } else { format!("tx-{n}/xps_cpus") };
                lines.push(format!(
                    "echo {} > /sys/class/net/{interface}/queues/{file}",
                    cpus.to_mask_string()
                ));
            }
            _ => lines.push(format!(
                "# a queue of `{}` it cannot say how to put back",
                pinctl_topology::text::escaped(interface)
            )),
        }
    }
    if lines.is_empty() {
        lines.push("# it lists no interrupt or queue".to_string());
    }
    lines
}

/// Reads the record at `path`; `Ok(None)` when there is none.
pub fn read(path: &Path) -> Result<Option<Record>, RecordError> {
    record::read(path)
}

/// Writes the record whole or not at all, readable and writable by root only.
pub fn write(path: &Path, record: &Record) -> Result<(), RecordError> {
    record::write(path, record)
}

/// Removes the record (everything was put back).
pub fn remove(path: &Path) -> Result<(), RecordError> {
    record::remove(&KIND, path)
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
        // A refused record is set aside, never removed, with what to write by hand.
        let mut r = Record::new();
        r.boot_id = Some("another-boot".into());
        r.irqs.insert(45, OriginalIrq { name: "eth0".into(), affinity: "0-7".parse().unwrap() });
        r.queues.push(OriginalQueue {
            interface: "eth0; rm -rf /".into(),
            rx: false,
            queue: 1,
            cpus: "4".parse().unwrap(),
        });
        write(&path, &r).unwrap();
        let refused = set_aside(read(&path).unwrap_err());
        assert!(!path.exists());
        let text = refused.to_string();
        assert!(text.contains("echo 0-7 > /proc/irq/45/smp_affinity_list   # eth0\n"), "{text}");
        // A value that is not what it should be is never made a command.
        assert!(text.contains("# a queue of `eth0; rm -rf /` it cannot say"), "{text}");
        assert!(!text.contains("echo 10 >"), "{text}");
        let kept = refused.kept.unwrap().unwrap();
        assert!(kept.to_str().unwrap().contains("db.irq.json.refused-other-boot-"), "{kept:?}");
        assert_eq!(
            path_for(Path::new("/run/pinctl/db.state.json"), "db"),
            Path::new("/run/pinctl/db.irq.json")
        );
    }
}
