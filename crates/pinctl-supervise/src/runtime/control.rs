//! Control requests on the socket: naming instances, waiting for them to settle, status.

use super::*;

impl Supervisor {
    /// What a reload sees of an instance, its times on the supervisor's clock.
    pub(super) fn seen(&self, name: &str) -> Option<Seen<'_>> {
        let inst = self.instances.get(name)?;
        let time = |at: Instant| at.saturating_duration_since(self.origin);
        Some(Seen {
            unit: &inst.unit,
            started: inst.started.filter(|_| inst.unit.state.pid().is_some()).map(time),
            exited_start: inst.last_exited_start.map(time),
        })
    }

    /// Whether a waiter's instances have settled: none on its way somewhere nor held by the
    /// reload being applied, and, for a start, each started or failed
    /// ([`reload::start_outcome`]).
    pub(super) fn settled(&self, w: &Waiter) -> bool {
        let now = self.now();
        w.names.iter().all(|n| {
            let Some(seen) = self.seen(n) else { return true };
            if self.applying.as_ref().is_some_and(|a| a.reload.holds(n)) {
                return false;
            }
            match w.starting {
                None => !seen.unit.state.is_transient(),
                Some(asked) => !matches!(
                    reload::start_outcome(seen, asked, now),
                    reload::Outcome::Pending { .. }
                ),
            }
        })
    }

    /// The instances a settled start waiter asked for that did not survive their start.
    pub(super) fn start_failures(&self, w: &Waiter) -> Vec<StartFailure> {
        let Some(asked) = w.starting else { return Vec::new() };
        let now = self.now();
        w.names
            .iter()
            .filter_map(|n| match reload::start_outcome(self.seen(n)?, asked, now) {
                reload::Outcome::Failed(reason) => Some(StartFailure { name: n.clone(), reason }),
                _ => None,
            })
            .collect()
    }

    pub(super) fn counts(&self) -> (usize, usize) {
        let live = self.instances.values().filter(|i| !i.removing);
        let running = live.clone().filter(|i| matches!(i.unit.state, State::Active { .. })).count();
        (running, live.count())
    }

    /// The instances `names` address, in the supervisor's order: each an instance's name, a
    /// service's (all its instances) or a shell-style pattern over instance names (`redis-*`,
    /// `db-[01]`). `Err`: the error naming what matched nothing.
    pub(super) fn resolve(&self, names: &[String]) -> Result<Vec<String>, String> {
        let mut unmatched = Vec::new();
        let mut wanted = std::collections::BTreeSet::new();
        for name in names {
            let before = wanted.len();
            if self.instances.contains_key(name) {
                wanted.insert(name.as_str());
            }
            for (n, inst) in &self.instances {
                if inst.spec.service == *name {
                    wanted.insert(n.as_str());
                }
            }
            if wanted.len() == before && is_pattern(name) {
                let pattern = glob::Pattern::new(name)
                    .map_err(|e| format!("`{name}` is not a valid pattern: {e}"))?;
                wanted.extend(
                    self.instances.keys().filter(|n| pattern.matches(n)).map(String::as_str),
                );
            }
            if wanted.len() == before && !self.instances.contains_key(name) {
                unmatched.push(format!("`{name}`"));
            }
        }
        if !unmatched.is_empty() {
            return Err(format!(
                "no instance {}: the instances are {}",
                unmatched.join(", "),
                self.order.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(self.order.iter().filter(|n| wanted.contains(n.as_str())).cloned().collect())
    }

    /// Serves one control request: status, reload and reopening the logs answer on their own;
    /// start, stop and restart go to the instances they name and answer once those settle.
    pub(super) fn control(&mut self, request: Request, reply: oneshot::Sender<Response>) {
        let (names, request) = match request {
            Request::Status { names } => {
                let r = if names.is_empty() {
                    self.status(&self.order)
                } else {
                    self.resolve(&names).map_or_else(Response::error, |names| self.status(&names))
                };
                let _ = reply.send(r);
                return;
            }
            Request::Reload { dry_run } => {
                self.request_reload(PendingReload { dry_run, reply: Some(reply) });
                return;
            }
            Request::Detach => return,
            Request::ReopenLogs => return self.reopen_logs(reply),
            Request::Start { names } => (names, reload::Request::Start),
            Request::Stop { names } => (names, reload::Request::Stop),
            Request::Restart { names } => (names, reload::Request::Restart),
        };
        self.request_instances(&names, request, reply);
    }

    /// Asks every output file to reopen and answers with each one's outcome, waited for off
    /// the loop: a file system that does not answer holds only this.
    fn reopen_logs(&self, reply: oneshot::Sender<Response>) {
        let asked = self.reopen_outputs();
        tokio::task::spawn_blocking(move || {
            let reopened = wait_reopened(asked);
            // Each file's outcome is in the answer; the request itself was served.
            let _ = reply.send(Response { ok: true, reopened, ..Response::default() });
        });
    }

    /// Sends a start, stop or restart to the instances `names` address (through the reload
    /// being applied, if one is), and answers once they settle; or refuses it, saying why.
    fn request_instances(
        &mut self,
        names: &[String],
        request: reload::Request,
        reply: oneshot::Sender<Response>,
    ) {
        if names.is_empty() {
            let _ = reply.send(Response::error("name at least one instance"));
            return;
        }
        let names = match self.resolve(names) {
            Ok(names) => names,
            Err(e) => {
                let _ = reply.send(Response::error(e));
                return;
            }
        };
        if self.shutting_down {
            let _ = reply.send(Response::error("the supervisor is stopping"));
            return;
        }
        // An instance a reload removed is on its way out: it never starts again. A service
        // name or a pattern simply does not cover it; asked for by name alone, it is refused.
        let (removed, names): (Vec<String>, Vec<String>) = names
            .into_iter()
            .partition(|n| request != reload::Request::Stop && self.instances[n].removing);
        if names.is_empty() {
            let _ = reply.send(Response::error(format!(
                "{} removed from the file by a reload: stopping, and never started again",
                removed.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            )));
            return;
        }
        for name in &names {
            let event = reload::Event::Request { name: name.clone(), request };
            if self.applying.is_some() {
                self.progress_reload(event);
            } else {
                self.dispatch(name, request.event());
            }
        }
        let starting = (request != reload::Request::Stop).then(|| self.now());
        self.waiters.push(Waiter { names, starting, reply });
    }

    pub(super) fn status(&self, names: &[String]) -> Response {
        let instances = self
            .order
            .iter()
            .filter(|n| names.contains(n))
            .filter_map(|n| {
                let inst = self.instances.get(n)?;
                let pid = inst.unit.state.pid();
                let usage = pid.and_then(launch::usage);
                Some(InstanceStatus {
                    name: n.clone(),
                    service: inst.spec.service.clone(),
                    state: inst.unit.state.name().into(),
                    pid,
                    uptime_s: pid.and(inst.started).map(|s| s.elapsed().as_secs_f64()),
                    restarts: inst.unit.restarts,
                    last_exit: inst.unit.last_exit.map(|e| e.to_string()),
                    reason: match &inst.unit.state {
                        State::Failed { reason } => Some(reason.clone()),
                        _ => None,
                    },
                    adopted: inst.adopted && pid.is_some(),
                    placement: inst.spec.placement.clone(),
                    cgroup: inst.cgroup.clone().filter(|_| pid.is_some()),
                    cpu_s: usage.map(|(cpu, _)| cpu),
                    rss_bytes: usage.and_then(|(_, rss)| rss),
                    drift: self.observer.as_ref().and_then(|o| o.drift(n)),
                })
            })
            .collect();
        let supervisor = crate::protocol::SupervisorStatus {
            name: self.options.name.clone(),
            file: self.options.config.as_ref().map(|p| p.display().to_string()),
            pid: std::process::id(),
        };
        Response {
            ok: true,
            instances: Some(instances),
            supervisor: Some(supervisor),
            ..Response::default()
        }
    }
}

/// Waits for each output file asked to reopen, all of them within `REOPEN_PATIENCE`, and says
/// how each went.
fn wait_reopened(asked: Vec<(String, Arc<OutputFile>, u64)>) -> Vec<ReopenedOutput> {
    let deadline = std::time::Instant::now() + REOPEN_PATIENCE;
    asked
        .into_iter()
        .map(|(name, file, asked)| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let error = match file.wait_reopened(asked, left) {
                Some(Ok(())) => None,
                Some(Err(e)) => Some(e),
                None => Some(format!(
                    "not reopened within {} s (its file system does not answer?)",
                    REOPEN_PATIENCE.as_secs()
                )),
            };
            ReopenedOutput { name, path: file.path().display().to_string(), error }
        })
        .collect()
}
