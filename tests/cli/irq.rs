//! Interrupts on the command line (docs/irq.md): `pinctl topology` and `pinctl plan` on the
//! 4-node guest's captures (tests/fixtures/sysfs/qemu-irq*-4node.tar.gz), `pinctl irq apply
//! --dry-run` on this machine (which changes nothing), and the refusals of `pinctl irq`.
//! Steering a host for real is the VM suite's (scenario 21): these tests never change this
//! machine's interrupts.

use std::process::Output;

use serde_json::Value;

use crate::support::{pinctl, root, write_config};
use crate::topology::assert_conforms;

const QUIET: &str = "tests/fixtures/sysfs/qemu-irq-4node.tar.gz";
const BALANCED: &str = "tests/fixtures/sysfs/qemu-irqbalance-4node.tar.gz";

fn run(args: &[&str]) -> Output {
    pinctl().args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "pinctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn topology_shows_each_device_s_interrupts_queues_and_irqbalance() {
    let text = ok(&["topology", "--topology", BALANCED]);
    for line in [
        "interrupts (affinity: where each may go; effective: where the kernel delivers it):",
        "  eth0 (0000:61:00.0, node 3): 9 interrupts; eth0: 8 receive queues (RPS off), 8 transmit queues (XPS off)",
        "  nvme0n1 (0000:41:00.0, node 1): 9 interrupts",
        "    IRQ 27 nvme0q1: affinity 2, effective 2, managed by the kernel (cannot be moved), never fired",
        "  other interrupts:",
    ] {
        assert!(text.lines().any(|l| l == line), "no line `{line}` in\n{text}");
    }
    assert!(
        text.contains("    IRQ 35 eth0-rxtx-0: affinity 7, effective 7, fired (CPU:times) 7:"),
        "{text}"
    );
    let irqbalance: Vec<&str> = text.lines().filter(|l| l.starts_with("irqbalance: ")).collect();
    assert_eq!(irqbalance.len(), 1, "{text}");
    assert!(
        irqbalance[0].ends_with("were not asked (pinctl asks it on the live machine, as root)"),
        "{}",
        irqbalance[0]
    );
    let quiet = ok(&["topology", "--topology", QUIET]);
    assert!(
        quiet.contains("\nirqbalance: not running (no control socket in /run/irqbalance)\n"),
        "{quiet}"
    );
    // The JSON form carries them and keeps the schema.
    let json: Value =
        serde_json::from_str(&ok(&["topology", "--topology", BALANCED, "--json"])).unwrap();
    assert_conforms("topology", &json, "the guest's topology");
    assert_eq!(json["interrupts"]["irqs"].as_array().unwrap().len(), 26);
    assert_eq!(json["interrupts"]["irqs"][9]["name"], "nvme0q1");
    assert_eq!(json["interrupts"]["irqs"][9]["managed"], true);
    assert!(json["interrupts"]["irqbalance"]["pid"].as_u64().is_some());
}

/// Two `nodes = 1` databases and a one-CPU web instance planned on the guest's capture, the
/// NIC's node kept free.
fn guest_config(dir: &std::path::Path, steer: bool, web: &str) -> std::path::PathBuf {
    write_config(
        dir,
        &format!(
            "[host]\nkeep-free = [\"eth0\"]\nsteer-interrupts = {steer}\n\
             [service.db]\ncommand = [\"/bin/db\", \"{{instance}}\"]\ninstances = 2\nnodes = 1\n\
             [service.web]\ncommand = [\"/bin/web\"]\ncpus = 1\ninterrupts = \"{web}\"\n"
        ),
    )
}

#[test]
fn plan_says_which_interrupts_land_on_service_cpus_and_what_steering_does() {
    let dir = tempfile::tempdir().unwrap();
    let config = guest_config(dir.path(), true, "quiet");
    let c = config.to_str().unwrap();
    let doc: Value =
        serde_json::from_str(&ok(&["plan", "--topology", QUIET, "-c", c, "--json"])).unwrap();
    assert_conforms("plan", &doc, "the plan on the guest");
    let landing = doc["interrupts_on_service_cpus"].as_array().unwrap();
    let placed: std::collections::BTreeMap<String, String> = doc["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s["cpus"].as_str().unwrap().to_string()))
        .collect();
    assert!(!landing.is_empty());
    for l in landing {
        let instance = l["instance"].as_str().unwrap();
        assert!(placed.contains_key(instance), "{l}");
        let expected = if l["managed"] == true { "stays (managed by the kernel)" } else { "moved" };
        assert_eq!(l["steering"], expected, "{l}");
    }
    // The drive's managed I/O queues spread one per CPU: one lands on every database CPU.
    let managed =
        landing.iter().filter(|l| l["managed"] == true && l["devices"][0] == "nvme0n1").count();
    assert!(managed >= 4, "{landing:?}");
    // A count per instance by default; each interrupt under --verbose.
    let text = ok(&["plan", "--topology", QUIET, "-c", c]);
    let header = "\ninterrupts on service CPUs today (`--verbose` lists each):\n";
    assert!(text.contains(header), "{text}");
    assert!(!text.contains(": IRQ "), "{text}");
    let db0 = landing.iter().filter(|l| l["instance"] == "db-0").count();
    let db0_managed =
        landing.iter().filter(|l| l["instance"] == "db-0" && l["managed"] == true).count();
    let summary = format!(
        "  db-0: {db0} interrupts: {} moved, {db0_managed} stays (managed by the kernel)",
        db0 - db0_managed
    );
    assert!(text.lines().any(|l| l == summary), "no line `{summary}` in\n{text}");
    let text = ok(&["plan", "--topology", QUIET, "-c", c, "--verbose"]);
    assert!(text.contains("\ninterrupts on service CPUs today:\n"), "{text}");
    for line in [
        "  db-0: IRQ 26 nvme0q0 (nvme0n1) on CPU 1, fired 12 times there: moved",
        "  db-0: IRQ 33 nvme0q7 (nvme0n1) on CPU 0, fired 0 times there: stays (managed by the kernel)",
    ] {
        assert!(text.lines().any(|l| l == line), "no line `{line}` in\n{text}");
    }
    // Steering off: said so; `nic-queues`: allowed.
    let off = guest_config(dir.path(), false, "nic-queues");
    let doc: Value = serde_json::from_str(&ok(&[
        "plan",
        "--topology",
        QUIET,
        "-c",
        off.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    assert!(
        doc["interrupts_on_service_cpus"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["steering"] == "steering is off")
    );
    let on = guest_config(dir.path(), true, "nic-queues");
    let doc: Value = serde_json::from_str(&ok(&[
        "plan",
        "--topology",
        QUIET,
        "-c",
        on.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let web: Vec<&Value> = doc["interrupts_on_service_cpus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["instance"] == "web")
        .collect();
    assert!(
        web.iter().all(|l| l["steering"] == "allowed (interrupts = \"nic-queues\")"),
        "{web:?}"
    );
}

#[test]
fn a_plan_on_a_topology_without_interrupts_says_nothing_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = guest_config(dir.path(), true, "quiet");
    let t = "tests/fixtures/sysfs/qemu-hmat-4node.tar.gz";
    let text = ok(&["plan", "--topology", t, "-c", config.to_str().unwrap()]);
    assert!(!text.contains("interrupts"), "{text}");
    let doc: Value = serde_json::from_str(&ok(&[
        "plan",
        "--topology",
        t,
        "-c",
        config.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    assert_eq!(doc["interrupts_on_service_cpus"], Value::Array(vec![]));
}

fn affinities() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/irq").unwrap().flatten() {
        if let Ok(a) = std::fs::read_to_string(e.path().join("smp_affinity_list")) {
            out.push((e.file_name().into_string().unwrap(), a));
        }
    }
    out.sort();
    out
}

/// On this machine: what would move, off the service's CPU, and nothing is changed.
#[test]
fn apply_dry_run_shows_what_would_move_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[host]\nkeep-free = []\nsteer-interrupts = true\n[service.one]\ncommand = [\"/bin/true\"]\ncpus = 1\n",
    );
    let c = config.to_str().unwrap();
    // The service's CPU and the plan's warnings. Processes other tests pin move the plan (it
    // goes around them): the dry run is held to a plan made on the same machine just before
    // and just after it (asked again, bounded, while those two differ).
    let plan = || {
        let v: Value = serde_json::from_str(&ok(&["plan", "-c", c, "--json"])).unwrap();
        (v["services"][0]["cpus"].as_str().unwrap().to_string(), v["warnings"].to_string())
    };
    let (out, planned) = crate::supervisor::wait_for("two plans alike around a dry run", || {
        let before = plan();
        let affinities_before = affinities();
        let out = ok(&["irq", "apply", "--dry-run", "-c", c]);
        assert_eq!(affinities(), affinities_before, "a dry run changed an affinity");
        (plan() == before).then_some((out, before.0))
    });
    let first = out.lines().next().unwrap();
    let quiet = first
        .strip_prefix("quiet CPUs (irqbalance would avoid them): ")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(quiet, planned, "{out}");
    for line in out.lines().filter(|l| l.starts_with("would move IRQ ")) {
        let to = line.rsplit_once(" -> ").unwrap().1.split(' ').next().unwrap();
        assert!(!to.split(',').any(|c| c == quiet), "{line}");
    }
}

#[test]
fn apply_needs_the_host_key_and_restore_puts_back_only_what_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "[service.one]\ncommand = [\"/bin/true\"]\ncpus = 1\n");
    let c = config.to_str().unwrap();
    let out = run(&["irq", "apply", "-c", c]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not steer interrupts: set `steer-interrupts = true`"), "{err}");
    // Nothing recorded: nothing to put back, and nothing left behind.
    let state = dir.path().join("run/one.state.json");
    let out = ok(&["irq", "restore", "-c", c, "--state-file", state.to_str().unwrap()]);
    assert_eq!(out, "restored: 0 interrupts and 0 queue masks put back\n");
    assert!(!dir.path().join("run/pinctl.irq.json").exists());
}

#[test]
fn irq_is_refused_while_another_holds_the_supervisor_s_lock() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "[service.one]\ncommand = [\"/bin/true\"]\ncpus = 1\n");
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let state = run_dir.join("pinctl.state.json");
    // Where a supervisor locks its state file: a folder nobody but root may enter.
    let locks = run_dir.join("locks");
    std::fs::create_dir(&locks).unwrap();
    std::fs::set_permissions(&locks, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let lock = locks.join("pinctl.state.json.lock");
    std::fs::write(&lock, "").unwrap();
    // util-linux's flock holds the same flock(2) lock a `pinctl run` holds; `--no-fork` makes
    // the holder the `sleep` itself, so killing it by PID leaves nothing behind.
    let mut holder = std::process::Command::new("flock")
        .args(["-x", "--no-fork", lock.to_str().unwrap(), "sleep", "30"])
        .spawn()
        .expect("flock (util-linux) is installed");
    let waited = std::time::Instant::now();
    while waited.elapsed() < std::time::Duration::from_secs(5) {
        let busy = std::process::Command::new("flock")
            .args(["-n", lock.to_str().unwrap(), "true"])
            .status()
            .unwrap();
        if !busy.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = run(&[
        "irq",
        "restore",
        "-c",
        config.to_str().unwrap(),
        "--state-file",
        state.to_str().unwrap(),
    ]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "`pinctl run` (PID unknown) supervises this file and steers its interrupts itself"
        ),
        "{err}"
    );
}

#[test]
fn a_record_restore_refuses_is_kept_aside_and_says_how_to_put_it_back_by_hand() {
    // The record may hold the only copy of the affinities the interrupts had before pinctl:
    // refused (an unknown field, cut short, another boot), it is never deleted.
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let record = |boot: &str, extra: &str| {
        format!(
            "{{\"format\": \"pinctl-irq-v1\", \"boot_id\": \"{}\", {extra}\"irqs\": \
             {{\"45\": {{\"name\": \"eth0-TxRx-0\", \"affinity\": \"0-7\"}}}}, \"queues\": \
             [{{\"interface\": \"eth0\", \"rx\": true, \"queue\": 3, \"cpus\": \"0-3\"}}]}}\n",
            boot.trim()
        )
    };
    let whole = record(&boot, "\"colour\": \"blue\", ");
    let cases = [
        ("unreadable", whole.clone(), true),
        ("unreadable", record(&boot, "")[..60].to_string(), false),
        ("other-boot", record("00000000-0000-0000-0000-000000000000", ""), true),
    ];
    for (why, text, readable) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config =
            write_config(dir.path(), "[service.one]\ncommand = [\"/bin/true\"]\ncpus = 1\n");
        let run_dir = dir.path().join("run");
        std::fs::create_dir(&run_dir).unwrap();
        let path = run_dir.join("pinctl.irq.json");
        std::fs::write(&path, &text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let state = run_dir.join("pinctl.state.json");
        let c = config.to_str().unwrap();
        let out = run(&["irq", "restore", "-c", c, "--state-file", state.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{why}: {err}");
        assert!(!path.exists(), "{why}: set aside");
        let kept: Vec<_> = std::fs::read_dir(&run_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_str().unwrap();
                name.starts_with(&format!("pinctl.irq.json.refused-{why}-"))
            })
            .collect();
        assert_eq!(kept.len(), 1, "{why}: {err}");
        assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), text, "{why}: kept whole");
        assert!(err.contains(&format!("kept as `{}`", kept[0].display())), "{why}: {err}");
        if readable {
            for line in [
                "echo 0-7 > /proc/irq/45/smp_affinity_list   # eth0-TxRx-0",
                "echo 0000000f > /sys/class/net/eth0/queues/rx-3/rps_cpus",
            ] {
                assert!(err.contains(line), "{why}: no `{line}` in {err}");
            }
        } else {
            assert!(err.contains("cannot be read as JSON"), "{why}: {err}");
            assert!(err.contains("/proc/irq/N/smp_affinity_list"), "{why}: {err}");
        }
    }
}

/// A name the kernel would never write, from a tree built here, reaches no terminal raw.
#[test]
fn odd_interrupt_names_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let w = |rel: &str, text: &str| {
        let p = r.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("sys/devices/system/cpu/online", "0-1\n");
    w("sys/devices/system/node/online", "0\n");
    w("sys/devices/system/node/node0/cpulist", "0-1\n");
    w("proc/interrupts", "  CPU0 CPU1\n 5:  1 2  chip 5-edge  \u{1b}[31mred\nnode 9 cpus: 0\n");
    let out = run(&["topology", "--topology", r.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(
        text.contains("IRQ 5 \\u{1b}[31mred")
            || text.contains("IRQ 5 \\e[31mred")
            || text.contains("IRQ 5 \\x1b[31mred"),
        "{text}"
    );
    assert!(root().exists());
}
