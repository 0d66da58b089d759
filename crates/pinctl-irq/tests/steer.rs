//! Carrying a decision out on the 4-node guest's machine written as a tree (tests/common):
//! writes, the record, what is put back, refusals, irqbalance, reloads and restarts.

mod common;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use common::{affinity, plan, topology, write_tree};
use pinctl_irq::irqbalance::{Balancer, IrqbalanceError, Setup};
use pinctl_irq::{Files, RootFiles, Steerer};
use pinctl_topology::CpuSet;

/// The tree's files, refusing (EIO) the interrupts in `refuse` as the kernel refuses a managed
/// or fixed one, and counting writes.
#[derive(Debug)]
struct Kernel {
    files: RootFiles,
    refuse: BTreeSet<u32>,
    writes: Rc<RefCell<Vec<String>>>,
}

impl Files for Kernel {
    fn write(&mut self, rel: &str, text: &str) -> io::Result<()> {
        self.writes.borrow_mut().push(format!("{rel}={}", text.trim()));
        if self.refuse.iter().any(|n| rel == format!("proc/irq/{n}/smp_affinity_list")) {
            return Err(io::Error::from_raw_os_error(5));
        }
        self.files.write(rel, text)
    }
}

/// irqbalance: answers `setup` with what it avoids and bans, takes `settings`.
#[derive(Debug, Default)]
struct FakeIrqbalance {
    avoided: CpuSet,
    banned: Vec<u32>,
    told: Rc<RefCell<Vec<String>>>,
}

impl Balancer for FakeIrqbalance {
    fn setup(&mut self, _: &Path) -> Result<Setup, IrqbalanceError> {
        Ok(Setup { sleep: 10, banned_irqs: self.banned.clone(), banned_cpus: self.avoided.clone() })
    }
    fn settings(&mut self, _: &Path, command: &str) -> Result<(), IrqbalanceError> {
        self.told.borrow_mut().push(command.to_string());
        Ok(())
    }
}

struct Host {
    _dir: tempfile::TempDir,
    root: PathBuf,
    record: PathBuf,
    writes: Rc<RefCell<Vec<String>>>,
    told: Rc<RefCell<Vec<String>>>,
}

fn host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write_tree(&root, &topology());
    let run = dir.path().join("run");
    fs::create_dir(&run).unwrap();
    let record = run.join("db.irq.json");
    Host { root, record, _dir: dir, writes: Rc::default(), told: Rc::default() }
}

impl Host {
    fn steerer(&self, refuse: &[u32]) -> Steerer<Kernel, FakeIrqbalance> {
        let kernel = Kernel {
            files: RootFiles::new(&self.root),
            refuse: refuse.iter().copied().collect(),
            writes: self.writes.clone(),
        };
        let balancer = FakeIrqbalance { told: self.told.clone(), ..Default::default() };
        Steerer::new(&self.root, &self.record, kernel, balancer)
    }

    fn irqbalance(&self, pid: u32) {
        let w = |rel: &str, text: &str| {
            let p = self.root.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        w(&format!("run/irqbalance/irqbalance{pid}.sock"), "");
        w(&format!("proc/{pid}/comm"), "irqbalance\n");
        w(
            &format!("proc/{pid}/stat"),
            &format!(
                "{pid} (irqbalance) S 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n"
            ),
        );
        w(&format!("proc/{pid}/environ"), "PATH=/usr/sbin\0");
    }

    fn rps(&self, rx: bool, queue: u32) -> String {
        let (d, f) = if rx { ("rx", "rps_cpus") } else { ("tx", "xps_cpus") };
        let p = self.root.join(format!("sys/class/net/eth0/queues/{d}-{queue}/{f}"));
        fs::read_to_string(p).unwrap().trim().to_string()
    }
}

#[test]
fn steered_as_decided_recorded_first_idempotent_and_put_back() {
    let h = host();
    let t = topology();
    let mut s = h.steerer(&[]);
    let r = s.apply(&t, &plan()).unwrap();
    assert!(r.changed());
    for q in 0..8u32 {
        assert_eq!(affinity(&h.root, 35 + q), if q % 2 == 0 { "6" } else { "7" });
    }
    assert_eq!(affinity(&h.root, 43), "6-7");
    assert_eq!(affinity(&h.root, 0), "5-7", "no irqbalance: pinctl keeps it off quiet CPUs");
    assert_eq!(affinity(&h.root, 26), "5-7");
    assert_eq!(affinity(&h.root, 27), "2", "managed: never written");
    assert_eq!(h.rps(true, 0), "000000c0");
    assert_eq!(h.rps(false, 1), "00000080");
    assert_eq!(r.unmovable.iter().map(|u| u.irq).collect::<Vec<_>>(), vec![27, 28, 29, 33, 34]);
    assert!(h.writes.borrow().iter().all(|w| !w.starts_with("proc/irq/27/")));
    // The record holds the originals, readable by root only.
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(fs::metadata(&h.record).unwrap().permissions().mode() & 0o777, 0o600);
    let rec = pinctl_irq::record::read(&h.record).unwrap().unwrap();
    assert_eq!(rec.irqs[&35].affinity.to_string(), "0-7");
    assert_eq!(rec.irqs[&0].name, "timer");
    assert_eq!(rec.queues.len(), 16);
    // Applied again on the steered host: nothing to write.
    let writes = h.writes.borrow().len();
    let again = s.apply(&t, &plan()).unwrap();
    assert!(!again.changed(), "{:?}", again.lines());
    assert_eq!(h.writes.borrow().len(), writes);
    // Put back: every interrupt and queue as it was, the record gone.
    let back = s.restore().unwrap();
    assert_eq!(back.restored.len(), 12, "{:?}", back.lines());
    for n in [0u32, 1, 26].into_iter().chain(35..=43) {
        let was = if n == 1 || n == 26 { "0-1" } else { "0-7" };
        assert_eq!(affinity(&h.root, n), was, "IRQ {n}");
    }
    assert_eq!(h.rps(true, 0), "00000000");
    assert!(!h.record.exists());
}

#[test]
fn a_refused_write_is_a_line_naming_the_interrupt_and_is_not_tried_again() {
    let h = host();
    let t = topology();
    let mut s = h.steerer(&[0]);
    let r = s.apply(&t, &plan()).unwrap();
    assert_eq!(r.refused.len(), 1);
    assert_eq!((r.refused[0].irq, r.refused[0].name.as_str()), (0, "timer"));
    assert!(
        r.refused[0].why.contains("EIO") && r.refused[0].why.contains("stays on CPUs 0-7"),
        "{:?}",
        r.refused
    );
    assert!(
        r.lines().iter().any(|l| l.starts_with("refused irq=0 name=\"timer\"")),
        "{:?}",
        r.lines()
    );
    assert_eq!(affinity(&h.root, 0), "0-7");
    assert_eq!(affinity(&h.root, 35), "6", "the rest is steered");
    let rec = pinctl_irq::record::read(&h.record).unwrap().unwrap();
    assert!(!rec.irqs.contains_key(&0), "nothing changed, nothing to put back");
    let count =
        |h: &Host| h.writes.borrow().iter().filter(|w| w.starts_with("proc/irq/0/")).count();
    assert_eq!(count(&h), 1);
    let again = s.apply(&t, &plan()).unwrap();
    assert!(again.refused.is_empty());
    assert_eq!(count(&h), 1, "not tried again");
}

#[test]
fn irqbalance_is_told_the_quiet_cpus_and_pinctl_s_interrupts_and_given_its_settings_back() {
    let h = host();
    h.irqbalance(4242);
    let t = topology();
    let mut s = h.steerer(&[]);
    let r = s.apply(&t, &plan()).unwrap();
    assert_eq!(
        *h.told.borrow(),
        vec![
            "settings cpus 0-4".to_string(),
            "settings ban irqs 35 36 37 38 39 40 41 42 43".to_string()
        ]
    );
    assert!(r.irqbalance.as_deref().unwrap().contains("avoids_cpus=0-4"), "{:?}", r.irqbalance);
    // The NIC's vectors are pinctl's; the others are moved off the quiet CPUs at once, then
    // left to irqbalance: where it moves them next is not fought.
    assert_eq!(affinity(&h.root, 35), "6");
    assert_eq!(affinity(&h.root, 0), "5-7");
    assert_eq!(r.left_to_irqbalance, 3);
    fs::write(h.root.join("proc/irq/0/smp_affinity_list"), "6\n").unwrap();
    let writes = h.writes.borrow().len();
    let again = s.apply(&t, &plan()).unwrap();
    assert_eq!(affinity(&h.root, 0), "6", "{:?}", again.lines());
    assert_eq!(h.writes.borrow().len(), writes);
    // Put on a quiet CPU by someone: moved off again.
    fs::write(h.root.join("proc/irq/0/smp_affinity_list"), "1\n").unwrap();
    s.apply(&t, &plan()).unwrap();
    assert_eq!(affinity(&h.root, 0), "5-7");
    let rec = pinctl_irq::record::read(&h.record).unwrap().unwrap();
    let b = rec.irqbalance.unwrap();
    assert_eq!((b.pid, b.start_time, b.own_choice), (4242, 777, true));
    // Told once: an unchanged host tells it nothing more.
    assert_eq!(h.told.borrow().len(), 2);
    s.restore().unwrap();
    assert_eq!(
        h.told.borrow()[2..],
        ["settings cpus NULL".to_string(), "settings ban irqs NONE".to_string()]
    );
}

#[test]
fn an_irqbalance_that_restarted_is_told_again_and_one_that_is_gone_is_not_restored() {
    let h = host();
    h.irqbalance(4242);
    let t = topology();
    let mut s = h.steerer(&[]);
    s.apply(&t, &plan()).unwrap();
    fs::remove_dir_all(h.root.join("run/irqbalance")).unwrap();
    h.irqbalance(5000);
    s.apply(&t, &plan()).unwrap();
    assert_eq!(h.told.borrow().len(), 4, "{:?}", h.told.borrow());
    assert_eq!(h.told.borrow()[2], "settings cpus 0-4");
    fs::remove_dir_all(h.root.join("run/irqbalance")).unwrap();
    s.restore().unwrap();
    assert_eq!(h.told.borrow().len(), 4, "a gone irqbalance is told nothing");
}

#[test]
fn a_reload_puts_back_what_the_new_plan_no_longer_wants() {
    let h = host();
    let t = topology();
    let mut s = h.steerer(&[]);
    s.apply(&t, &plan()).unwrap();
    assert_eq!(affinity(&h.root, 1), "5-7");
    // db-0 removed: CPUs 0-1 are no longer quiet, so i8042 (allowed on 0-1) is put back.
    let mut fewer = plan();
    fewer.owners.retain(|o| o.instance != "db-0");
    let r = s.apply(&t, &fewer).unwrap();
    assert_eq!(affinity(&h.root, 1), "0-1");
    assert!(r.restored.iter().any(|m| m.irq == 1), "{:?}", r.lines());
    assert_eq!(affinity(&h.root, 0), "5-7", "still off the quiet CPUs: not written again");
}

#[test]
fn a_second_steerer_keeps_the_first_s_originals() {
    let h = host();
    let t = topology();
    h.steerer(&[]).apply(&t, &plan()).unwrap();
    // A supervisor killed and started again (or detached): the record is all it has.
    let mut next = h.steerer(&[]);
    let r = next.apply(&t, &plan()).unwrap();
    assert!(!r.changed(), "{:?}", r.lines());
    next.restore().unwrap();
    assert_eq!(affinity(&h.root, 35), "0-7", "the first steerer's original, not its target");
}

#[test]
fn an_interrupt_number_given_to_another_device_is_not_put_back() {
    let h = host();
    let t = topology();
    let mut s = h.steerer(&[]);
    s.apply(&t, &plan()).unwrap();
    fs::write(h.root.join("sys/kernel/irq/1/actions"), "other\n").unwrap();
    let r = s.restore().unwrap();
    assert!(
        r.warnings.iter().any(|w| w.contains("IRQ 1 is now `other`, not `i8042`")),
        "{:?}",
        r.warnings
    );
    assert_eq!(affinity(&h.root, 1), "5-7");
}

#[test]
fn a_record_others_could_write_is_not_believed() {
    let h = host();
    let t = topology();
    h.steerer(&[]).apply(&t, &plan()).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(&h.record, fs::Permissions::from_mode(0o666)).unwrap();
    let mut s = h.steerer(&[]);
    // Refused, and kept (aside) for a person to judge: never deleted.
    let e = s.restore().unwrap_err().to_string();
    assert!(e.contains("not trusted"), "{e}");
    assert!(e.contains("db.irq.json.refused-untrusted-"), "{e}");
    assert!(!h.record.exists());
    assert_eq!(affinity(&h.root, 35), "6", "nothing written from it");
    // A steerer that goes on (apply) sets a refused record aside too, and says so.
    fs::write(&h.record, "{\"format\": \"pinctl-irq-v1\", \"cut short").unwrap();
    let r = h.steerer(&[]).apply(&t, &plan()).unwrap();
    assert!(r.warnings.iter().any(|w| w.contains("kept as")), "{:?}", r.warnings);
    let refused = fs::read_dir(h.record.parent().unwrap())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".refused-"))
        .count();
    assert_eq!(refused, 2, "both records kept");
}
