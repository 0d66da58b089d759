//! What steering by hand (`pinctl irq apply|restore`, for hosts whose services start with
//! `pinctl exec`) needs beside the [`crate::Steerer`]: root, the record of the file's
//! supervisor where a `pinctl run` of the same file keeps it, and that supervisor's lock, so
//! the two never steer at once.

use std::path::PathBuf;

use pinctl_config::Config;
use pinctl_supervise::statefile::{StateError, StateLock};

/// Why steering by hand cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error(
        "`pinctl irq {what}` writes /proc/irq/N/smp_affinity_list and talks to irqbalance: it \
         needs root (running as uid {uid})"
    )]
    NotRoot { what: &'static str, uid: u32 },
    /// The file names no supervisor (its `[host]` keys).
    #[error("{0}")]
    Supervisor(String),
    #[error(
        "`pinctl run` (PID {holder}) supervises this file and steers its interrupts itself: \
         change the file and `pinctl reload`, or stop it first"
    )]
    Supervised { holder: String },
    #[error(transparent)]
    State(StateError),
}

/// Refuses to go on without root: `what` is the `pinctl irq` action.
pub fn needs_root(what: &'static str) -> Result<(), HoldError> {
    match pinctl_trust::euid() {
        0 => Ok(()),
        uid => Err(HoldError::NotRoot { what, uid }),
    }
}

/// The record of `config`'s supervisor, held under its lock for as long as this lives.
#[derive(Debug)]
pub struct Held {
    pub record: PathBuf,
    _lock: StateLock,
}

/// Takes the lock of `config`'s supervisor (its state file, or `state_file`) and names the
/// record kept beside it.
pub fn hold(config: &Config, state_file: Option<PathBuf>) -> Result<Held, HoldError> {
    let sup = config.supervisor().map_err(HoldError::Supervisor)?;
    let state = state_file.unwrap_or(sup.state_file);
    let record = crate::record::path_for(&state, &sup.name);
    let lock = StateLock::acquire(&state).map_err(|e| match e {
        StateError::Locked { holder, .. } => HoldError::Supervised { holder },
        other => HoldError::State(other),
    })?;
    Ok(Held { record, _lock: lock })
}
