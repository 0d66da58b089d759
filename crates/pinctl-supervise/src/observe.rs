//! What the supervisor tells an observer (the drift watcher of `pinctl run`, interrupt
//! steering) about its instances: which process each one is now, its cgroup and its placement.
//! The observer is told on the supervisor's runtime, after every change, and must return at
//! once: anything slow (sampling, moving pages) belongs on its own thread. Several observers
//! are told as one through the list of them ([`Observer`] for `Vec<Box<dyn Observer>>`).
//!
//! The supervisor drops its observer when it stops or detaches, before [`crate::run`]
//! returns: an observer with a thread of its own stops and joins it on drop.

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

/// Every observer in the list, told in turn: what each could not take up of a reload, and the
/// drift of the first that has watched the instance.
impl Observer for Vec<Box<dyn Observer>> {
    fn instances(&mut self, instances: &[Observed]) {
        for o in self.iter_mut() {
            o.instances(instances);
        }
    }

    fn drift(&self, instance: &str) -> Option<DriftState> {
        self.iter().find_map(|o| o.drift(instance))
    }

    fn reloaded(&mut self, file: &pinctl_launch::ServiceFile) -> Vec<String> {
        self.iter_mut().flat_map(|o| o.reloaded(file)).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    /// Keeps what it was told; answers drift for `watches`.
    struct Told {
        seen: Rc<RefCell<Vec<String>>>,
        watches: Option<&'static str>,
    }

    impl Observer for Told {
        fn instances(&mut self, instances: &[Observed]) {
            self.seen.borrow_mut().extend(instances.iter().map(|i| i.name.clone()));
        }

        fn drift(&self, instance: &str) -> Option<DriftState> {
            let error = Some(format!("watched by {instance}"));
            (self.watches == Some(instance)).then(|| DriftState { error, ..Default::default() })
        }
    }

    #[test]
    fn a_list_of_observers_tells_each_and_answers_drift_from_the_one_that_watches() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let told = |watches| Box::new(Told { seen: seen.clone(), watches }) as Box<dyn Observer>;
        let mut all: Vec<Box<dyn Observer>> = vec![told(None), told(Some("db-1"))];
        let db = |name: &str| Observed {
            name: name.into(),
            service: "db".into(),
            pid: None,
            cgroup: None,
            placement: Placement {
                nodes: "0".parse().unwrap(),
                cpus: "0-3".parse().unwrap(),
                memory_policy: pinctl_topology::MemoryPolicy::Bind,
                memory_nodes: "0".parse().unwrap(),
            },
            restarts: 0,
        };
        all.instances(&[db("db-0"), db("db-1")]);
        assert_eq!(*seen.borrow(), ["db-0", "db-1", "db-0", "db-1"]);
        assert_eq!(all.drift("db-1").and_then(|d| d.error).as_deref(), Some("watched by db-1"));
        assert_eq!(all.drift("db-0"), None);
    }
}
