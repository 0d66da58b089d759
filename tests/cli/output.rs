//! An instance's output under `pinctl run` (issue 25), as root: written with the service's
//! rights but out of its reach, never dropped when whoever reads it is slow, and opened for any
//! `user` in a folder only root can write.
//!
//! Every wait is bounded and every process seen is killed by the `Run` guard. Figures that are
//! times (how long `status` took while an instance waited on its output) are printed, never
//! asserted.

use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::supervisor::{Run, WAIT, bounded_output, unpinned, wait_for};
use crate::support::PINCTL as BIN;

const NOBODY: u32 = 65534;

fn as_root() {
    assert_eq!(rustix::process::geteuid().as_raw(), 0, "these tests run as root (CI does)");
}

/// A folder of `nobody`'s inside `parent` (0755 so nobody can reach it).
fn nobodys_folder(parent: &Path, name: &str) -> std::path::PathBuf {
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
    dir
}

/// What `nobody` can do to every thread of process `pid`, one line per attempt that was NOT
/// refused (empty: all refused). Python's ctypes makes the raw calls: `kill` by TID and by PID,
/// `tgkill` with every signal 0-64, `prlimit` of RLIMIT_FSIZE, `ptrace(PTRACE_ATTACH)` and
/// opening `/proc/PID/task/TID/mem`.
fn what_nobody_can_do_to(pid: i32) -> (usize, String) {
    const SCRIPT: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
allowed = []
def refused(what, ret):
    err = ctypes.get_errno()
    if ret == 0 or err not in (1, 13):
        allowed.append(f"{what}: ret={ret} errno={err}")
SYS_tgkill, SYS_prlimit64, SYS_kill, PTRACE_ATTACH = 234, 302, 62, 16
class Rlimit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
for tid in tids:
    for sig in range(0, 65):
        refused(f"kill({tid},{sig})", libc.syscall(SYS_kill, tid, sig))
        refused(f"tgkill({pid},{tid},{sig})", libc.syscall(SYS_tgkill, pid, tid, sig))
    new = Rlimit(65536, 65536)
    refused(f"prlimit({tid},FSIZE)", libc.syscall(SYS_prlimit64, tid, 1, ctypes.byref(new), None))
    refused(f"ptrace(ATTACH,{tid})", libc.ptrace(PTRACE_ATTACH, tid, None, None))
    try:
        open(f"/proc/{pid}/task/{tid}/mem", "rb").close()
        allowed.append(f"open /proc/{pid}/task/{tid}/mem")
    except PermissionError:
        pass
for sig in range(0, 65):
    refused(f"kill({pid},{sig})", libc.syscall(SYS_kill, pid, sig))
print(len(tids))
print("\n".join(allowed))
"#;
    // In a session of its own, as a service's user is: the kernel lets SIGCONT through to
    // any process of the sender's own session.
    let out = bounded_output(
        Command::new("setsid")
            .args(["--wait", "python3", "-c", SCRIPT])
            .arg(pid.to_string())
            .uid(NOBODY)
            .gid(NOBODY),
    );
    assert!(out.status.success(), "python3: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (threads, allowed) = text.split_once('\n').unwrap();
    (threads.trim().parse().unwrap(), allowed.trim().to_string())
}

/// The threads of `pid` and the user ids (real, effective, saved, file system) of each.
fn thread_ids(pid: i32) -> Vec<(String, String)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .flatten()
        .map(|t| {
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or("").to_string();
            (t.file_name().to_string_lossy().to_string(), uid)
        })
        .collect()
}

/// The service user's `kill` (every signal, by TID and PID), `tgkill`, `prlimit` and
/// `ptrace` on every thread of the supervisor fail, while its output thread writes a file
/// with that user's rights (in a folder of the user's) and another writes a file pinctl opened
/// for it (in root's folder).
#[test]
fn the_service_user_cannot_signal_limit_or_trace_any_thread_of_the_supervisor() {
    as_root();
    let dir = tempfile::tempdir().unwrap();
    let own = nobodys_folder(dir.path(), "nobody");
    let config = format!(
        r#"
[host]
keep-free = []

[service.mine]
command = ["sh", "-c", "while :; do echo tick; sleep 0.05; done", "mine-100030"]
user = "nobody"
cpus = 1
output = "{}"

[service.rooted]
command = ["sh", "-c", "while :; do echo tock; sleep 0.05; done", "rooted-100030"]
user = "nobody"
cpus = 1
output = "{}"
"#,
        own.join("mine.log").display(),
        dir.path().join("rooted.log").display()
    );
    let mut run = Run::new(&config);
    run.start(&unpinned());
    for log in [own.join("mine.log"), dir.path().join("rooted.log")] {
        wait_for("lines in both output files", || {
            std::fs::read_to_string(&log).ok().filter(|t| t.lines().count() >= 3).map(drop)
        });
        assert_eq!(std::fs::metadata(&log).unwrap().uid(), NOBODY, "{}", log.display());
    }
    let pid = run.pid();
    let ids = thread_ids(pid);
    // The writer threads changed only their file-system id; no thread shares a real, effective
    // or saved id with the service's user.
    for (tid, uid) in &ids {
        let fields: Vec<&str> = uid.split_whitespace().skip(1).collect();
        assert_eq!(&fields[..3], ["0", "0", "0"], "thread {tid}: {uid}");
    }
    assert!(
        ids.iter().any(|(_, uid)| uid.ends_with(&NOBODY.to_string())),
        "a writer thread opened a file with nobody's file-system id: {ids:?}"
    );
    let (threads, allowed) = what_nobody_can_do_to(pid);
    assert!(threads >= 3, "the supervisor's threads were all tried ({threads})");
    assert_eq!(allowed, "", "nobody could act on the supervisor");
    // Still whole: it answers, and both instances run.
    let status = run.status();
    assert!(status.values().all(|i| i["state"] == "active"), "{status:?}");
    println!("nobody was refused on all {threads} threads of the supervisor");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// The numbers of the lines `PREFIX N` of `text`, in order.
fn numbers(text: &str, prefix: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.strip_prefix(prefix)?.parse().ok()).collect()
}

/// Whether `seen` is exactly 1..=n.
fn exactly_one_to(seen: &[u64], n: u64) -> Result<(), String> {
    if seen.len() as u64 == n && seen.iter().enumerate().all(|(i, &v)| v == i as u64 + 1) {
        return Ok(());
    }
    let gap = seen.windows(2).find(|w| w[1] != w[0] + 1);
    Err(format!("{} lines of {n}; first gap or double: {gap:?}", seen.len()))
}

/// How long `status` takes, asked every 20 ms while `busy` holds: the slowest answer.
fn slowest_status(run: &Run, busy: impl Fn() -> bool) -> (usize, Duration) {
    let (mut asked, mut slowest) = (0, Duration::ZERO);
    while busy() {
        let t = Instant::now();
        let r = run.ask(serde_json::json!({"cmd": "status"}));
        assert_eq!(r["ok"], true, "{r}");
        slowest = slowest.max(t.elapsed());
        asked += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    (asked, slowest)
}

/// pinctl's stdout read slowly (a pager, a stuck journald): the instance waits for it, and
/// every one of its lines arrives once, in order; the supervisor answers meanwhile.
#[test]
fn a_slow_reader_of_pinctl_s_stdout_slows_the_instance_and_loses_no_line() {
    const N: u64 = 1_000_000;
    let mut run = Run::new(&format!(
        "[host]\nkeep-free = []\n[service.w]\ncommand = [\"sh\", \"-c\", \"seq 1 {N}; exec sleep 100031\"]\ncpus = 1\n"
    ));
    let mut cmd = run.command(&unpinned());
    cmd.stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    run.child = Some(child);
    // About 10 MB, read 64 KiB every 5 ms: well beyond what pinctl queues (4 MiB) and the
    // FIFO holds (1 MiB), so the instance must wait.
    let reader = std::thread::spawn(move || {
        let (mut text, mut chunk) = (Vec::new(), vec![0u8; 64 * 1024]);
        let deadline = Instant::now() + WAIT * 6;
        while !text.ends_with(format!("w: {N}\n").as_bytes()) && Instant::now() < deadline {
            match stdout.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&chunk[..n]),
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        String::from_utf8(text).unwrap()
    });
    wait_for("the socket", || run.try_ask(&serde_json::json!({"cmd": "status"})).ok());
    let (asked, slowest) = slowest_status(&run, || !reader.is_finished());
    let text = reader.join().unwrap();
    println!("status answered {asked} times while the instance waited; slowest {slowest:?}");
    assert_eq!(exactly_one_to(&numbers(&text, "w: "), N), Ok(()));
    assert!(!run.stderr().contains("dropped"), "{}", run.stderr());
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// A tmpfs of `size` mounted in a folder of its own, unmounted when dropped.
struct SmallDisk {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        as_root();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk");
        std::fs::create_dir(&path).unwrap();
        let disk = SmallDisk { _dir: dir, path };
        disk.mount_args(&["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"]);
        disk
    }

    fn mount_args(&self, args: &[&str]) {
        let out = bounded_output(Command::new("mount").args(args).arg(&self.path));
        assert!(out.status.success(), "mount {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Gives it room again.
    fn grow(&self) {
        self.mount_args(&["-o", "remount,size=64m"]);
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn size_of(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// A file system that is full makes the instance wait, not lose lines: once it has room
/// again every line is there, once, in order; the supervisor answered meanwhile, and the
/// full disk was said once (then once a minute), its end once.
#[test]
fn a_full_disk_makes_the_instance_wait_and_loses_no_line() {
    const N: u64 = 200_000;
    let disk = SmallDisk::mount("256k");
    let log = disk.path.join("w.log");
    let mut run = Run::new(&format!(
        "[host]\nkeep-free = []\n[service.w]\ncommand = [\"sh\", \"-c\", \"seq 1 {N}; exec sleep 100032\"]\ncpus = 1\noutput = \"{}\"\n",
        log.display()
    ));
    run.start(&unpinned());
    // ~1.3 MB of lines into 256 KiB: the disk fills and the instance waits.
    wait_for("the disk to fill", || (size_of(&log) > 200 * 1024).then_some(()));
    let t = Instant::now();
    let (asked, slowest) = slowest_status(&run, || t.elapsed() < Duration::from_millis(2500));
    println!("status answered {asked} times while the disk was full; slowest {slowest:?}");
    assert!(size_of(&log) <= 256 * 1024, "the disk is full");
    disk.grow();
    wait_for("every line", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.ends_with(&format!("{N}\n")).then_some(())
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(exactly_one_to(&numbers(&text, ""), N), Ok(()));
    let said = run.said("writing output");
    let notices = said.lines().filter(|l| l.contains("cannot write output")).count();
    assert_eq!(notices, 1, "said when it began, not every try: {said}");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// An instance that waits on its output (the disk is full) still stops within its
/// stop-timeout, and every line it got into its FIFO reaches the file once there is room.
#[test]
fn an_instance_waiting_on_its_output_still_stops_and_its_last_lines_reach_the_file() {
    let disk = SmallDisk::mount("128k");
    let log = disk.path.join("w.log");
    let mut run = Run::new(&format!(
        "[host]\nkeep-free = []\n[service.w]\ncommand = [\"sh\", \"-c\", \"i=0; while :; do i=$((i+1)); echo $i; done\", \"w-100036\"]\ncpus = 1\nstop-timeout = \"1s\"\noutput = \"{}\"\n",
        log.display()
    ));
    run.start(&unpinned());
    wait_for("a write to fail on the full disk", || {
        run.stderr().contains("cannot write output").then_some(())
    });
    let out = run.ctl(&["stop", "w"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let status = run.status();
    assert_eq!(status["w"]["state"], "inactive", "stopped while its output waited: {status:?}");
    disk.grow();
    // The writer tries again (every second), says so, writes what the FIFO held, then the
    // file stops growing (looked at over more than one retry).
    let deadline = Instant::now() + WAIT;
    while !run.stderr().contains("writing output") {
        assert!(Instant::now() < deadline, "the writer never wrote again: {}", run.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut last = 0;
    wait_for("the file to stop growing", || {
        std::thread::sleep(Duration::from_millis(1200));
        let now = size_of(&log);
        (std::mem::replace(&mut last, now) == now).then_some(())
    });
    let seen = numbers(&std::fs::read_to_string(&log).unwrap(), "");
    assert!(seen.len() as u64 * 6 > 128 * 1024 / 6, "more than the full disk held: {}", seen.len());
    assert_eq!(exactly_one_to(&seen, seen.len() as u64), Ok(()));
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// `user = "nobody"` with its output in a folder only root can write (`/var/log/...` as
/// usual): pinctl opens it, as systemd's `StandardOutput=file:` does, and `check` says so.
#[test]
fn a_user_service_logs_into_a_folder_only_root_can_write() {
    as_root();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = dir.path().join("db.log");
    let mut run = Run::new(&format!(
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"sh\", \"-c\", \"echo ready; exec sleep 100033\"]\nuser = \"nobody\"\ncpus = 1\noutput = \"{}\"\n",
        log.display()
    ));
    let check = bounded_output(Command::new(BIN).arg("check").arg("-c").arg(run.config()));
    let said = String::from_utf8_lossy(&check.stdout).to_string();
    assert!(check.status.success(), "{said} {}", String::from_utf8_lossy(&check.stderr));
    assert!(said.contains(&format!("output `{}`", log.display())), "{said}");
    assert!(said.contains("opened by pinctl (root)"), "{said}");
    run.start(&unpinned());
    wait_for("the ready line", || {
        std::fs::read_to_string(&log).ok().filter(|t| t == "ready\n").map(drop)
    });
    let m = std::fs::metadata(&log).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (NOBODY, 0o640), "given to the instance's user");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// A root instance's output through a folder another user owns is refused at `check` and
/// at the start (209), and nothing is created: that user could have swapped the folder for a
/// link into a folder only root may write.
#[test]
fn a_root_instance_s_output_through_someone_else_s_folder_is_refused() {
    as_root();
    let dir = tempfile::tempdir().unwrap();
    let theirs = nobodys_folder(dir.path(), "theirs");
    let log = theirs.join("root.log");
    let run = Run::new(&format!(
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"sleep\", \"100034\"]\ncpus = 1\noutput = \"{}\"\n",
        log.display()
    ));
    let check = bounded_output(Command::new(BIN).arg("check").arg("-c").arg(run.config()));
    let said = String::from_utf8_lossy(&check.stdout).to_string()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(!check.status.success(), "{said}");
    assert!(said.contains("runs as root"), "{said}");
    let mut run = run;
    run.start(&unpinned());
    let status = run.status();
    let db = &status["db"];
    assert_eq!(db["state"], "failed", "{db}");
    assert_eq!(db["last_exit"], "exit status 209", "{db}");
    assert!(db["reason"].as_str().unwrap().contains("runs as root"), "{db}");
    assert!(!log.exists());
    assert!(run.terminate().success());
}

/// docs/config.md's logrotate stanza, as written (no `create`), for a `user = "nobody"`
/// service whose log folder only root can write: the renamed file ends where the new one
/// (created by pinctl for nobody) starts.
#[test]
fn logrotate_as_written_rotates_a_user_service_in_a_root_folder() {
    as_root();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let log = dir.path().join("talker.log");
    let mut run = Run::new(&format!(
        "[host]\nkeep-free = []\n[service.talker]\ncommand = [\"sh\", \"-c\", \"n=0; while :; do n=$((n+1)); echo tick $n; sleep 0.01; done\", \"talker-100035\"]\nuser = \"nobody\"\ncpus = 1\noutput = \"{}\"\n",
        log.display()
    ));
    run.start(&unpinned());
    let ticks = |p: &Path| numbers(&std::fs::read_to_string(p).unwrap_or_default(), "tick ");
    wait_for("lines to rotate", || (ticks(&log).len() >= 20).then_some(()));
    let conf = dir.path().join("logrotate.conf");
    let stanza = format!(
        "{} {{\n    daily\n    rotate 7\n    compress\n    delaycompress\n    sharedscripts\n    postrotate\n        {BIN} reopen-logs --socket {}\n    endscript\n}}\n",
        log.display(),
        run.socket().display()
    );
    std::fs::write(&conf, stanza).unwrap();
    crate::supervisor::logrotate(&conf);
    let rotated = dir.path().join("talker.log.1");
    wait_for("lines in the new file", || (ticks(&log).len() >= 20).then_some(()));
    let (old, new) = (ticks(&rotated), ticks(&log));
    assert_eq!(exactly_one_to(&old, old.len() as u64), Ok(()));
    assert_eq!(new[0], old[old.len() - 1] + 1, "old ends {:?}, new starts {:?}", old.last(), new);
    assert_eq!(std::fs::metadata(&log).unwrap().uid(), NOBODY, "the new file is the user's");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}
