//! Hostile input against the real binary (issue 12), every input built in the test: bounded
//! resources, nothing injected or leaked, outputs whole or absent.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use assert_cmd::prelude::*;
use predicates::prelude::*;

/// pinctl as a `std` command (these tests pass it stdin and raw arguments), run from the
/// repository root like `support::pinctl`.
fn pinctl() -> Command {
    let mut cmd = Command::new(crate::support::PINCTL);
    cmd.current_dir(crate::support::root());
    cmd
}

/// A two-node snapshot: node 0 = CPUs 0-3, node 1 = CPUs 4-7, 8 GiB each.
fn snapshot(dir: &Path) -> PathBuf {
    let node = |id: u32, cpus: &str| {
        serde_json::json!({"id": id, "cpus": cpus, "memory_bytes": 8u64 << 30,
            "memory_free_bytes": 4u64 << 30, "has_cpu": true, "has_memory": true})
    };
    let cpus: Vec<_> = (0..8)
        .map(|c| serde_json::json!({"id": c, "online": true, "package": c / 4, "core": c % 4, "node": c / 4}))
        .collect();
    let t = serde_json::json!({
        "nodes": [node(0, "0-3"), node(1, "4-7")],
        "distances": [[10, 21], [21, 10]],
        "cpus": cpus,
        "devices": [],
        "host": {"kernel": "6.1.0", "numa_balancing": 0, "zone_reclaim_mode": 0,
                 "allowed_cpus": "0-7", "allowed_nodes": "0-1", "offline_nodes": ""},
        "warnings": []
    });
    let path = dir.join("topo.json");
    fs::write(&path, serde_json::to_vec(&t).unwrap()).unwrap();
    path
}

fn config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}

const TWO: &str = "[host]\nkeep-free = []\n[service.a]\ncommand = [\"/bin/a\"]\nnodes = 1\n\
                   [service.b]\ncommand = [\"/bin/b\"]\nnodes = 1\n";

#[test]
fn a_plan_table_with_a_column_over_65535_characters_renders() {
    let dir = tempfile::tempdir().unwrap();
    // One node with every other CPU up to 65534: its CPU list prints in 180,000 characters.
    let cpus = "0-65534:1/2";
    let cpu_entries: Vec<_> = (0..65535u32)
        .step_by(2)
        .map(|c| serde_json::json!({"id": c, "online": true, "package": 0, "core": c, "node": 0}))
        .collect();
    let t = serde_json::json!({
        "nodes": [{"id": 0, "cpus": cpus, "memory_bytes": 8u64 << 30, "memory_free_bytes": null,
                   "has_cpu": true, "has_memory": true}],
        "distances": [[10]], "cpus": cpu_entries, "devices": [],
        "host": {"kernel": null, "numa_balancing": null, "zone_reclaim_mode": null,
                 "allowed_cpus": null, "allowed_nodes": null, "offline_nodes": ""},
        "warnings": []
    });
    let topo = dir.path().join("wide.json");
    fs::write(&topo, t.to_string()).unwrap();
    let cfg = config(
        dir.path(),
        "p.toml",
        "[host]\nkeep-free = []\n[service.a]\ncommand = [\"/bin/a\"]\n",
    );
    let out =
        pinctl().args(["plan", "--topology"]).arg(&topo).arg("-c").arg(&cfg).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let row = text.lines().find(|l| l.starts_with("a  ")).unwrap();
    assert!(row.len() > 65_535 && row.contains("65532,65534  "), "{}", &row[..200]);
    // A 70,000-character service name is refused with a short message, not rendered.
    let long = config(
        dir.path(),
        "l.toml",
        &format!("[service.{}]\ncommand = [\"/bin/a\"]\n", "s".repeat(70_000)),
    );
    let out =
        pinctl().args(["plan", "--topology"]).arg(&topo).arg("-c").arg(&long).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("at most 200 bytes"), "{}", &stderr[..stderr.len().min(400)]);
}

#[test]
fn a_service_file_that_is_not_a_regular_file_fails_fast() {
    let dir = tempfile::tempdir().unwrap();
    let topo = snapshot(dir.path());
    let fifo = dir.path().join("fifo.toml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for cfg in [Path::new("/dev/zero"), fifo.as_path()] {
        let mut cmd = assert_cmd::Command::from_std(pinctl());
        cmd.args(["check", "--topology"]).arg(&topo).arg("-c").arg(cfg);
        cmd.timeout(Duration::from_secs(20))
            .assert()
            .code(1)
            .stdout("")
            .stderr(predicate::str::contains("not a regular file"));
    }
    let big = config(dir.path(), "big.toml", &format!("# {}\n", "x".repeat(2 << 20)));
    pinctl()
        .args(["plan", "--topology"])
        .arg(&topo)
        .arg("-c")
        .arg(&big)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("larger than 1048576 bytes"));
}

/// Runs `systemd-analyze verify` on a unit with each drop-in of `dir`; stderr must be empty
/// (it reports a stray line as "Assignment outside of section", and still exits 0).
fn verify_drop_ins(dir: &Path) -> usize {
    let mut checked = 0;
    for entry in fs::read_dir(dir).unwrap() {
        let unit_dir = entry.unwrap().path();
        let Some(unit) = unit_dir.file_name().unwrap().to_str().unwrap().strip_suffix(".d") else {
            continue;
        };
        let unit_file = dir.join(unit);
        fs::write(&unit_file, "[Service]\nExecStart=/bin/true\n").unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&unit_file)
            .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.display()))
            .output()
            .expect("systemd-analyze (Debian package `systemd`) is needed by this test");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.trim().is_empty(), "{unit}: {stderr}");
        fs::remove_file(&unit_file).unwrap();
        checked += 1;
    }
    checked
}

#[test]
fn drop_ins_escape_what_they_quote_and_pass_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    let topo = snapshot(dir.path());
    let cfg =
        config(dir.path(), "x\nExecStartPre=\\x2fbin\\x2ftouch \\x2ftmp\\x2fpwned\n#.toml", TWO);
    let out = dir.path().join("units");
    pinctl()
        .args(["plan", "--topology"])
        .arg(&topo)
        .arg("-c")
        .arg(&cfg)
        .arg("--emit")
        .arg("systemd")
        .arg(&out)
        .assert()
        .success();
    let text = fs::read_to_string(out.join("a.service.d/50-pinctl.conf")).unwrap();
    assert!(!text.lines().any(|l| l.starts_with("ExecStartPre")), "{text}");
    assert!(text.contains("x\\nExecStartPre"), "{text}");
    assert_eq!(verify_drop_ins(&out), 2);
}

#[test]
fn emit_systemd_writes_all_drop_ins_or_none_and_never_follows_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let topo = snapshot(dir.path());
    let cfg = config(dir.path(), "p.toml", TWO);
    let out = dir.path().join("units");
    // b's drop-in folder cannot be made: a file is in the way. a's must not appear either.
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("b.service.d"), "in the way").unwrap();
    let plan = |out: &Path| {
        let mut cmd = pinctl();
        cmd.args(["plan", "--topology"]).arg(&topo).arg("-c").arg(&cfg);
        cmd.arg("--emit").arg("systemd").arg(out);
        cmd
    };
    plan(&out).assert().code(1).stderr(predicate::str::contains("b.service.d"));
    assert!(!out.join("a.service.d/50-pinctl.conf").exists(), "none written");
    let leftovers: Vec<_> = fs::read_dir(out.join("a.service.d"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "no staged file is left: {leftovers:?}");
    fs::remove_file(out.join("b.service.d")).unwrap();
    // A symbolic link at the drop-in path is replaced, its target left alone.
    let victim = dir.path().join("victim");
    fs::write(&victim, "precious").unwrap();
    fs::create_dir_all(out.join("a.service.d")).unwrap();
    symlink(&victim, out.join("a.service.d/50-pinctl.conf")).unwrap();
    plan(&out).assert().success();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    assert!(
        fs::read_to_string(out.join("a.service.d/50-pinctl.conf")).unwrap().contains("[Service]")
    );
    // An empty folder name is an error, not the current directory.
    plan(Path::new("")).assert().code(2).stderr(predicate::str::contains("empty path"));
}

#[test]
fn a_device_name_cannot_forge_a_line_of_topology_output() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let w = |rel: &str, text: &str| {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    w("sys/devices/system/cpu/online", "0-1\n");
    w("sys/devices/system/node/online", "0\n");
    w("sys/devices/system/node/node0/cpulist", "0-1\n");
    let evil = "\u{1b}[31m\nnode 9 cpus: FAKE";
    let pci = "sys/devices/pci0000:00/0000:00:02.0";
    w(&format!("{pci}/numa_node"), "0\n");
    w(&format!("{pci}/net/{evil}/ifindex"), "2\n");
    fs::create_dir_all(root.join("sys/class/net")).unwrap();
    symlink(
        format!("../../devices/pci0000:00/0000:00:02.0/net/{evil}"),
        root.join("sys/class/net").join(evil),
    )
    .unwrap();
    let out = pinctl().args(["topology", "--topology"]).arg(&root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\\u{1b}[31m\\nnode 9 cpus: FAKE"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("node 9")), "{text}");
}

#[test]
fn a_long_cpu_list_gives_a_short_error() {
    let dir = tempfile::tempdir().unwrap();
    // 120 KB: near the kernel's limit for one argument (MAX_ARG_STRLEN, 128 KiB).
    let list = "0,".repeat(60_000) + "x";
    let out = pinctl()
        .args(["exec", "--cpus", &list, "--", "/bin/true"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.len() < 600, "{}", String::from_utf8_lossy(&out.stderr));
}

fn exec(args: &[&str]) -> std::process::Output {
    pinctl().arg("exec").args(args).output().unwrap()
}

#[test]
fn bad_lists_on_the_exec_command_line_are_usage_errors() {
    for (args, want) in [
        (&["--cpus", "1-0,0", "--", "/bin/true"][..], "range `1-0` runs backwards"),
        (&["--cpus", "5-3", "--", "/bin/true"][..], "range `5-3` runs backwards"),
        (&["-N", "!all", "--", "/bin/true"][..], "invalid node list `!all`: it names no nodes"),
        (&["-C", "", "--", "/bin/true"][..], "invalid CPU list ``: it names no CPUs"),
        (&["--nodes", "", "--", "/bin/true"][..], "invalid node list ``: it names no nodes"),
    ] {
        let out = exec(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

#[test]
fn an_unknown_option_before_the_command_is_a_usage_error_with_a_suggestion() {
    let out = exec(&["--dryrun", "--", "/bin/true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("'--dry-run'") && !stderr.contains("not found in PATH"), "{stderr}");
    // After the command's name its options are its own.
    let out = exec(&["--dry-run", "/bin/echo", "--foo"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("command: /bin/echo --foo"));
}

#[test]
fn exec_failures_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("run.sh");
    fs::write(&script, "#!/nonexistent/interpreter -x\necho hi\n").unwrap();
    fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = script.to_str().unwrap();
    for (cmd, want) in [
        ("/nonexistent/cmd", "command `/nonexistent/cmd` does not exist"),
        ("no-such-command-pinctl", "command `no-such-command-pinctl` not found in PATH"),
        (
            script,
            "needs interpreter `/nonexistent/interpreter` (its `#!` line), which does not exist",
        ),
    ] {
        let out = exec(&["--", cmd]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(127), "{cmd}: {stderr}");
        assert!(stderr.contains(want), "{cmd}: {stderr}");
    }
}

#[test]
fn the_numactl_personality_reads_lists_as_numactl_does() {
    let dir = tempfile::tempdir().unwrap();
    let numactl = dir.path().join("numactl");
    symlink(env!("CARGO_BIN_EXE_pinctl"), &numactl).unwrap();
    let out = Command::new(&numactl).args(["-i", "", "--show"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("policy: default\n"));
    // numactl 2.0.16: a backwards range `N-M` is `N` alone.
    let out = Command::new(&numactl).args(["--physcpubind=0-0,0", "--show"]).output().unwrap();
    assert!(out.status.success());
    // A list that names nothing is numactl's bad list: status 1, not 215/242.
    let out = Command::new(&numactl).args(["-N", "!all", "--show"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_newline_in_the_config_path_does_not_forge_a_line_of_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let topo = snapshot(dir.path());
    let cfg = config(
        dir.path(),
        "x\nerror: forged.toml",
        "[service.a]\ncommand = [\"/bin/a\"]\nmemory-polcy = 1\n",
    );
    let out =
        pinctl().args(["check", "--topology"]).arg(&topo).arg("-c").arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("x\\nerror: forged.toml:3:1"), "{stderr}");
    assert!(!stderr.lines().any(|l| l.starts_with("error: forged")), "{stderr}");
}

/// hwloc XML is read by every build now, so its limits hold in every build: nesting that would
/// overflow a recursive parser's stack, a bitmap naming CPU 2^20 and a billion-laughs entity
/// each end in exit 1 naming the file, quickly and without reading the machine's memory away.
#[test]
fn hostile_hwloc_xml_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let machine = |cpuset: &str| {
        format!(
            "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=\"Machine\" \
             cpuset=\"{cpuset}\" complete_cpuset=\"{cpuset}\">\n<object type=\"NUMANode\" \
             os_index=\"0\" cpuset=\"{cpuset}\"/>\n</object>\n</topology>\n"
        )
    };
    let laughs = format!(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE topology [\n<!ENTITY a \"aaaaaaaaaa\">\n{}]>\n\
         <topology version=\"2.0\">&j;</topology>\n",
        (b'b'..=b'j')
            .map(|c| {
                let prev = (c - 1) as char;
                format!("<!ENTITY {} \"{}\">\n", c as char, format!("&{prev};").repeat(10))
            })
            .collect::<String>()
    );
    let cases = [
        (
            "deep.xml",
            format!(
                "<topology version=\"2.0\">{}{}</topology>",
                "<object type=\"Group\">".repeat(100_000),
                "</object>".repeat(100_000)
            ),
            "nest deeper than 256",
        ),
        ("far.xml", machine(&format!("0x1{}", ",0x0".repeat(2048))), "id `65536`, above 65535"),
        ("long.xml", machine(&format!("0x1{}", ",0x0".repeat(32_768))), "longer than 32768 bytes"),
        ("laughs.xml", laughs, "not well-formed XML"),
    ];
    for (name, xml, expected) in cases {
        let path = dir.path().join(name);
        fs::write(&path, xml).unwrap();
        let mut cmd = assert_cmd::Command::from_std(pinctl());
        cmd.args(["topology", "--topology"]).arg(&path);
        cmd.timeout(Duration::from_secs(20))
            .assert()
            .code(1)
            .stderr(predicate::str::contains(path.display().to_string()))
            .stderr(predicate::str::contains(expected));
    }
}
