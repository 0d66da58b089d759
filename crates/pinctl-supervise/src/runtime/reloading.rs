//! Reloads: re-planning off the loop, then applying the difference in the order
//! [`crate::reload::step`] decides.

use super::*;

impl Supervisor {
    /// Re-plans the file on a blocking thread (a large file takes a while; the loop goes on
    /// meanwhile), then [`Supervisor::finish_reload`] applies the difference. A reload asked
    /// for while one is being planned waits for it.
    pub(super) fn request_reload(&mut self, reload: PendingReload) {
        if self.shutting_down {
            if let Some(reply) = reload.reply {
                let _ = reply.send(Response::error("the supervisor is stopping"));
            }
            return;
        }
        if self.applying.is_some() {
            self.reloads.push_back(reload);
            return;
        }
        let Some(mut planner) = self.planner.take() else {
            self.reloads.push_back(reload);
            return;
        };
        if !reload.dry_run {
            self.notifier.reloading();
        }
        // Running (or starting) instances keep their nodes and CPUs where the new plan can
        // keep them; one that is stopped, failed or waiting to restart loses nothing by moving.
        let running: BTreeMap<String, Placement> = self
            .instances
            .iter()
            .filter(|(_, i)| !i.removing)
            .filter(|(_, i)| matches!(i.unit.state, State::Active { .. } | State::Activating))
            .map(|(name, i)| (name.clone(), i.spec.placement.clone()))
            .collect();
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let result = planner(&running);
            let _ = tx.send(Input::Planned { planner, result: Box::new(result), reload });
        });
    }

    /// Applies a reload's plan (or only answers with the difference, for a dry run). The
    /// answer waits until the reload's starts have settled.
    pub(super) fn finish_reload(&mut self, planned: Result<Replan, String>, reload: PendingReload) {
        let dry_run = reload.dry_run;
        let Replan { specs, file, warnings } = match planned {
            Ok(replan) if !self.shutting_down => replan,
            outcome => {
                let e = match outcome {
                    Err(report) => {
                        format!("the service file was not applied, nothing changed:\n{report}")
                    }
                    Ok(_) => "the supervisor is stopping".to_string(),
                };
                if !dry_run {
                    self.notifier.send("READY=1");
                }
                match reload.reply {
                    Some(reply) => {
                        let _ = reply.send(Response::error(e));
                    }
                    None => log("reload", &e),
                }
                return;
            }
        };
        let current: Vec<InstanceSpec> = self
            .order
            .iter()
            .filter_map(|n| self.instances.get(n).filter(|i| !i.removing))
            .map(|i| i.next_spec.clone().unwrap_or_else(|| i.spec.clone()))
            .collect();
        let changes = diff(&current, &specs);
        let lines = changes
            .iter()
            .map(|(name, change)| {
                let mut v = serde_json::to_value(change).unwrap_or_default();
                v["name"] = serde_json::Value::String(name.clone());
                v
            })
            .collect();
        let mut response = Response { ok: true, changes: Some(lines), ..Response::default() };
        if dry_run {
            response.warnings = warnings;
            if let Some(reply) = reload.reply {
                let _ = reply.send(response);
            }
            return;
        }
        for w in &warnings {
            log("warning", w);
        }
        response.warnings = warnings;
        if let Some(observer) = self.observer.as_mut() {
            response.not_applied = observer.reloaded(&file);
        }
        for note in &response.not_applied {
            log("reload", &format!("not applied: {note}"));
        }
        self.apply(&changes, specs, response, reload.reply);
        self.notifier.send("READY=1");
    }

    /// Applies a reload's difference: renames and lifecycle keys at once; the rest as
    /// [`reload::step`] orders it (what it removes, restarts or starts is gone before any of
    /// its starts begins).
    pub(super) fn apply(
        &mut self,
        changes: &[(String, Change)],
        specs: Vec<InstanceSpec>,
        response: Response,
        reply: Option<oneshot::Sender<Response>>,
    ) {
        let mut by_name: HashMap<String, InstanceSpec> =
            specs.iter().map(|s| (s.name.clone(), s.clone())).collect();
        let (mut removed, mut starts, mut held) = (Vec::new(), Vec::new(), HashMap::new());
        for (name, change) in changes {
            log(name, &format!("reload: {change}"));
            match change {
                Change::Rename { from } => {
                    let spec = by_name.remove(name).expect("new spec");
                    if !self.rename(from, name, spec.clone()) {
                        // Nothing runs under the old name (an earlier reload took it):
                        // the new one simply starts.
                        self.instances.insert(name.clone(), Instance::new(spec));
                        starts.push(name.clone());
                    }
                }
                Change::Start | Change::Restart { .. } => {
                    let spec = by_name.remove(name).expect("new spec");
                    // An instance of that name may still be stopping (an earlier reload
                    // removed it): it is the reload's to clear, then start with `spec`.
                    let inst = self
                        .instances
                        .entry(name.clone())
                        .or_insert_with(|| Instance::new(spec.clone()));
                    inst.removing = false;
                    inst.unit.policy = spec.policy.clone();
                    held.insert(name.clone(), spec);
                    starts.push(name.clone());
                }
                Change::Stop => {
                    if let Some(inst) = self.instances.get_mut(name) {
                        inst.removing = true;
                    }
                    removed.push(name.clone());
                }
                Change::Keep => {
                    let spec = by_name.remove(name).expect("new spec");
                    if let Some(inst) = self.instances.get_mut(name) {
                        inst.unit.policy = spec.policy.clone();
                        if inst.next_spec.is_some() {
                            inst.next_spec = Some(spec);
                        } else {
                            inst.spec = spec;
                        }
                    }
                }
            }
        }
        let mut order: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        for name in &self.order {
            if !order.contains(name) && self.instances.contains_key(name) {
                order.push(name.clone());
            }
        }
        self.order = order;
        let reload = Reload::new(removed, starts, self.now());
        self.applying = Some(Applying { reload, specs: held, response, reply, wake: None });
        self.progress_reload(reload::Event::Look);
    }

    /// Gives the instance `from` the name `to`, its process untouched: `false` when there is
    /// no `from`. Its process stays in the cgroup it was started in (cgroup v2 renames no
    /// cgroup) until it next starts, in `to`'s.
    pub(super) fn rename(&mut self, from: &str, to: &str, spec: InstanceSpec) -> bool {
        let Some(mut inst) = self.instances.remove(from) else { return false };
        inst.unit.policy = spec.policy.clone();
        inst.spec = spec;
        self.instances.insert(to.to_string(), inst);
        // Its FIFO and output writer follow it (its lines keep the old name's prefix on
        // pinctl's stdout until it restarts).
        self.fifos.rename(from, to);
        if let Some(file) = self.outputs.remove(from) {
            self.outputs.insert(to.to_string(), file);
        }
        self.order.iter_mut().filter(|n| *n == from).for_each(|n| *n = to.to_string());
        // Its exit watchers (a task or a pidfd thread) still know it by its old name: an exit
        // is matched by PID (see `exited`).
        true
    }

    /// Gives the reload being applied `event` and carries out what [`reload::step`] says,
    /// looking again after each round that moved a lifecycle (a stop of an instance waiting
    /// to restart leaves it stopped at once: the reload can go on in the same turn).
    pub(super) fn progress_reload(&mut self, event: reload::Event) {
        let mut event = Some(event);
        // Each round either moves a lifecycle or ends: clearing, then starting, then
        // settling take at most three.
        for _ in 0..4 {
            let Some(mut applying) = self.applying.take() else { return };
            let now = self.now();
            let e = event.take().unwrap_or(reload::Event::Look);
            applying.wake = None;
            let actions = reload::step(&mut applying.reload, e, |n| self.seen(n), now);
            let moved = actions.iter().any(|a| matches!(a, reload::Action::Dispatch { .. }));
            let mut answer = None;
            for action in actions {
                match action {
                    reload::Action::Dispatch { name, event } => self.dispatch(&name, event),
                    reload::Action::TakeSpec { name } => {
                        if let Some(inst) = self.instances.get_mut(&name) {
                            let next = applying.specs.remove(&name).or(inst.next_spec.take());
                            inst.next_spec = None;
                            if let Some(spec) = next {
                                inst.spec = spec;
                            }
                        }
                    }
                    reload::Action::SpecForNextStart { name } => {
                        if let Some((inst, spec)) =
                            self.instances.get_mut(&name).zip(applying.specs.remove(&name))
                        {
                            inst.next_spec = Some(spec);
                        }
                    }
                    reload::Action::WakeAt { at } => applying.wake = Some(at),
                    reload::Action::Answer { failed } => answer = Some(failed),
                }
            }
            match answer {
                Some(failed) => return self.finish_reload_with(applying, failed),
                None => self.applying = Some(applying),
            }
            if !moved {
                return;
            }
        }
    }

    /// Answers the reload that was being applied, its starts settled, and begins the next.
    pub(super) fn finish_reload_with(
        &mut self,
        mut applying: Applying,
        failed: Vec<(String, String)>,
    ) {
        // Whatever spec it still holds is for that instance's next start.
        for (name, spec) in applying.specs.drain() {
            if let Some(inst) = self.instances.get_mut(&name) {
                inst.next_spec = Some(spec);
            }
        }
        let failed: Vec<StartFailure> =
            failed.into_iter().map(|(name, reason)| StartFailure { name, reason }).collect();
        for f in &failed {
            log(&f.name, &format!("reload: did not start: {}", f.reason));
        }
        applying.response.instances = self.status(applying.reload.starts()).instances;
        applying.response.failed_to_start = failed;
        if let Some(reply) = applying.reply.take() {
            let _ = reply.send(applying.response);
        }
        if let Some(next) = self.reloads.pop_front() {
            self.request_reload(next);
        }
    }
}
