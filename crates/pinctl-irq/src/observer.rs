//! Steering under `pinctl run`: the supervisor tells the [`SteeringObserver`] of its
//! instances after every change and of reloads, and a thread of its own steers (writing
//! `/proc` and talking to irqbalance never holds up the supervisor's runtime): at once after a
//! change or a reload, and every `watch-interval` besides, so that interrupts that appear
//! later, an irqbalance that restarted, or an affinity someone else changed are steered again.
//! When the supervisor stops, [`Steering::finish`] puts everything back; on `detach` it is left
//! as it is, with its record, for the next supervisor.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use pinctl_supervise::observe::{Observed, Observer};
use pinctl_topology::{CpuSet, Topology};

use crate::inputs::SteerSettings;
use crate::steer::{Report, Steerer};

/// What a plan gives steering: its settings and the topology it was made on.
#[derive(Debug, Clone)]
pub struct Planned {
    pub settings: SteerSettings,
    pub topology: Arc<Topology>,
}

impl Planned {
    /// The steering of a service file read and checked on its topology.
    pub fn of(file: &pinctl_launch::ServiceFile) -> Planned {
        Planned {
            settings: SteerSettings::of_file(file),
            topology: Arc::new(file.loaded.topology.clone()),
        }
    }
}

/// Where steering's lines go (the supervisor's log in `pinctl run`).
pub type Log = Box<dyn Fn(&str) + Send>;

#[derive(Debug)]
struct State {
    /// (instance, service, CPUs) of every instance, once the supervisor has told.
    instances: Option<Vec<(String, String, CpuSet)>>,
    planned: Planned,
    dirty: bool,
    stop: bool,
    interval: Duration,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let out = f(&mut st);
        self.wake.notify_all();
        out
    }
}

/// The supervisor's side: told of instances and reloads.
#[derive(Debug)]
pub struct SteeringObserver {
    shared: Arc<Shared>,
}

/// The caller's side: hands the planner's new plans in and finishes steering.
#[derive(Debug)]
pub struct Steering {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Steerer>>,
}

/// Starts steering for `planned`, keeping its record at `record_path`, again every `every`.
/// Nothing is changed before the supervisor first tells its instances.
pub fn start(
    planned: Planned,
    record_path: &Path,
    every: Duration,
    log: Log,
) -> (SteeringObserver, Steering) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            instances: None,
            planned,
            dirty: false,
            stop: false,
            interval: every,
        }),
        wake: Condvar::new(),
    });
    let steerer = Steerer::live(record_path);
    let thread_shared = shared.clone();
    let thread = std::thread::Builder::new()
        .name("pinctl-irq".into())
        .spawn(move || run(&thread_shared, steerer, &log))
        .map_err(|e| eprintln!("pinctl: irq: cannot start the steering thread: {e}"))
        .ok();
    (SteeringObserver { shared: shared.clone() }, Steering { shared, thread })
}

fn run(shared: &Shared, mut steerer: Steerer, log: &Log) -> Steerer {
    let mut last_error = None;
    loop {
        let (instances, planned) = {
            let mut st = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
            while !st.stop && !st.dirty {
                let interval = st.interval;
                let (guard, waited) =
                    shared.wake.wait_timeout(st, interval).unwrap_or_else(PoisonError::into_inner);
                st = guard;
                if waited.timed_out() {
                    break;
                }
            }
            if st.stop {
                return steerer;
            }
            st.dirty = false;
            (st.instances.clone(), st.planned.clone())
        };
        let Some(instances) = instances else { continue };
        let result = if planned.settings.steer {
            let inputs = planned
                .settings
                .inputs(instances.iter().map(|(i, s, c)| (i.as_str(), s.as_str(), c)));
            steerer.apply(&planned.topology, &inputs)
        } else if steerer.has_changes() {
            // A reload turned steering off (or an earlier supervisor left changes behind).
            steerer.restore()
        } else {
            continue;
        };
        match result {
            Ok(report) => say(log, &report),
            Err(e) => {
                let text = format!("error message={:?}", pinctl_launch::chain(&e));
                if last_error.as_ref() != Some(&text) {
                    log(&text);
                    last_error = Some(text);
                }
            }
        }
    }
}

fn say(log: &Log, report: &Report) {
    for line in report.lines() {
        log(&line);
    }
}

impl Observer for SteeringObserver {
    fn instances(&mut self, instances: &[Observed]) {
        let now: Vec<(String, String, CpuSet)> = instances
            .iter()
            .map(|o| (o.name.clone(), o.service.clone(), o.placement.cpus.clone()))
            .collect();
        self.shared.with(|st| {
            if st.instances.as_ref() != Some(&now) {
                st.instances = Some(now);
                st.dirty = true;
            }
        });
    }

    fn reloaded(&mut self, file: &pinctl_launch::ServiceFile) -> Vec<String> {
        // Made on the runtime thread, but from what the reload already read: the topology is
        // copied, nothing is read from the machine.
        let planned = Planned::of(file);
        self.shared.with(|st| {
            st.planned = planned;
            st.interval = file.config.watch.interval;
            st.dirty = true;
        });
        Vec::new()
    }
}

impl Steering {
    /// Stops steering; with `restore` (the supervisor stopped), puts back everything it
    /// changed and says so through `log`.
    pub fn finish(mut self, restore: bool, log: &dyn Fn(&str)) {
        self.shared.with(|st| st.stop = true);
        let Some(mut steerer) = self.thread.take().and_then(|t| t.join().ok()) else { return };
        if !restore {
            return;
        }
        match steerer.restore() {
            Ok(report) => {
                for line in report.lines() {
                    log(&line);
                }
            }
            Err(e) => log(&format!("error message={:?}", pinctl_launch::chain(&e))),
        }
    }
}
