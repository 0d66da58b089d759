//! The event loop: signals, exits, timers and requests turned into lifecycle events, and
//! the actions those return carried out; the bookkeeping after every change.

use super::*;

impl Supervisor {
    pub(super) async fn main_loop(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<Input>,
        signals: Signals,
    ) -> Outcome {
        let Signals { mut term, mut int, mut hup, mut usr1, mut usr2 } = signals;
        let mut watchdog = self.notifier.watchdog_interval().map(tokio::time::interval);
        loop {
            if self.shutting_down && self.instances.values().all(|i| i.unit.state.pid().is_none()) {
                self.drain_fifos().await;
                self.close_outputs();
                self.fifos.remove_all();
                let _ = std::fs::remove_file(&self.options.state_file);
                if let Some(cgroups) = &self.cgroups {
                    cgroups.remove_all();
                }
                return Outcome::Stopped { clean: !self.unclean };
            }
            let next_timer = self.instances.values().filter_map(|i| i.timer).min();
            // A start waiting out its grace is answered when the grace is over.
            let grace = self
                .waiters
                .iter()
                .filter(|w| w.starting.is_some())
                .flat_map(|w| w.names.iter())
                .filter_map(|n| self.instances.get(n)?.started.map(|s| s + START_GRACE))
                .chain(self.applying.as_ref().and_then(|a| a.wake).map(|at| self.origin + at))
                .filter(|&at| at > Instant::now())
                .min();
            let wake = match (next_timer.map(|at| self.origin + at), grace) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(()) = recv_signal(&mut term) => self.shutdown("SIGTERM"),
                Some(()) = recv_signal(&mut int) => self.shutdown("SIGINT"),
                Some(()) = recv_signal(&mut hup) => {
                    self.request_reload(PendingReload { dry_run: false, reply: None });
                }
                Some(()) = recv_signal(&mut usr1) => {
                    // logrotate's `postrotate`: each writer says in the log how it went.
                    self.reopen_outputs();
                }
                Some(()) = recv_signal(&mut usr2) => {
                    self.detach();
                    return Outcome::Detached;
                }
                _ = tick(&mut watchdog) => self.notifier.send("WATCHDOG=1"),
                () = sleep => self.fire_timers(),
                Some(msg) = rx.recv() => match msg {
                    Input::Exited { name, pid, exit } => self.exited(&name, pid, exit),
                    Input::Control { request: Request::Detach, .. } => {
                        self.detach();
                        return Outcome::Detached;
                    }
                    Input::Control { request, reply } => self.control(request, reply),
                    Input::CgroupEmptied { name, emptied } => self.cgroup_emptied(&name, emptied),
                    Input::OutputOpened { name, token, result } => {
                        self.output_opened(&name, token, result);
                    }
                    Input::Planned { planner, result, reload } => {
                        self.planner = Some(planner);
                        self.finish_reload(*result, reload);
                        if let Some(next) = self.reloads.pop_front() {
                            self.request_reload(next);
                        }
                    }
                },
            }
            self.after_change();
        }
    }

    pub(super) fn detach(&mut self) {
        log("detach", "exiting and leaving every instance running for the next supervisor");
        self.write_state();
        // Their FIFOs stay for the next supervisor; what the writers hold goes out first.
        self.close_outputs();
    }

    pub(super) fn shutdown(&mut self, why: &str) {
        if self.shutting_down {
            return;
        }
        log("supervisor", &format!("{why}: stopping every instance"));
        self.notifier.send("STOPPING=1");
        self.shutting_down = true;
        for name in self.order.clone() {
            self.dispatch(&name, Event::Stop);
        }
    }

    pub(super) fn fire_timers(&mut self) {
        let now = self.now();
        let due: Vec<String> = self
            .order
            .iter()
            .filter(|n| self.instances.get(*n).and_then(|i| i.timer).is_some_and(|t| t <= now))
            .cloned()
            .collect();
        for name in due {
            if let Some(inst) = self.instances.get_mut(&name) {
                inst.timer = None;
            }
            self.dispatch(&name, Event::Timer);
        }
    }

    pub(super) fn exited(&mut self, name: &str, pid: Pid, exit: Exit) {
        // An instance renamed by a reload is still known to its exit watcher by its old name:
        // its PID finds it.
        let name = match self.instances.get(name) {
            Some(i) if i.unit.state.pid() == Some(pid) => name.to_string(),
            _ => self
                .instances
                .iter()
                .find(|(_, i)| i.unit.state.pid() == Some(pid))
                .map_or_else(|| name.to_string(), |(n, _)| n.clone()),
        };
        let name = name.as_str();
        let Some(inst) = self.instances.get_mut(name) else { return };
        if inst.unit.state.pid() == Some(pid) {
            inst.last_exited_start = inst.started;
            if !inst.adopted {
                // Helpers the instance forked die with it (its process group): the group
                // still holds the PID, so it cannot belong to anyone else yet. (An adopted
                // process was reaped by init: its PID may be free, so no group kill.)
                if let Some(group) = ProcessId::from_raw(pid) {
                    let _ = kill_process_group(group, Signal::KILL);
                }
            }
            if let Some((cgroups, cgroup)) = self.cgroups.as_ref().zip(inst.cgroup.as_deref()) {
                if let Some(dir) = cgroups.name_in(cgroup) {
                    cgroups.kill(dir);
                    cgroups.remove(dir);
                }
            }
        }
        let jitter = self.rng.random::<f64>();
        self.dispatch(name, Event::Exited { pid, exit, jitter });
    }

    pub(super) fn dispatch(&mut self, name: &str, event: Event) {
        let now = self.now();
        let Some(inst) = self.instances.get_mut(name) else { return };
        if self.shutting_down && matches!(event, Event::Start | Event::Restart) {
            return;
        }
        let actions = lifecycle::step(&mut inst.unit, event, now);
        if self.shutting_down {
            // Nothing restarts while the supervisor stops.
            if let State::AutoRestart { .. } = inst.unit.state {
                inst.unit.state = State::Inactive;
            }
        }
        for action in actions {
            self.execute(name, action);
        }
    }

    pub(super) fn execute(&mut self, name: &str, action: Action) {
        match action {
            Action::Log(message) => log(name, &message),
            Action::SetTimer { at } => {
                if let Some(inst) = self.instances.get_mut(name) {
                    inst.timer = Some(at);
                }
            }
            Action::Kill { pid, signal } => self.signal(name, pid, signal),
            Action::Spawn => {
                if self.shutting_down {
                    return;
                }
                // Its earlier process is gone: the spec a reload left for its next start is
                // what it runs now.
                if let Some(inst) = self.instances.get_mut(name) {
                    if let Some(next) = inst.next_spec.take() {
                        inst.spec = next;
                    }
                }
                self.spawn(name);
            }
        }
    }

    pub(super) fn signal(&mut self, name: &str, pid: Pid, signal: i32) {
        let Some(inst) = self.instances.get(name) else { return };
        // Never signal a recycled PID: the process must still be the one we started.
        let now = launch::observe(pid);
        if now.as_ref().map(|o| o.start_time) != inst.start_time {
            log(name, &format!("process {pid} is gone or was replaced: not signalled"));
            return;
        }
        if signal == lifecycle::SIGKILL && self.shutting_down {
            self.unclean = true;
        }
        if signal == lifecycle::SIGKILL {
            if let Some((cgroups, cgroup)) = self.cgroups.as_ref().zip(inst.cgroup.as_deref()) {
                if let Some(dir) = cgroups.name_in(cgroup) {
                    cgroups.kill(dir);
                }
            }
        }
        let (Some(sig), Some(id)) = (Signal::from_named_raw(signal), ProcessId::from_raw(pid))
        else {
            return;
        };
        let result = if launch::process_group(pid) == Some(pid) {
            kill_process_group(id, sig)
        } else {
            kill_process(id, sig)
        };
        if let Err(e) = result {
            log(name, &format!("cannot send signal {signal} to {pid}: {e}"));
        }
    }

    /// Bookkeeping after every input: drop removed instances once stopped, record the running
    /// processes, answer requests that waited for a state, tell systemd.
    pub(super) fn after_change(&mut self) {
        let gone: Vec<String> = self
            .instances
            .iter()
            .filter(|(_, i)| {
                i.removing && matches!(i.unit.state, State::Inactive | State::Failed { .. })
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            let inst = self.instances.remove(&name);
            // Its cgroup goes with it, also one made for a start that failed before any
            // process ran there (nothing exited there to remove it).
            if let Some(cgroups) = &self.cgroups {
                cgroups.remove(&name);
                if let Some(dir) =
                    inst.and_then(|i| i.cgroup).as_deref().and_then(|c| cgroups.name_in(c))
                {
                    cgroups.remove(dir);
                }
            }
            self.order.retain(|n| *n != name);
            if let Some(file) = self.outputs.remove(&name) {
                file.close(Duration::ZERO);
            }
            self.fifos.remove(&name);
        }
        let mut pids: Vec<(String, Pid)> = self
            .order
            .iter()
            .filter_map(|n| Some((n.clone(), self.instances.get(n)?.unit.state.pid()?)))
            .collect();
        pids.sort();
        // Written when a process starts (or is adopted), so a supervisor killed right after
        // can adopt it. An exit alone is not written: it would put an fsync (several ms on a
        // busy disk) between a child's exit and its replacement's start, and the entry it
        // leaves is harmless (adoption checks PID and start time, so a gone or reused PID is
        // never adopted nor signalled); the next start's write drops it.
        let started = pids.iter().any(|p| !self.recorded.contains(p));
        if started && !self.shutting_down {
            self.write_state();
            self.recorded = pids;
        }
        // A reload whose stops are over starts what it starts, and is answered once they
        // settled.
        self.progress_reload(reload::Event::Look);
        let waiters = std::mem::take(&mut self.waiters);
        for w in waiters {
            if !self.settled(&w) {
                self.waiters.push(w);
                continue;
            }
            let failed = self.start_failures(&w);
            let status = self.status(&w.names);
            let r = Response {
                ok: true,
                instances: Some(status.instances.unwrap_or_default()),
                failed_to_start: failed,
                ..Response::default()
            };
            let _ = w.reply.send(r);
        }
        let (running, total) = self.counts();
        let line = format!("{running}/{total} running");
        if line != self.status_line {
            self.notifier.send(&format!("STATUS={line}"));
            self.status_line = line;
        }
        self.tell_observer();
    }

    /// Tells the observer of the instances when anything it sees changed.
    pub(super) fn tell_observer(&mut self) {
        let Some(observer) = self.observer.as_mut() else { return };
        let now: Vec<Observed> = self
            .order
            .iter()
            .filter_map(|n| {
                let i = self.instances.get(n)?;
                Some(Observed {
                    name: n.clone(),
                    service: i.spec.service.clone(),
                    pid: i.unit.state.pid().and_then(|p| u32::try_from(p).ok()),
                    cgroup: i.cgroup.clone(),
                    placement: i.spec.placement.clone(),
                    restarts: i.unit.restarts,
                })
            })
            .collect();
        if now != self.observed {
            observer.instances(&now);
            self.observed = now;
        }
    }

    pub(super) fn write_state(&self) {
        let instances = self
            .order
            .iter()
            .filter_map(|n| {
                let inst = self.instances.get(n)?;
                let pid = inst.unit.state.pid()?;
                Some(Entry {
                    name: n.clone(),
                    process: Recorded {
                        pid,
                        start_time: inst.start_time?,
                        cgroup: inst.cgroup.clone(),
                        // As it reads now: a process may exec again after its start
                        // (`sh -c '...; exec server'`).
                        cmdline: launch::observe(pid)
                            .filter(|o| Some(o.start_time) == inst.start_time)
                            .map_or_else(|| inst.cmdline.clone(), |o| o.cmdline),
                    },
                    digest: inst.spec.digest(),
                    spec: inst.spec.clone(),
                    restarts: inst.unit.restarts,
                })
            })
            .collect();
        let state = StateFile {
            format: statefile::FORMAT.into(),
            boot_id: statefile::boot_id(),
            supervisor_pid: std::process::id() as i32,
            instances,
        };
        if let Err(e) = statefile::write(&self.options.state_file, &state) {
            log("warning", &e.to_string());
        }
    }
}
