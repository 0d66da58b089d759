//! What the supervisor tells an observer (the drift watcher of `pinctl run`) about its
//! instances: which process each one is now, its cgroup and its placement. The observer is
//! told on the supervisor's runtime, after every change, and must return at once: anything
//! slow (sampling, moving pages) belongs on its own thread.

use crate::protocol::DriftState;
use pinctl_topology::Placement;

/// One instance as the supervisor knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub name: String,
    pub service: String,
    /// The main process; `None` while it is not running.
    pub pid: Option<u32>,
    /// Its own cgroup v2 path (`/pinctl/db-0`), when it has one.
    pub cgroup: Option<String>,
    pub placement: Placement,
    /// Automatic restarts so far.
    pub restarts: u32,
}

/// Told of the supervisor's instances whenever one of them changes.
pub trait Observer {
    /// Every instance, in the file's order. Called on the supervisor's runtime thread (so a
    /// task may be spawned from here); must not block.
    fn instances(&mut self, instances: &[Observed]);

    /// What the observer last found of `instance`, for `pinctl status`. Called on the
    /// runtime thread: must not block.
    fn drift(&self, _instance: &str) -> Option<DriftState> {
        None
    }

    /// A reload re-planned `file` and applied it (not called for `--dry-run` or a file that
    /// was refused): the observer takes up its settings, and returns the changes it could not
    /// take up (they are said to whoever asked for the reload). Called on the runtime thread:
    /// must not block.
    fn reloaded(&mut self, _file: &pinctl_launch::ServiceFile) -> Vec<String> {
        Vec::new()
    }
}
