//! Startup: what an earlier supervisor left (the state file, the cgroups), adopted or
//! cleaned up, and how an adopted process's exit is seen.

use super::*;

impl Supervisor {
    /// Adopts what the state file names and `/proc` confirms, and what runs in the instances'
    /// cgroups unrecorded when it proves to be the instance; kills what else runs there;
    /// starts the rest.
    pub(super) fn start(&mut self, specs: Vec<InstanceSpec>) {
        let recorded = self.recorded_entries(&specs);
        let mut adoptable: BTreeMap<String, Entry> = BTreeMap::new();
        for entry in recorded {
            match adopt::decide(&entry.process, launch::observe(entry.process.pid).as_ref()) {
                Adoption::Adopt => {
                    adoptable.insert(entry.name.clone(), entry);
                }
                Adoption::Ignore(why) => log(&entry.name, &format!("not adopted: {why}")),
            }
        }
        self.reconcile_cgroups(&specs, &mut adoptable);
        for spec in specs {
            let name = spec.name.clone();
            self.order.push(name.clone());
            match adoptable.remove(&name) {
                Some(entry) => {
                    let changed = entry.spec.changed(&spec);
                    self.adopt(entry, spec.policy.clone(), false);
                    if !changed.is_empty() {
                        let inst = self.instances.get_mut(&name).expect("just adopted");
                        inst.spec = spec;
                        let fields: Vec<&str> = changed.iter().map(|f| f.name()).collect();
                        log(&name, &format!("restarting: {} changed", fields.join(", ")));
                        self.dispatch(&name, Event::Restart);
                    }
                }
                None => {
                    self.instances.insert(name.clone(), Instance::new(spec));
                    self.dispatch(&name, Event::Start);
                }
            }
        }
        // Running instances the file no longer names: adopted to be stopped.
        for (name, entry) in adoptable {
            self.order.push(name.clone());
            let policy = entry.spec.policy.clone();
            self.adopt(entry, policy, true);
            self.dispatch(&name, Event::Stop);
        }
        self.after_change();
        let (running, total) = self.counts();
        self.notifier.send(&format!("READY=1\nSTATUS={running}/{total} running"));
    }

    /// What the state file records (or, on the first start after an upgrade, the older
    /// pinctl's shared state file, for the instances this file names).
    pub(super) fn recorded_entries(&self, specs: &[InstanceSpec]) -> Vec<Entry> {
        let path = &self.options.state_file;
        match statefile::read(path) {
            Ok(Some(state)) => return state.instances,
            Ok(None) => {}
            Err(e) => {
                // Never overwritten: it may be the only word on what an earlier supervisor ran.
                let kept = match statefile::set_aside(path, &e) {
                    Some(Ok(kept)) => format!("; kept as `{}`", kept.display()),
                    Some(Err(why)) => format!("; cannot set it aside ({why})"),
                    None => String::new(),
                };
                log("warning", &format!("{e}{kept}"));
                return Vec::new();
            }
        }
        let Some(legacy) = &self.options.legacy_state_file else { return Vec::new() };
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        match statefile::take_legacy(legacy, &names) {
            Ok(entries) => {
                if !entries.is_empty() {
                    log(
                        "supervisor",
                        &format!(
                            "taking {} instances over from `{}`, the state file of an older \
                             pinctl",
                            entries.len(),
                            legacy.display()
                        ),
                    );
                }
                entries
            }
            Err(e) => {
                log("warning", &e.to_string());
                Vec::new()
            }
        }
    }

    /// The cgroup is the truth: whatever runs in `<subtree>/<instance>` descends from a
    /// process this subtree's supervisor started. A recorded process found there is adopted
    /// (above); an unrecorded one is adopted when it proves to be the instance's main process
    /// (a supervisor killed between a spawn and its state write left it); anything else there,
    /// and every cgroup of an instance that no longer exists, is killed, with a log line.
    pub(super) fn reconcile_cgroups(
        &mut self,
        specs: &[InstanceSpec],
        adoptable: &mut BTreeMap<String, Entry>,
    ) {
        let Some(cgroups) = &self.cgroups else { return };
        let leftovers = cgroups.clear_leaf(EMPTY_TIMEOUT);
        if leftovers > 0 {
            log(
                "supervisor",
                &format!(
                    "killed {leftovers} processes an earlier supervisor was starting when it \
                     stopped (they had not reached their instance's cgroup)"
                ),
            );
        }
        let by_name: BTreeMap<&str, &InstanceSpec> =
            specs.iter().map(|s| (s.name.as_str(), s)).collect();
        let pinned = !self.options.unpinned;
        for name in cgroups.children() {
            let spec = by_name.get(name.as_str()).copied();
            reconcile_cgroup(cgroups, name, spec, pinned, adoptable);
        }
    }

    pub(super) fn adopt(&mut self, entry: Entry, policy: lifecycle::Policy, removing: bool) {
        let pid = entry.process.pid;
        let mut unit = Unit::adopted(policy, pid, self.now());
        unit.restarts = entry.restarts;
        let age = launch::process_age(entry.process.start_time).unwrap_or_default();
        // Its recorded cgroup is used (to kill it whole, to read its memory) only when it is
        // one of this supervisor's: `<subtree>/<cgroup>` (its own name's, or the one it was
        // started in under an earlier name). An older pinctl's layout, or a cgroup that moved,
        // leaves it to its process group.
        let cgroup =
            entry.process.cgroup.clone().filter(|c| {
                self.cgroups.as_ref().is_some_and(|cgroups| cgroups.name_in(c).is_some())
            });
        if entry.process.cgroup.is_some() && cgroup.is_none() {
            log(
                &entry.name,
                &format!(
                    "its cgroup `{}` is not in this supervisor's subtree: stopped through its \
                     process group",
                    entry.process.cgroup.as_deref().unwrap_or("")
                ),
            );
        }
        let inst = Instance {
            spec: entry.spec,
            unit,
            adopted: true,
            start_time: Some(entry.process.start_time),
            cmdline: entry.process.cmdline.clone(),
            started: Instant::now().checked_sub(age).or(Some(Instant::now())),
            timer: None,
            removing,
            cgroup,
            next_spec: None,
            last_exited_start: None,
            prepared: None,
        };
        self.follow_output(&entry.name, &inst.spec);
        self.instances.insert(entry.name.clone(), inst);
        match launch::pidfd_open(pid) {
            Ok(pidfd) => {
                log(
                    &entry.name,
                    &format!("adopted running process {pid}, watched through a pidfd"),
                );
                if let Err(e) =
                    watch_pidfd(entry.name.clone(), entry.process.clone(), pidfd, self.tx.clone())
                {
                    log(&entry.name, &format!("polling /proc: cannot start its watcher: {e}"));
                    tokio::spawn(poll_adopted(entry.name, entry.process, self.tx.clone()));
                }
            }
            Err(e) => {
                log(&entry.name, &format!("adopted running process {pid}"));
                // ESRCH: it exited since the adoption check; the first poll reports it.
                if Errno::from_io_error(&e) != Some(Errno::SRCH) && !self.said_polling {
                    self.said_polling = true;
                    log(
                        "supervisor",
                        &format!(
                            "cannot watch adopted processes through pidfds ({e}; pidfd_open \
                             needs Linux 5.3): polling /proc every {} ms instead",
                            POLL.as_millis()
                        ),
                    );
                }
                tokio::spawn(poll_adopted(entry.name, entry.process, self.tx.clone()));
            }
        }
    }
}

/// Settles one instance cgroup found at startup (see [`Supervisor::reconcile_cgroups`]): the
/// recorded process found in it keeps it; an empty one no instance claims is removed; an
/// unrecorded process proving to be the instance `spec` describes is adopted; anything else
/// in it is killed.
fn reconcile_cgroup(
    cgroups: &Subtree,
    name: String,
    spec: Option<&InstanceSpec>,
    pinned: bool,
    adoptable: &mut BTreeMap<String, Entry>,
) {
    let procs = cgroups.procs(&name);
    let path = cgroups.path_of(&name);
    // The cgroup's instance: the one of its name, or one a reload renamed while it ran there
    // (its recorded cgroup says so).
    let claims = |e: &Entry| e.name == name || e.process.cgroup.as_deref() == Some(&path);
    if let Some(entry) =
        adoptable.values_mut().find(|e| claims(e) && procs.contains(&e.process.pid))
    {
        // Recorded and found where it belongs (whatever the file said of its cgroup: the
        // kernel's word is the one kept).
        entry.process.cgroup = Some(path);
        return;
    }
    if procs.is_empty() {
        if !adoptable.values().any(claims) {
            cgroups.remove(&name);
        }
        return;
    }
    let mut why_not = Vec::new();
    let proven = spec
        .filter(|_| !adoptable.contains_key(&name))
        .and_then(|spec| Some((main_process(&procs, spec, pinned, &mut why_not)?, spec)))
        .and_then(|(pid, spec)| unrecorded_entry(&name, pid, spec.clone()));
    match proven {
        Some(entry) => {
            log(
                &name,
                &format!(
                    "process {} runs in the instance's cgroup though the state file does not \
                     record it (a supervisor stopped before writing it): adopted",
                    entry.process.pid
                ),
            );
            adoptable.insert(name, entry);
        }
        None => kill_unexplained(cgroups, &name, &procs, &why_not),
    }
}

/// The one process of `procs` that proves to be the instance `spec` describes, if exactly
/// one does; why each other does not goes to `why_not`.
fn main_process(
    procs: &[Pid],
    spec: &InstanceSpec,
    pinned: bool,
    why_not: &mut Vec<String>,
) -> Option<Pid> {
    let leaders: Vec<Pid> = procs
        .iter()
        .copied()
        .filter(|&p| match launch::proves_instance(p, spec, pinned) {
            Ok(()) => true,
            Err(why) => {
                why_not.push(format!("{p}: {why}"));
                false
            }
        })
        .collect();
    match leaders[..] {
        [pid] => Some(pid),
        _ => None,
    }
}

/// The state entry of an instance's process the state file missed, as `/proc` shows it now
/// (`None` if it is gone).
fn unrecorded_entry(name: &str, pid: Pid, spec: InstanceSpec) -> Option<Entry> {
    let observed = launch::observe(pid)?;
    Some(Entry {
        name: name.to_string(),
        process: Recorded {
            pid,
            start_time: observed.start_time,
            cgroup: observed.cgroup,
            cmdline: observed.cmdline,
        },
        digest: spec.digest(),
        spec,
        restarts: 0,
    })
}

/// Kills what runs in an instance's cgroup that neither the state file nor the instance
/// explains, saying which processes and why none proved to be the instance.
fn kill_unexplained(cgroups: &Subtree, name: &str, procs: &[Pid], why_not: &[String]) {
    let pids: Vec<String> = procs.iter().map(Pid::to_string).collect();
    let why = if why_not.is_empty() { String::new() } else { format!(" ({})", why_not.join("; ")) };
    log(
        name,
        &format!(
            "killing processes {} in `{}`: the state file does not explain them and none \
             proves to be the instance{why}",
            pids.join(", "),
            cgroups.path_of(name)
        ),
    );
    cgroups.kill(name);
}

/// Whether the recorded process still runs (same PID and start time, not a zombie).
fn still_runs(process: &Recorded) -> bool {
    launch::observe(process.pid)
        .is_some_and(|o| o.start_time == process.start_time && o.state != 'Z' && o.state != 'X')
}

/// Waits for an adopted process's pidfd to turn readable (it exited), on a thread of its own
/// that sleeps in poll(2) until then. Not tokio's `AsyncFd`: registering a descriptor with it
/// is `unsafe` (or deprecated) since tokio 1.5x, and only pinctl-sys may hold `unsafe`. A
/// blocked thread costs a small stack and no wake-ups. `Err`: no thread could be started.
fn watch_pidfd(
    name: String,
    process: Recorded,
    pidfd: std::os::fd::OwnedFd,
    tx: mpsc::UnboundedSender<Input>,
) -> io::Result<()> {
    std::thread::Builder::new().name("pinctl-adopted".into()).stack_size(64 * 1024).spawn(
        move || {
            // The PID could have been reused between the adoption check and pidfd_open; the
            // pidfd now pins whichever process holds it, so one more check settles that it
            // is ours. A poll that fails (never seen) falls back to polling /proc.
            if still_runs(&process) && launch::wait_pidfd(&pidfd).is_err() {
                while still_runs(&process) {
                    std::thread::sleep(POLL);
                }
            }
            let _ = tx.send(Input::Exited { name, pid: process.pid, exit: Exit::Unknown });
        },
    )?;
    Ok(())
}

/// Polls an adopted process until it is gone (kernels without `pidfd_open`).
async fn poll_adopted(name: String, process: Recorded, tx: mpsc::UnboundedSender<Input>) {
    while still_runs(&process) {
        tokio::time::sleep(POLL).await;
    }
    let _ = tx.send(Input::Exited { name, pid: process.pid, exit: Exit::Unknown });
}
