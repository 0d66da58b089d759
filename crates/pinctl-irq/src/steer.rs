//! Carrying out a [`Decision`] on a host, recording what it changes
//! and putting it back: the part of steering that writes.
//!
//! [`Steerer::apply`] reads the host's interrupts afresh, decides from the host as it was
//! before pinctl (recorded originals in place of what pinctl wrote), tells irqbalance which
//! CPUs to avoid and which interrupts to leave alone when one runs, records every original it
//! is about to change, then writes `/proc/irq/N/smp_affinity_list` and the queues' RPS and XPS
//! masks. The vectors pinctl places (a steered NIC's) must be exactly where it put them; every
//! other interrupt it governs only has to stay off the quiet CPUs, so once written it is left
//! wherever irqbalance moves it next. Anything changed earlier that the decision no longer
//! wants is put back. It is idempotent: applied again on an unchanged host it writes nothing,
//! so a supervisor applies it after every change and every `watch-interval` (interrupts that
//! appear later, an irqbalance that restarted, an affinity someone put on a quiet CPU).
//!
//! [`Steerer::restore`] puts back everything recorded and removes the record.
//!
//! A write the kernel refuses (EIO: a managed interrupt, or one whose chip cannot move it) is
//! a line of the report naming the interrupt, never an error; it is not tried again.

use std::collections::BTreeSet;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use pinctl_sysfs::FsRoot;
use pinctl_sysfs::fsroot::parsed;
use pinctl_sysfs::parse::id_list;
use pinctl_topology::{CpuSet, Interrupts, Irqbalance, Topology};
use serde::Serialize;

use crate::decide::{Decision, Unmovable, Why, decide};
use crate::inputs::SteerInputs;
use crate::irqbalance::{Balancer, SocketBalancer, ban_cpus_command, ban_irqs_command};
use crate::record::{self, IrqbalanceRecord, OriginalIrq, OriginalQueue, Record, RecordError};

/// Where steering writes: the seam its tests replace.
pub trait Files {
    /// Writes `text` into the kernel file at `rel` (relative to the root).
    fn write(&mut self, rel: &str, text: &str) -> io::Result<()>;
}

/// The files under a root directory (`/` on the live machine), opened for writing without
/// following a link at the last name and never created.
#[derive(Debug, Clone)]
pub struct RootFiles {
    root: PathBuf,
}

impl RootFiles {
    pub fn new(root: &Path) -> RootFiles {
        RootFiles { root: root.to_path_buf() }
    }
}

impl Files for RootFiles {
    fn write(&mut self, rel: &str, text: &str) -> io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(self.root.join(rel))?;
        // One write: procfs and sysfs take the value of the first.
        f.write_all(text.as_bytes())
    }
}

/// An interrupt pinctl moved (or put back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Moved {
    pub irq: u32,
    pub name: String,
    pub from: CpuSet,
    pub to: CpuSet,
    /// Why pinctl governs it (`None`: put back).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<Why>,
}

/// A queue mask pinctl set (or put back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueSet {
    pub interface: String,
    /// `rps_cpus` of `rx-N` when true, `xps_cpus` of `tx-N` otherwise.
    pub rx: bool,
    pub queue: u32,
    pub from: CpuSet,
    pub to: CpuSet,
}

/// A write the kernel refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    pub irq: u32,
    pub name: String,
    pub why: String,
}

/// What one apply or restore did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The quiet instances' CPUs.
    pub quiet_cpus: CpuSet,
    pub moved: Vec<Moved>,
    pub queues: Vec<QueueSet>,
    /// Interrupts and queues put back as they were.
    pub restored: Vec<Moved>,
    pub restored_queues: Vec<QueueSet>,
    pub refused: Vec<Refused>,
    /// Managed interrupts on quiet CPUs: they stay.
    pub unmovable: Vec<Unmovable>,
    /// What irqbalance was told, when something was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub irqbalance: Option<String>,
    /// Interrupts kept off quiet CPUs by irqbalance rather than by pinctl.
    pub left_to_irqbalance: usize,
    /// What did not go as planned (said once per steerer).
    pub warnings: Vec<String>,
}

impl Report {
    /// Whether anything was written or told.
    pub fn changed(&self) -> bool {
        !self.moved.is_empty()
            || !self.queues.is_empty()
            || !self.restored.is_empty()
            || !self.restored_queues.is_empty()
            || self.irqbalance.is_some()
    }

    /// The report as log lines (`key=value`): one per change, then (when anything changed or
    /// was refused) a summary, `steered quiet_cpus=0-4 moved=12 ...`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in &self.moved {
            let why = match &m.why {
                Some(Why::KeptFreeNic { interface }) => {
                    format!(" reason=kept-free-nic interface={interface}")
                }
                Some(Why::NicQueues { interface, instances }) => {
                    format!(
                        " reason=nic-queues interface={interface} instances={}",
                        instances.join(",")
                    )
                }
                Some(Why::OffQuietCpus) => " reason=off-quiet-cpus".to_string(),
                None => String::new(),
            };
            out.push(format!(
                "moved irq={} name={:?} from={} to={}{why}",
                m.irq, m.name, m.from, m.to
            ));
        }
        for q in &self.queues {
            let (kind, file) = if q.rx { ("rx", "rps_cpus") } else { ("tx", "xps_cpus") };
            out.push(format!(
                "set {file} interface={} queue={kind}-{} from={} to={}",
                q.interface, q.queue, q.from, q.to
            ));
        }
        for m in &self.restored {
            out.push(format!("restored irq={} name={:?} to={}", m.irq, m.name, m.to));
        }
        for q in &self.restored_queues {
            let (kind, file) = if q.rx { ("rx", "rps_cpus") } else { ("tx", "xps_cpus") };
            out.push(format!(
                "restored {file} interface={} queue={kind}-{} to={}",
                q.interface, q.queue, q.to
            ));
        }
        for r in &self.refused {
            out.push(format!("refused irq={} name={:?} reason={:?}", r.irq, r.name, r.why));
        }
        if let Some(b) = &self.irqbalance {
            out.push(format!("irqbalance {b}"));
        }
        for w in &self.warnings {
            out.push(format!("warning message={w:?}"));
        }
        if self.changed() || !self.refused.is_empty() {
            out.push(format!(
                "steered quiet_cpus={} moved={} queues={} restored={} refused={} unmovable={} \
                 left_to_irqbalance={}",
                if self.quiet_cpus.is_empty() {
                    "none".to_string()
                } else {
                    self.quiet_cpus.to_string()
                },
                self.moved.len(),
                self.queues.len(),
                self.restored.len() + self.restored_queues.len(),
                self.refused.len(),
                self.unmovable.len(),
                self.left_to_irqbalance
            ));
        }
        out
    }
}

/// Why steering could not go on at all (a refused write is not one: see [`Report::refused`]).
#[derive(Debug, thiserror::Error)]
pub enum SteerError {
    #[error("cannot read the host's interrupts")]
    Read(#[from] pinctl_sysfs::DiscoveryError),
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The record is there but was refused (set aside, with how to put it back by hand).
    #[error("{0}")]
    Refused(Box<record::Refused>),
}

/// Steers one host's interrupts and keeps the record of what it changed.
#[derive(Debug)]
pub struct Steerer<F: Files = RootFiles, B: Balancer = SocketBalancer> {
    root: PathBuf,
    record_path: PathBuf,
    files: F,
    balancer: B,
    /// The record, once read or made.
    record: Option<Record>,
    /// Interrupts the kernel refused to move: not tried again.
    refused: BTreeSet<u32>,
    /// Warnings already said.
    said: BTreeSet<String>,
}

impl Steerer {
    /// The live machine, keeping its record at `record_path`.
    pub fn live(record_path: &Path) -> Steerer {
        Steerer::new(Path::new("/"), record_path, RootFiles::new(Path::new("/")), SocketBalancer)
    }
}

impl<F: Files, B: Balancer> Steerer<F, B> {
    /// The host under `root` (its `proc/` and `sys/`), written through `files`, its irqbalance
    /// told through `balancer`.
    pub fn new(root: &Path, record_path: &Path, files: F, balancer: B) -> Steerer<F, B> {
        Steerer {
            root: root.to_path_buf(),
            record_path: record_path.to_path_buf(),
            files,
            balancer,
            record: None,
            refused: BTreeSet::new(),
            said: BTreeSet::new(),
        }
    }

    /// Where the record is kept.
    pub fn record_path(&self) -> &Path {
        &self.record_path
    }

    /// Whether something is recorded to put back.
    pub fn has_changes(&mut self) -> bool {
        let mut sink = Report::default();
        let record = self.take_record(&mut sink);
        let any = !record.is_empty();
        self.record = Some(record);
        any
    }

    fn say(&mut self, report: &mut Report, warning: String) {
        if self.said.insert(warning.clone()) {
            report.warnings.push(warning);
        }
    }

    /// The record in memory, else the file's, else a new one; a file that cannot be believed
    /// is said, set aside (never lost: it may hold the only copy of the originals) and
    /// replaced by a new one.
    fn take_record(&mut self, report: &mut Report) -> Record {
        match self.read_record() {
            Ok(r) => r,
            Err(refused) => {
                self.say(report, refused.to_string().trim_end().to_string());
                Record::new()
            }
        }
    }

    /// The record in memory, else the file's (`Err`: refused, and set aside), else a new one.
    fn read_record(&mut self) -> Result<Record, Box<record::Refused>> {
        if let Some(r) = self.record.take() {
            return Ok(r);
        }
        match record::read(&self.record_path) {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Ok(Record::new()),
            Err(e) => Err(Box::new(record::set_aside(e))),
        }
    }

    fn save(&self, record: &Record) -> Result<(), RecordError> {
        if record.is_empty() {
            record::remove(&self.record_path)
        } else {
            record::write(&self.record_path, record)
        }
    }

    fn start_time(&self, pid: u32) -> Option<u64> {
        pinctl_sysfs::proc::pid::stat::read(&mut FsRoot::new(&self.root), pid)
            .ok()
            .flatten()
            .map(|s| s.start_time)
    }

    /// Steers the host's interrupts for `inputs` (see the module). `topology` gives the
    /// nodes, CPUs, distances and devices; the interrupts are read afresh.
    pub fn apply(
        &mut self,
        topology: &Topology,
        inputs: &SteerInputs,
    ) -> Result<Report, SteerError> {
        let mut report = Report::default();
        let mut t = topology.clone();
        t.discovery_warnings.clear();
        pinctl_sysfs::attach_interrupts(&mut FsRoot::new(&self.root), &mut t)?;
        for w in std::mem::take(&mut t.discovery_warnings) {
            self.say(&mut report, w.to_string());
        }
        let mut record = self.take_record(&mut report);
        let now = t.interrupts.clone();
        // An interrupt number given to another device since: its original is not this one's.
        record.irqs.retain(|n, o| now.irq(*n).is_some_and(|i| i.name == o.name));
        let before = as_before(&now, &record);
        let decision = decide(&t, &before, inputs);
        report.quiet_cpus = decision.quiet_cpus.clone();
        report.unmovable = decision.unmovable.clone();
        for n in &decision.notes {
            self.say(&mut report, n.clone());
        }
        let irqbalance_handles = self.tell_irqbalance(&now, &decision, &mut record, &mut report)?;

        let irqs = self.irq_changes(&now, &decision, irqbalance_handles, &mut record, &mut report);
        let queues = queue_changes(&now, &decision, &mut record);
        // The originals are on disk before anything changes.
        self.save(&record)?;
        self.write_irqs(irqs, &now, &mut record, &mut report);
        self.write_queues(queues, &now, &mut record, &mut report);
        for r in &report.refused {
            let w = format!("IRQ {} ({}): {}", r.irq, r.name, r.why);
            self.said.insert(w);
        }
        self.save(&record)?;
        self.record = Some(record);
        Ok(report)
    }

    /// The interrupts to move (their originals recorded first) and those pinctl moved once and
    /// no longer wants placed, to put back.
    fn irq_changes(
        &self,
        now: &Interrupts,
        decision: &Decision,
        irqbalance_handles: bool,
        record: &mut Record,
        report: &mut Report,
    ) -> IrqChanges {
        let mut wanted = BTreeSet::new();
        let mut writes = Vec::new();
        for target in &decision.irqs {
            if self.refused.contains(&target.irq) {
                continue;
            }
            let Some(current) = now.irq(target.irq).and_then(|i| i.affinity.clone()) else {
                continue;
            };
            wanted.insert(target.irq);
            let pinned = target.why.pinned();
            if !pinned && irqbalance_handles {
                report.left_to_irqbalance += 1;
            }
            // A vector pinctl places must be where it put it; any other interrupt only has to
            // stay off the quiet CPUs: one irqbalance (or anyone) moved elsewhere is left
            // there, so pinctl never fights it.
            let fine = if pinned {
                current == target.to
            } else {
                !current.is_empty() && current.is_disjoint(&decision.quiet_cpus)
            };
            if fine {
                continue;
            }
            record.irqs.entry(target.irq).or_insert_with(|| OriginalIrq {
                name: target.name.clone(),
                affinity: current.clone(),
            });
            writes.push(Moved {
                irq: target.irq,
                name: target.name.clone(),
                from: current,
                to: target.to.clone(),
                why: Some(target.why.clone()),
            });
        }
        let restores: Vec<(u32, OriginalIrq)> = record
            .irqs
            .iter()
            .filter(|(n, _)| !wanted.contains(n))
            .map(|(n, o)| (*n, o.clone()))
            .collect();
        IrqChanges { writes, restores }
    }

    /// Writes the interrupts' new affinities, then puts back those no longer wanted; a write
    /// the kernel refuses is said and not tried again.
    fn write_irqs(
        &mut self,
        changes: IrqChanges,
        now: &Interrupts,
        record: &mut Record,
        report: &mut Report,
    ) {
        let IrqChanges { writes, restores } = changes;
        for m in writes {
            match self.files.write(&pinctl_sysfs::irq::affinity_file(m.irq), &format!("{}\n", m.to))
            {
                Ok(()) => report.moved.push(m),
                Err(e) => {
                    self.refused.insert(m.irq);
                    if record.irqs.get(&m.irq).is_some_and(|o| o.affinity == m.from) {
                        record.irqs.remove(&m.irq);
                    }
                    report.refused.push(Refused {
                        irq: m.irq,
                        name: m.name.clone(),
                        why: refusal(&e, &m.from),
                    });
                }
            }
        }
        for (irq, original) in restores {
            let current = now.irq(irq).and_then(|i| i.affinity.clone()).unwrap_or_default();
            record.irqs.remove(&irq);
            if current == original.affinity {
                continue;
            }
            self.put_back(irq, original, current, report);
        }
    }

    /// Writes the queues' new masks, then puts back those no longer wanted.
    fn write_queues(
        &mut self,
        changes: QueueChanges,
        now: &Interrupts,
        record: &mut Record,
        report: &mut Report,
    ) {
        let QueueChanges { writes: queue_writes, restores: queue_restores } = changes;
        for q in queue_writes {
            let file = pinctl_sysfs::net_queues::queue_file(&q.interface, q.rx, q.queue);
            match self.files.write(&file, &format!("{}\n", q.to.to_mask_string())) {
                Ok(()) => report.queues.push(q),
                Err(e) => {
                    record.queues.retain(|o| {
                        !(o.interface == q.interface
                            && o.rx == q.rx
                            && o.queue == q.queue
                            && o.cpus == q.from)
                    });
                    let w = format!("cannot set `{file}` to CPUs {}: {e}", q.to);
                    self.say(report, w);
                }
            }
        }
        for o in queue_restores {
            record
                .queues
                .retain(|x| !(x.interface == o.interface && x.rx == o.rx && x.queue == o.queue));
            let current = queue_mask(now, &o.interface, o.rx, o.queue).unwrap_or_default();
            if current == o.cpus {
                continue;
            }
            self.put_queue_back(o, current, report);
        }
    }

    /// Writes `original`'s affinity back to `irq` (now on `current`), said in `report`.
    fn put_back(&mut self, irq: u32, original: OriginalIrq, current: CpuSet, report: &mut Report) {
        let text = format!("{}\n", original.affinity);
        match self.files.write(&pinctl_sysfs::irq::affinity_file(irq), &text) {
            Ok(()) => report.restored.push(Moved {
                irq,
                name: original.name,
                from: current,
                to: original.affinity,
                why: None,
            }),
            Err(e) => {
                let w = format!(
                    "cannot put IRQ {irq} ({}) back on CPUs {}: {e}",
                    original.name, original.affinity
                );
                self.say(report, w);
            }
        }
    }

    /// Writes a queue's recorded mask back (it is `current` now), said in `report`.
    fn put_queue_back(&mut self, o: OriginalQueue, current: CpuSet, report: &mut Report) {
        let file = pinctl_sysfs::net_queues::queue_file(&o.interface, o.rx, o.queue);
        match self.files.write(&file, &format!("{}\n", o.cpus.to_mask_string())) {
            Ok(()) => report.restored_queues.push(QueueSet {
                interface: o.interface,
                rx: o.rx,
                queue: o.queue,
                from: current,
                to: o.cpus,
            }),
            Err(e) => {
                let w = format!("cannot put `{file}` back to CPUs {}: {e}", o.cpus);
                self.say(report, w);
            }
        }
    }

    /// Tells the running irqbalance to avoid the quiet CPUs and leave pinctl's interrupts
    /// alone (recording what it did before); `Ok(true)` when it took the CPUs.
    fn tell_irqbalance(
        &mut self,
        now: &Interrupts,
        d: &Decision,
        record: &mut Record,
        report: &mut Report,
    ) -> Result<bool, SteerError> {
        let running = now.irqbalance.clone();
        if let Some(r) = &record.irqbalance {
            let same = running.as_ref().is_some_and(|b| b.pid == r.pid)
                && self.start_time(r.pid) == Some(r.start_time);
            if !same {
                // That irqbalance is gone: what it was told went with it.
                record.irqbalance = None;
            }
        }
        let Some(b) = running else { return Ok(false) };
        if d.quiet_cpus.is_empty() && record.irqbalance.is_none() {
            return Ok(false);
        }
        let socket = self.root.join(b.socket.trim_start_matches('/'));
        let Some(start_time) = self.start_time(b.pid) else { return Ok(false) };
        if record.irqbalance.is_none() {
            let Some(first) = self.first_contact(&b, start_time, &socket, d, report) else {
                return Ok(false);
            };
            record.irqbalance = Some(first);
        }
        let r = record.irqbalance.as_mut().expect("just recorded");
        let want_cpus = r.avoided_cpus.union(&d.quiet_cpus);
        let mut want_irqs: Vec<u32> = r.banned_irqs.clone();
        want_irqs.extend(d.pinned_irqs().into_iter().filter(|n| !self.refused.contains(n)));
        want_irqs.sort_unstable();
        want_irqs.dedup();
        let (cpus_changed, irqs_changed) = (want_cpus != r.told_cpus, want_irqs != r.told_irqs);
        if !cpus_changed && !irqs_changed {
            return Ok(true);
        }
        // What it did before is on disk before it is told anything.
        let told_before = (r.told_cpus.clone(), r.told_irqs.clone());
        self.save(record)?;
        let r = record.irqbalance.as_mut().expect("just recorded");
        if cpus_changed {
            if let Err(e) = self.balancer.settings(&socket, &ban_cpus_command(Some(&want_cpus))) {
                let w = format!(
                    "cannot tell irqbalance (PID {}) to avoid CPUs {want_cpus}: {e}",
                    b.pid
                );
                r.told_cpus = told_before.0;
                self.said.insert(w.clone());
                report.warnings.push(w);
                return Ok(false);
            }
            r.told_cpus = want_cpus.clone();
        }
        if irqs_changed {
            match self.balancer.settings(&socket, &ban_irqs_command(&want_irqs)) {
                Ok(()) => r.told_irqs = want_irqs.clone(),
                Err(e) => {
                    let w = format!(
                        "irqbalance (PID {}) avoids CPUs {want_cpus} but cannot be told to leave \
                         pinctl's {} interrupts alone ({e}): it may move them within their node",
                        b.pid,
                        want_irqs.len()
                    );
                    self.say(report, w);
                }
            }
        }
        report.irqbalance = Some(format!(
            "pid={} avoids_cpus={} leaves_alone={}",
            b.pid,
            r.told_cpus,
            r.told_irqs.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        ));
        Ok(true)
    }

    /// What irqbalance avoids and leaves alone before pinctl tells it anything (asked on its
    /// socket), to be recorded; `None` when it cannot be asked (said in `report`).
    fn first_contact(
        &mut self,
        b: &Irqbalance,
        start_time: u64,
        socket: &Path,
        d: &Decision,
        report: &mut Report,
    ) -> Option<IrqbalanceRecord> {
        let setup = match self.balancer.setup(socket) {
            Ok(s) => s,
            Err(e) => {
                let w = format!(
                    "cannot tell irqbalance (PID {}) which CPUs to avoid: {e}; pinctl moves \
                     interrupts off the quiet CPUs itself, and irqbalance may move them back \
                     at each of its passes (set IRQBALANCE_BANNED_CPULIST={} for it)",
                    b.pid, d.quiet_cpus
                );
                self.say(report, w);
                return None;
            }
        };
        let own = pinctl_sysfs::irqbalance::own_banned_cpus(&mut FsRoot::new(&self.root), b.pid)
            .ok()
            .flatten();
        Some(IrqbalanceRecord {
            pid: b.pid,
            start_time,
            own_choice: own.as_ref() == Some(&setup.banned_cpus),
            avoided_cpus: setup.banned_cpus.clone(),
            banned_irqs: setup.banned_irqs.clone(),
            told_cpus: setup.banned_cpus,
            told_irqs: setup.banned_irqs,
        })
    }

    /// Puts back everything the record holds (an interrupt number now given to another device
    /// is left alone), tells irqbalance what it avoided before, and removes the record. A
    /// record it refuses is an error, kept aside with what to do by hand
    /// ([`SteerError::Refused`]).
    pub fn restore(&mut self) -> Result<Report, SteerError> {
        let mut report = Report::default();
        let mut record = self.read_record().map_err(SteerError::Refused)?;
        if record.is_empty() {
            self.save(&record)?;
            self.record = None;
            return Ok(report);
        }
        let mut fs = FsRoot::new(&self.root);
        let table = pinctl_sysfs::proc::interrupts::read(&mut fs)?.unwrap_or_default();
        for (irq, original) in std::mem::take(&mut record.irqs) {
            let name = match pinctl_sysfs::irq::read(&mut fs, irq) {
                Ok(files) => {
                    files.actions.or_else(|| table.line(irq).map(|l| l.name().to_string()))
                }
                Err(_) => None,
            };
            let current = parsed(&mut fs, &pinctl_sysfs::irq::affinity_file(irq), id_list)
                .ok()
                .flatten()
                .unwrap_or_default();
            match name {
                Some(n) if n == original.name => {}
                Some(n) => {
                    let w = format!("IRQ {irq} is now `{n}`, not `{}`: left alone", original.name);
                    self.say(&mut report, w);
                    continue;
                }
                None => continue,
            }
            self.put_back(irq, original, current, &mut report);
        }
        for o in std::mem::take(&mut record.queues) {
            let file = pinctl_sysfs::net_queues::queue_file(&o.interface, o.rx, o.queue);
            let current = parsed(&mut fs, &file, pinctl_sysfs::parse::id_mask).ok().flatten();
            let Some(current) = current else { continue };
            self.put_queue_back(o, current, &mut report);
        }
        if let Some(r) = record.irqbalance.take() {
            let running = pinctl_sysfs::irqbalance::find(&mut fs).ok().flatten();
            let same = running.as_ref().is_some_and(|b| b.pid == r.pid)
                && self.start_time(r.pid) == Some(r.start_time);
            if let (true, Some(b)) = (same, running) {
                let socket = self.root.join(b.socket.trim_start_matches('/'));
                let cpus = (!r.own_choice).then_some(&r.avoided_cpus);
                let told =
                    self.balancer.settings(&socket, &ban_cpus_command(cpus)).and_then(|()| {
                        self.balancer.settings(&socket, &ban_irqs_command(&r.banned_irqs))
                    });
                match told {
                    Ok(()) => {
                        let cpus = if r.own_choice {
                            "its own choice".to_string()
                        } else {
                            r.avoided_cpus.to_string()
                        };
                        report.irqbalance =
                            Some(format!("pid={} avoids_cpus={cpus:?} restored=yes", b.pid));
                    }
                    Err(e) => {
                        let w = format!(
                            "cannot give irqbalance (PID {}) its settings back: {e}",
                            b.pid
                        );
                        self.say(&mut report, w);
                    }
                }
            }
        }
        record::remove(&self.record_path)?;
        self.record = None;
        Ok(report)
    }
}

/// The interrupts as they were before pinctl: recorded originals in place of what it wrote.
/// Interrupts to move and interrupts to put back, in the order they are written.
struct IrqChanges {
    writes: Vec<Moved>,
    restores: Vec<(u32, OriginalIrq)>,
}

/// Queues to set and queues to put back.
struct QueueChanges {
    writes: Vec<QueueSet>,
    restores: Vec<OriginalQueue>,
}

/// The queues to set (their originals recorded first) and those pinctl set once and no longer
/// wants set, to put back.
fn queue_changes(now: &Interrupts, decision: &Decision, record: &mut Record) -> QueueChanges {
    let mut wanted_queues = BTreeSet::new();
    let mut queue_writes = Vec::new();
    for q in &decision.queues {
        let Some(current) = queue_mask(now, &q.interface, q.rx, q.queue) else { continue };
        wanted_queues.insert((q.interface.clone(), q.rx, q.queue));
        if current == q.to {
            continue;
        }
        if record.queue(&q.interface, q.rx, q.queue).is_none() {
            record.queues.push(OriginalQueue {
                interface: q.interface.clone(),
                rx: q.rx,
                queue: q.queue,
                cpus: current.clone(),
            });
        }
        queue_writes.push(QueueSet {
            interface: q.interface.clone(),
            rx: q.rx,
            queue: q.queue,
            from: current,
            to: q.to.clone(),
        });
    }
    let queue_restores: Vec<OriginalQueue> = record
        .queues
        .iter()
        .filter(|q| !wanted_queues.contains(&(q.interface.clone(), q.rx, q.queue)))
        .cloned()
        .collect();
    QueueChanges { writes: queue_writes, restores: queue_restores }
}

fn as_before(now: &Interrupts, record: &Record) -> Interrupts {
    let mut before = now.clone();
    for irq in &mut before.irqs {
        if let Some(o) = record.irqs.get(&irq.irq) {
            irq.affinity = Some(o.affinity.clone());
        }
    }
    for q in &mut before.net_queues {
        for (rx, list) in [(true, &mut q.rx), (false, &mut q.tx)] {
            for x in list.iter_mut() {
                if let Some(o) = record.queue(&q.interface, rx, x.queue) {
                    x.cpus = Some(o.cpus.clone());
                }
            }
        }
    }
    before
}

fn queue_mask(i: &Interrupts, interface: &str, rx: bool, queue: u32) -> Option<CpuSet> {
    let q = i.queues_of(interface)?;
    let list = if rx { &q.rx } else { &q.tx };
    list.iter().find(|x| x.queue == queue).and_then(|x| x.cpus.clone())
}

/// Why the kernel refused a new affinity, in words.
fn refusal(e: &io::Error, stays: &CpuSet) -> String {
    const EIO: i32 = 5;
    if e.raw_os_error() == Some(EIO) {
        format!(
            "the kernel refuses to move it (EIO: it manages the interrupt, or its chip cannot \
             change it): it stays on CPUs {stays}"
        )
    } else {
        format!("cannot write its affinity ({e}): it stays on CPUs {stays}")
    }
}
