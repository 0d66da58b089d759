//! One host, one plan (docs/planning.md, "A host"): `pinctl plan -c A -c B` plans several
//! files together, and on the live machine every command that plans a file plans the files
//! of its folder with it.

use std::path::{Path, PathBuf};

use predicates::prelude::*;

use crate::supervisor::{unique_name, wait_for};
use crate::support::{EPYC, pinctl};

const DB: &str = include_str!("../fixtures/host/db.toml");

const CACHE: &str = include_str!("../fixtures/host/cache.toml");

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A folder of service files, as /etc/pinctl is: only its owner may write it.
fn folder() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `pinctl plan --json` of `files` (in that order) on the EPYC.
fn plan_json(files: &[&Path]) -> serde_json::Value {
    let mut cmd = pinctl();
    cmd.arg("plan");
    for f in files {
        cmd.arg("-c").arg(f);
    }
    let out = cmd.args(["--topology", EPYC, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn several_files_are_planned_as_one_host() {
    let dir = folder();
    let db = write(dir.path(), "db.toml", DB);
    let cache = write(dir.path(), "cache.toml", CACHE);
    let v = plan_json(&[&db, &cache]);
    let services = v["services"].as_array().unwrap();
    assert_eq!(services.len(), 5);
    let mut nodes = Vec::new();
    for s in services {
        let (file, supervisor) = (s["file"].as_str().unwrap(), s["supervisor"].as_str().unwrap());
        let expected =
            if s["service"] == "redis" { ("cache.toml", "cache") } else { ("db.toml", "db") };
        assert!(file.ends_with(expected.0), "{s}");
        assert_eq!(supervisor, expected.1);
        nodes.push(s["nodes"][0].as_u64().unwrap());
    }
    nodes.sort_unstable();
    nodes.dedup();
    assert_eq!(nodes.len(), 5, "two instances on one node: {v}");
    assert_eq!(v["kept_free_nodes"], serde_json::json!([5]), "the database file's keep-free");

    pinctl()
        .arg("plan")
        .arg("-c")
        .arg(&db)
        .arg("-c")
        .arg(&cache)
        .args(["--topology", EPYC])
        .assert()
        .success()
        .stdout(predicate::str::contains("INSTANCE (SUPERVISOR)  NODES"))
        .stdout(predicate::str::contains("redis-0 (cache)"))
        .stdout(predicate::str::is_match(r"\nmariadb-0 \(db\) +2 ").unwrap());
}

#[test]
fn the_order_of_the_files_changes_no_placement() {
    let dir = folder();
    let db = write(dir.path(), "db.toml", DB);
    let cache = write(dir.path(), "cache.toml", CACHE);
    assert_eq!(plan_json(&[&db, &cache]), plan_json(&[&cache, &db]));
}

#[test]
fn files_that_disagree_on_the_host_are_refused_naming_both() {
    let dir = folder();
    let db = write(dir.path(), "db.toml", DB);
    let cache = write(dir.path(), "cache.toml", &format!("[host]\nkeep-free = []\n{CACHE}"));
    pinctl()
        .arg("plan")
        .arg("-c")
        .arg(&db)
        .arg("-c")
        .arg(&cache)
        .args(["--topology", EPYC])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "`[host] keep-free` differs from `{}:2:1`",
            cache.display()
        )))
        .stderr(predicate::str::contains(format!("--> {}:3:1", db.display())));
}

#[test]
fn a_dry_run_of_one_file_plans_that_file_alone() {
    // Beside another file in its folder: with --topology, only the files given are the host.
    let dir = folder();
    let db = write(dir.path(), "db.toml", DB);
    write(dir.path(), "cache.toml", CACHE);
    let v = plan_json(&[&db]);
    assert_eq!(v["services"].as_array().unwrap().len(), 2);
}

/// A file of one `cpus = 1` service named `name`.
fn one_cpu(dir: &Path, name: &str) -> PathBuf {
    write(
        dir,
        &format!("{name}.toml"),
        &format!(
            "[host]\nkeep-free = []\n\n[service.{name}]\ncommand = [\"/bin/sleep\", \"1000\"]\ncpus = 1\n"
        ),
    )
}

/// The CPUs `pinctl plan --json` of the live machine gives the instance of `file`.
fn live_cpus(file: &Path) -> String {
    let out = pinctl().arg("plan").arg("-c").arg(file).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let services = v["services"].as_array().unwrap();
    assert_eq!(services.len(), 1, "only the file's own part: {v}");
    services[0]["cpus"].as_str().unwrap().to_string()
}

/// What `pinctl exec -c FILE --service NAME` sets: the process's allowed CPUs.
fn exec_cpus(file: &Path, service: &str) -> String {
    let out = pinctl()
        .arg("exec")
        .arg("-c")
        .arg(file)
        .args(["--service", service, "--", "grep", "Cpus_allowed_list", "/proc/self/status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_whitespace().nth(1).unwrap().to_string()
}

#[test]
fn two_files_of_this_machine_get_different_cpus_whichever_comes_first() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        // One CPU: both files can only share it, which `cpu-overcommit` would have to allow.
        return;
    }
    let dir = folder();
    let a = one_cpu(dir.path(), "alpha");
    let b = one_cpu(dir.path(), "beta");
    let (cpu_a, cpu_b) = (live_cpus(&a), live_cpus(&b));
    assert_ne!(cpu_a, cpu_b, "both files' services on CPU {cpu_a}");
    // Asked the other way round, and by the units' way in (`exec -c`): the same CPUs.
    assert_eq!((live_cpus(&b), live_cpus(&a)), (cpu_b.clone(), cpu_a.clone()));
    assert_eq!((exec_cpus(&b, "beta"), exec_cpus(&a, "alpha")), (cpu_b, cpu_a));
}

#[test]
fn a_live_plan_leaves_out_the_files_of_a_folder_others_may_write() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = folder();
    let a = one_cpu(dir.path(), "alpha");
    one_cpu(dir.path(), "beta");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    pinctl()
        .arg("plan")
        .arg("-c")
        .arg(&a)
        .assert()
        .success()
        .stderr(predicate::str::contains("are not planned with this host"))
        .stdout(predicate::str::contains("planned with the host's other files").not());
}

/// `pinctl run` supervisors of one folder, their sockets and state files in its `run/`, and
/// every PID they were seen running (killed, by PID, when the test ends however it ends).
struct Supervisors {
    dir: tempfile::TempDir,
    children: Vec<std::process::Child>,
    seen: std::collections::BTreeSet<(i32, u64)>,
}

impl Supervisors {
    fn new() -> Supervisors {
        let dir = folder();
        std::fs::create_dir(dir.path().join("run")).unwrap();
        Supervisors { dir, children: Vec::new(), seen: Default::default() }
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// Writes the file of one `cpus = 1` service `service`, supervised as `name`.
    fn file(&self, name: &str, service: &str) -> PathBuf {
        let run = self.run_dir();
        let text = format!(
            "[host]\nkeep-free = []\nsocket = \"{}/{name}.sock\"\nstate-file = \"{}/{name}.state.json\"\n\n\
             [service.{service}]\ncommand = [\"sleep\", \"100031\"]\ncpus = 1\n",
            run.display(),
            run.display()
        );
        write(self.dir.path(), &format!("{name}.toml"), &text)
    }

    /// Starts the supervisor of `file` and waits until its instances are active.
    fn start(&mut self, file: &Path) {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.log"))).unwrap();
        let child = std::process::Command::new(crate::support::PINCTL)
            .arg("run")
            .arg("-c")
            .arg(file)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.children.push(child);
        wait_for("the supervisor's instances to be active", || {
            let v = self.host_status().ok()?;
            let me = v["supervisors"].as_array()?.iter().find(|s| s["name"] == name.as_str())?;
            let instances = me["instances"].as_array()?;
            instances.iter().all(|i| i["state"] == "active").then_some(())
        });
    }

    /// `pinctl status --host --json` of the folder's runtime folder, every PID recorded.
    fn host_status(&mut self) -> Result<serde_json::Value, String> {
        let out = crate::supervisor::bounded_output(
            std::process::Command::new(crate::support::PINCTL)
                .args(["status", "--host", "--json", "--runtime-dir"])
                .arg(self.run_dir()),
        );
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
        for s in v["supervisors"].as_array().into_iter().flatten() {
            let pids = s["instances"].as_array().into_iter().flatten().map(|i| &i["pid"]);
            for pid in pids.chain([&s["pid"]]).filter_map(serde_json::Value::as_i64) {
                if let Some(st) = crate::supervisor::stat(pid as i32) {
                    self.seen.insert((pid as i32, st.start_time));
                }
            }
        }
        Ok(v)
    }

    /// The CPUs of each instance, by name.
    fn cpus(&mut self) -> std::collections::BTreeMap<String, String> {
        let v = self.host_status().unwrap();
        let all = v["supervisors"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["instances"].as_array().unwrap());
        all.map(|i| {
            (i["name"].as_str().unwrap().to_string(), i["cpus"].as_str().unwrap().to_string())
        })
        .collect()
    }
}

impl Supervisors {
    /// SIGTERM to each supervisor (each stops its instances), waited for; the PIDs seen that
    /// are still alive after, then killed.
    fn stop(&mut self) -> Vec<i32> {
        use rustix::process::Signal;
        for child in &self.children {
            let _ = crate::supervisor::signal(child.id() as i32, Signal::TERM);
        }
        for mut child in std::mem::take(&mut self.children) {
            wait_for("a supervisor to stop", || child.try_wait().ok().flatten());
        }
        let left: Vec<i32> = self
            .seen
            .iter()
            .filter(|&&(pid, start)| crate::supervisor::alive(pid, start))
            .map(|&(pid, _)| pid)
            .collect();
        for &pid in &left {
            let _ = crate::supervisor::signal(pid, Signal::KILL);
        }
        left
    }
}

impl Drop for Supervisors {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stop();
    }
}

/// Two supervisors of one host started in `first`, then the other's order: the CPUs of their
/// instances, and `status --host` of both.
fn two_supervisors(alpha_first: bool) -> (std::collections::BTreeMap<String, String>, String) {
    let mut host = Supervisors::new();
    let (a, b) = (unique_name(), unique_name());
    let (fa, fb) = (host.file(&a, "alpha"), host.file(&b, "beta"));
    let order = if alpha_first { [&fa, &fb] } else { [&fb, &fa] };
    for f in order {
        host.start(f);
    }
    let cpus = host.cpus();
    let text = crate::supervisor::bounded_output(
        std::process::Command::new(crate::support::PINCTL)
            .args(["status", "--host", "--runtime-dir"])
            .arg(host.run_dir()),
    );
    let text = String::from_utf8_lossy(&text.stdout).replace(&a, "A").replace(&b, "B");
    let text = text.replace(&host.dir.path().display().to_string(), "DIR");
    assert_eq!(host.stop(), Vec::<i32>::new(), "left running after the supervisors stopped");
    (cpus, text)
}

#[test]
fn two_supervisors_get_different_cpus_whichever_starts_first() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return;
    }
    let (first, text) = two_supervisors(true);
    assert_eq!(first.len(), 2, "{first:?}");
    assert_ne!(first["alpha"], first["beta"], "both supervisors' instances on one CPU");
    let (second, _) = two_supervisors(false);
    assert_eq!(first, second, "the order the supervisors started in moved an instance");
    // Every supervisor of the host, its file and its instances; the nodes none uses.
    assert!(text.contains("supervisor `A` (PID "), "{text}");
    assert!(text.contains(", DIR/A.toml, DIR/run/A.sock)\nINSTANCE"), "{text}");
    assert!(text.contains("supervisor `B` (PID "), "{text}");
    assert!(text.contains("\nalpha ") && text.contains("\nbeta "), "{text}");
    assert!(text.contains("free nodes: "), "{text}");
}

/// `pinctl exec ARGS -- sleep N` started in the background, once it has applied its placement
/// and exec'd (its allowed CPUs are `cpus`, where given); killed, by PID, when dropped.
struct Pinned(std::process::Child);

impl Pinned {
    fn start(args: &[&str], cpus: Option<&str>) -> Pinned {
        let child = std::process::Command::new(crate::support::PINCTL)
            .arg("exec")
            .args(args)
            .args(["--", "sleep", "100053"])
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let pinned = Pinned(child);
        wait_for("pinctl exec to pin and exec", || {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let on = cpus.is_none_or(|c| crate::supervisor::allowed_cpus(pid) == c);
            (comm.trim() == "sleep" && on).then_some(())
        });
        pinned
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `pinctl plan --json` of the live machine for `file`.
fn live_plan(file: &Path) -> serde_json::Value {
    let out = pinctl().arg("plan").arg("-c").arg(file).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_process_pinned_by_someone_else_is_planned_around() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return;
    }
    let dir = folder();
    let alpha = one_cpu(dir.path(), "alpha");
    // Where alpha goes now; then someone pins a process there, which is not pinctl's to move.
    let before = live_plan(&alpha)["services"][0]["cpus"].as_str().unwrap().to_string();
    let other = Pinned::start(&["--cpus", &before], Some(&before));
    let v = live_plan(&alpha);
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("held by processes pinned outside pinctl"), "{warnings}");
    // A unit's `exec -c` says it too (into its journal), dry run or not.
    for dry_run in [true, false] {
        let mut exec = pinctl();
        exec.arg("exec").arg("-c").arg(&alpha).args(["--service", "alpha"]);
        exec.args(if dry_run { &["--dry-run"][..] } else { &["--", "true"][..] });
        let out = exec.output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        assert!(said.contains("held by processes pinned outside pinctl"), "{said}");
        assert!(said.starts_with("warning: "), "{said}");
    }
    // Other tests of this machine may pin processes too (more than a warning names, or on
    // every CPU): then the plan cannot go around all of them, and says so; else it went
    // around, off the CPU of this one.
    if !warnings.contains("cannot plan around") {
        assert_ne!(v["services"][0]["cpus"], before.as_str(), "{v}");
    }
    // `status --host` shows it.
    let empty = folder();
    let out = pinctl()
        .args(["status", "--host", "--json", "--runtime-dir"])
        .arg(empty.path())
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pids: Vec<u64> = status["pinned_processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["pid"].as_u64())
        .collect();
    assert!(pids.contains(&u64::from(other.0.id())), "{status}");
}

#[test]
fn what_pinctl_exec_runs_for_an_instance_is_not_someone_elses() {
    let dir = folder();
    let alpha = one_cpu(dir.path(), "alpha");
    // Where it runs is not the point (processes other tests pin move the plan): that it is
    // alpha's own is.
    let unit = Pinned::start(&["-c", alpha.to_str().unwrap(), "--service", "alpha"], None);
    let v = live_plan(&alpha);
    let named = format!("PID {} ", unit.0.id());
    assert!(!v["warnings"].to_string().contains(&named), "{v}");
    // `status --host` says whose it is.
    let empty = folder();
    let out = pinctl()
        .args(["status", "--host", "--json", "--runtime-dir"])
        .arg(empty.path())
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = status["pinned_processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_u64() == Some(u64::from(unit.0.id())));
    assert_eq!(listed.map(|p| &p["instance"]), Some(&serde_json::json!("alpha")), "{status}");
}
