//! Starting an instance's process: its cgroup, its FIFO, its output file opened off the
//! loop, then fork and exec with its placement.

use super::*;

impl Supervisor {
    /// Starts an instance's process once nothing of its earlier run is left: in its cgroup,
    /// with its output FIFO, and (when it writes to a file) once that file is open.
    pub(super) fn spawn(&mut self, name: &str) {
        if !self.earlier_run_gone(name) {
            return;
        }
        let Some(inst) = self.instances.get_mut(name) else { return };
        let jitter = self.rng.random::<f64>();
        inst.cgroup = None;
        let spec = inst.spec.clone();
        let cgroup = self.cgroups.as_ref().map(|c| prepare_cgroup(c, name, &spec)).transpose();
        let (cgroup_path, procs) = match cgroup {
            Ok(cgroup) => cgroup.unzip(),
            Err((reason, code)) => {
                return self.dispatch(name, Event::StartFailed { pid: None, reason, code, jitter });
            }
        };
        let (reader, writer) = match self.fifos.create(name) {
            Ok(ends) => ends,
            Err(e) => {
                let reason = format!("cannot make its output FIFO: {e}");
                return self
                    .dispatch(name, Event::StartFailed { pid: None, reason, code: 1, jitter });
            }
        };
        let prepared = Prepared { cgroup: cgroup_path, procs, output: writer };
        self.open_output(name, &spec, reader, prepared, jitter);
    }

    /// Whether the instance's cgroup holds nothing of an earlier run: two copies of a database
    /// on one data directory is the harm this avoids. What is left is killed, and the spawn
    /// goes on when the cgroup empties ([`Supervisor::cgroup_emptied`]); a cgroup that cannot
    /// be read fails the start.
    fn earlier_run_gone(&mut self, name: &str) -> bool {
        let Some(cgroups) = &self.cgroups else { return true };
        match cgroups.populated(name) {
            Ok(false) => true,
            Ok(true) => {
                let killed = cgroups.kill(name).unwrap_or(0);
                log(
                    name,
                    &format!(
                        "{killed} processes of an earlier run are still in `{}`: killed; \
                         starting once they are gone",
                        cgroups.path_of(name)
                    ),
                );
                wait_until_empty(self.tx.clone(), name.to_string(), cgroups.dir_of(name));
                false
            }
            Err(e) => {
                let jitter = self.rng.random::<f64>();
                let reason = format!("cannot tell whether its cgroup is empty for now: {e}");
                self.dispatch(name, Event::StartFailed { pid: None, reason, code: 1, jitter });
                false
            }
        }
    }

    /// Spawns the prepared start at once when its output goes to pinctl's own; else opens its
    /// output file off the loop first: the process starts once its file is open, a file it
    /// cannot have fails the start (209, as systemd's), and the loop does not wait on the file
    /// system meanwhile.
    fn open_output(
        &mut self,
        name: &str,
        spec: &InstanceSpec,
        reader: OwnedFd,
        prepared: Prepared,
        jitter: f64,
    ) {
        let file = match self.output_file(name, spec) {
            Ok(Some(file)) => file,
            Ok(None) => {
                self.relay(name, reader);
                return self.spawn_prepared(name, prepared);
            }
            Err(reason) => {
                let code = launch::EXIT_STDOUT;
                return self.dispatch(name, Event::StartFailed { pid: None, reason, code, jitter });
            }
        };
        self.starts += 1;
        let token = self.starts;
        if let Some(inst) = self.instances.get_mut(name) {
            inst.prepared = Some((token, prepared));
        }
        let (tx, instance) = (self.tx.clone(), name.to_string());
        file.pump(
            reader,
            Box::new(move |result| {
                let _ = tx.send(Input::OutputOpened { name: instance, token, result });
            }),
        );
    }

    /// The output file of start `token` was opened, or not: the start goes on or fails. A
    /// start that was stopped or replaced meanwhile is dropped (its FIFO's writer closes,
    /// and the file's pump ends).
    pub(super) fn output_opened(&mut self, name: &str, token: u64, result: Result<(), String>) {
        let Some(inst) = self.instances.get_mut(name) else { return };
        if inst.prepared.as_ref().is_none_or(|(t, _)| *t != token) {
            return;
        }
        let Some((_, prepared)) = inst.prepared.take() else { return };
        if inst.unit.state != State::Activating {
            return;
        }
        match result {
            Ok(()) => self.spawn_prepared(name, prepared),
            Err(reason) => {
                let (code, jitter) = (launch::EXIT_STDOUT, self.rng.random::<f64>());
                self.dispatch(name, Event::StartFailed { pid: None, reason, code, jitter });
            }
        }
    }

    /// Spawns the process of a start made ready, and checks its placement.
    pub(super) fn spawn_prepared(&mut self, name: &str, prepared: Prepared) {
        let jitter = self.rng.random::<f64>();
        let Some(inst) = self.instances.get_mut(name) else { return };
        let Prepared { cgroup: cgroup_path, procs, output } = prepared;
        let spawned = launch::spawn(&inst.spec, !self.options.unpinned, procs, self.nofile, output);
        let mut child = match spawned {
            Ok(child) => child,
            Err(f) => {
                let e = Event::StartFailed { pid: None, reason: f.reason, code: f.code, jitter };
                return self.dispatch(name, e);
            }
        };
        let Some(pid) = child.id().map(|p| p as Pid) else { return };
        // It joined its cgroup itself, before exec (a failure there failed the spawn).
        inst.cgroup = cgroup_path;
        let observed = launch::observe(pid);
        inst.start_time = observed.as_ref().map(|o| o.start_time);
        inst.cmdline = observed.map(|o| o.cmdline).unwrap_or_default();
        inst.started = Some(Instant::now());
        inst.adopted = false;
        let tx = self.tx.clone();
        let task_name = name.to_string();
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => match (status.code(), status.signal()) {
                    (Some(c), _) => Exit::Code(c),
                    (None, Some(s)) => Exit::Signal(s),
                    _ => Exit::Unknown,
                },
                Err(_) => Exit::Unknown,
            };
            let _ = tx.send(Input::Exited { name: task_name, pid, exit });
        });
        let verified =
            if self.options.unpinned { Ok(()) } else { launch::verify(pid, &inst.spec.placement) };
        let event = match verified {
            Ok(()) => {
                let p = &inst.spec.placement;
                log(
                    name,
                    &format!(
                        "started as {pid} on CPUs {} (nodes {}), memory {} {}",
                        p.cpus, p.nodes, p.memory_policy, p.memory_nodes
                    ),
                );
                Event::Started { pid }
            }
            Err((reason, code)) => Event::StartFailed { pid: Some(pid), reason, code, jitter },
        };
        self.dispatch(name, event);
    }

    /// The cgroup an instance's spawn waited on emptied (the spawn goes on), or did not.
    pub(super) fn cgroup_emptied(&mut self, name: &str, emptied: bool) {
        if self.instances.get(name).is_none_or(|i| i.unit.state != State::Activating) {
            return;
        }
        if emptied {
            return self.spawn(name);
        }
        let jitter = self.rng.random::<f64>();
        let reason = format!(
            "processes of an earlier run are still in its cgroup {} s after they were killed",
            EMPTY_TIMEOUT.as_secs()
        );
        self.dispatch(name, Event::StartFailed { pid: None, reason, code: 1, jitter });
    }
}

/// Makes an instance's cgroup ready for its next process: its path and the `cgroup.procs`
/// file the child joins it by, or why it cannot start (a reason and an exit status). With a
/// subtree, an instance starts in its cgroup or not at all: one started outside it would be
/// invisible to the next supervisor's look into the cgroups.
fn prepare_cgroup(
    cgroups: &Subtree,
    name: &str,
    spec: &InstanceSpec,
) -> Result<(String, std::fs::File), (String, i32)> {
    let enforce = spec.enforce_cgroup.then_some(&spec.placement);
    match cgroups.prepare(name, enforce) {
        Ok(procs) => Ok((cgroups.path_of(name), procs)),
        Err(cgroup::PrepareError::NoCpuset) => Err((
            "`enforce = \"cgroup\"`: the cpuset controller cannot be enabled here".to_string(),
            launch::status(pinctl_launch::ExitStatus::CpuAffinity),
        )),
        Err(cgroup::PrepareError::Io(why)) => {
            Err((format!("cannot prepare its cgroup for now: {why}"), 1))
        }
    }
}

/// Tells the loop when the cgroup folder `folder` of instance `name` empties, or that it did
/// not within `EMPTY_TIMEOUT`.
fn wait_until_empty(tx: mpsc::UnboundedSender<Input>, name: String, folder: PathBuf) {
    tokio::spawn(async move {
        let deadline = Instant::now() + EMPTY_TIMEOUT;
        let mut emptied = false;
        while Instant::now() < deadline {
            if matches!(cgroup::populated_in(&folder), Ok(false)) {
                emptied = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = tx.send(Input::CgroupEmptied { name, emptied });
    });
}
