//! Configs that must load, checked value by value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pinctl_config::{
    Config, DEFAULT_MEMORY_POLICY, InstanceSize, KeepFree, Limits, RestartPolicy, Severity,
    ShareNodes, parse,
};
use pinctl_topology::{CpuSet, MemoryPolicy, NodeSet};

fn good(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/good").join(name)
}

fn load_clean(name: &str) -> Config {
    let config = load(&good(name)).unwrap_or_else(|e| panic!("{name}:\n{e}"));
    assert!(config.warnings.is_empty(), "{name}: {:?}", config.warnings);
    config
}

#[test]
fn every_key_is_read() {
    let c = load_clean("every-key.toml");
    assert_eq!(c.host.keep_free, Some(vec![KeepFree::Nic("eth0".into()), KeepFree::Node(3)]));
    assert_eq!(c.host.reserve_cpus, CpuSet::parse_list("0-1,64-65").unwrap());
    assert_eq!(c.host.memory_reserve, Some(4 << 30));
    assert_eq!(c.host.name.as_deref(), Some("db"));
    assert_eq!(c.host.socket, Some(PathBuf::from("/run/pinctl/db.sock")));
    assert_eq!(c.host.state_file, Some(PathBuf::from("/var/lib/pinctl/state.json")));
    assert_eq!(
        c.host.cpu_overcommit.map(|r| (r.hundredths(), r.to_string())),
        Some((150, "1.5".into()))
    );
    assert_eq!(c.services.len(), 3);

    let tikv = &c.services[0];
    assert_eq!(tikv.name, "tikv");
    assert_eq!(tikv.size, InstanceSize::Nodes(2));
    assert_eq!(tikv.memory, Some(48 << 30));
    assert_eq!(tikv.memory_policy, MemoryPolicy::Bind);
    assert_eq!(tikv.only_nodes, Some(NodeSet::parse_list("0-3").unwrap()));
    assert_eq!(tikv.user.as_deref(), Some("tidb"));
    assert_eq!(tikv.group.as_deref(), Some("tidb"));
    assert_eq!(tikv.restart, RestartPolicy::OnFailure);
    assert_eq!(tikv.stop_signal, "INT");
    assert_eq!(tikv.stop_timeout, Duration::from_secs(90));
    assert_eq!(tikv.restart_delay, Duration::from_millis(250));
    assert_eq!(tikv.restart_max_delay, Duration::from_secs(60));
    assert_eq!(
        tikv.start_limit,
        Some(pinctl_config::StartLimit { burst: 5, interval: Duration::from_secs(10) })
    );
    assert_eq!(tikv.enforce, Some(pinctl_config::Enforce::Cgroup));
    assert!(c.interrupts.steer);
    assert_eq!(c.interrupts.of("tikv"), pinctl_config::ServiceInterrupts::NicQueues);
    assert_eq!(c.interrupts.of("mysql"), pinctl_config::ServiceInterrupts::Quiet);
    // Interrupts on its CPUs are drift only for a service pinctl keeps quiet.
    assert!(!c.watch.drift("tikv").quiet_interrupts);
    assert!(c.watch.drift("mysql").quiet_interrupts);
    assert_eq!(tikv.instances[1].output, Some(PathBuf::from("/var/log/tikv-1.log")));
    assert_eq!(
        tikv.limits,
        Limits {
            nofile: Some(1_000_000),
            nproc: Some(u64::MAX),
            memlock: Some(64 << 20),
            core: Some(0),
            stack: Some(u64::MAX),
        }
    );
    let names: Vec<&str> = tikv.instances.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["tikv-0", "tikv-1"]);
    let one = &tikv.instances[1];
    assert_eq!(one.index, 1);
    let command: Vec<&str> = one.command.iter().map(|a| &**a).collect();
    assert_eq!(command, ["/usr/bin/tikv-server", "--config", "/etc/tikv/tikv-1.toml"]);
    assert_eq!(one.near, ["nvme1n1", "/data1"]);
    assert_eq!(one.unit.as_deref(), Some("tikv@1.service"));
    assert_eq!(one.working_dir, Some(PathBuf::from("/var/lib/tikv/1")));
    let env: BTreeMap<String, String> =
        [("RUST_LOG", "info"), ("TIKV_INSTANCE", "1")].map(|(k, v)| (k.into(), v.into())).into();
    assert_eq!(one.env, env);

    let mysql = &c.services[1];
    assert_eq!(mysql.size, InstanceSize::Cpus(12));
    assert_eq!(mysql.memory, Some(8 << 30));
    // From [defaults]:
    assert_eq!(mysql.memory_policy, MemoryPolicy::Preferred);
    assert_eq!(mysql.restart, RestartPolicy::Always);
    assert_eq!(mysql.only_nodes, Some(NodeSet::parse_list("4-7").unwrap()));
    assert_eq!(mysql.stop_timeout, Duration::from_secs(45));
    assert_eq!(mysql.instances.len(), 1);
    assert_eq!(mysql.instances[0].name, "mysql");
    assert_eq!(mysql.instances[0].near, ["eth1"]);
    // Supervisor keys not written take their defaults.
    assert_eq!(mysql.restart_delay, pinctl_config::DEFAULT_RESTART_DELAY);
    assert_eq!(mysql.restart_max_delay, pinctl_config::DEFAULT_RESTART_MAX_DELAY);
    assert_eq!(mysql.start_limit, Some(pinctl_config::DEFAULT_START_LIMIT));
    assert_eq!(mysql.enforce, None);
    assert_eq!(mysql.instances[0].output, None);
    // `nodes = 2` and `cpus = N` instances never share a node with each other.
    assert_eq!((tikv.share_nodes, mysql.share_nodes), (ShareNodes::Never, ShareNodes::Never));

    let tidb = &c.services[2];
    assert_eq!(tidb.size, InstanceSize::Nodes(1));
    assert_eq!((tidb.share_nodes, tidb.share_weight), (ShareNodes::Always, 4));
}

#[test]
fn defaults_apply_and_each_service_overrides_them() {
    let c = load_clean("defaults.toml");
    let inherits = c.service("inherits").unwrap();
    assert_eq!(inherits.memory_policy, MemoryPolicy::Preferred);
    assert_eq!(inherits.size, InstanceSize::Nodes(2));
    assert_eq!(inherits.user.as_deref(), Some("svc"));
    assert_eq!(inherits.stop_signal, "QUIT");
    assert_eq!(inherits.limits.nofile, Some(65536));
    assert_eq!(inherits.limits.core, Some(0));
    assert_eq!(inherits.instances[0].env["LOG"], "warn");

    let overrides = c.service("overrides").unwrap();
    assert_eq!(overrides.memory_policy, MemoryPolicy::Interleave);
    // `cpus` in the service replaces the default `nodes`: they size the same thing.
    assert_eq!(overrides.size, InstanceSize::Cpus(4));
    assert_eq!(overrides.user.as_deref(), Some("other"));
    assert_eq!(overrides.stop_signal, "TERM");
    // Tables merge per entry, the service winning.
    assert_eq!(overrides.limits.nofile, Some(1024));
    assert_eq!(overrides.limits.core, Some(0));
    let env = &overrides.instances[0].env;
    assert_eq!(
        (env["LANG"].as_str(), env["LOG"].as_str(), env["EXTRA"].as_str()),
        ("C.UTF-8", "debug", "1")
    );
}

#[test]
fn unwritten_keys_take_their_documented_defaults() {
    let c = load_clean("minimal.toml");
    assert_eq!(c.host.keep_free, None);
    assert!(c.host.reserve_cpus.is_empty());
    assert_eq!(c.host.memory_reserve, None);
    let s = &c.services[0];
    assert_eq!(s.size, InstanceSize::Nodes(1));
    assert_eq!(s.memory, None);
    assert_eq!(s.memory_policy, DEFAULT_MEMORY_POLICY);
    assert_eq!(s.memory_policy, MemoryPolicy::Bind);
    assert_eq!(s.only_nodes, None);
    assert_eq!(s.restart, RestartPolicy::OnFailure);
    assert_eq!(s.stop_signal, "TERM");
    assert_eq!(s.stop_timeout, Duration::from_secs(30));
    assert_eq!(s.limits, Limits::default());
    // No size written: one node each where the host has room, then sharing.
    assert_eq!((s.share_nodes, s.share_weight), (ShareNodes::WhenNeeded, 1));
    assert_eq!(c.host.cpu_overcommit, None);
    let i = &s.instances[0];
    assert_eq!((i.name.as_str(), i.index), ("app", 0));
    assert!(i.near.is_empty() && i.env.is_empty() && i.unit.is_none() && i.working_dir.is_none());
}

#[test]
fn instances_are_found_by_name() {
    let c = load_clean("every-key.toml");
    let (service, instance) = c.instance("tikv-1").unwrap();
    assert_eq!((service.name.as_str(), instance.index), ("tikv", 1));
    assert_eq!(c.instance("mysql").unwrap().1.name, "mysql");
    assert!(c.instance("tikv").is_none(), "a multi-instance service has no plain-named instance");
    assert!(c.instance("mysql-0").is_none());
    assert_eq!(c.instances().count(), 5);
}

#[test]
fn spans_point_at_the_values_later_checks_need() {
    let c = load_clean("every-key.toml");
    let file = c.spans.file.as_ref().unwrap();
    let tikv = c.service_spans("tikv").unwrap();
    assert_eq!(file.slice(&tikv.name), "tikv");
    assert_eq!(file.slice(tikv.size.as_ref().unwrap()), "2");
    assert_eq!(file.slice(&tikv.near[1]), "\"/data{instance}\"");
    assert_eq!(file.slice(&tikv.only_nodes[2].1), "2");
    let mysql = c.service_spans("mysql").unwrap();
    // A value from [defaults] points into [defaults].
    assert_eq!(file.slice(mysql.memory_policy.as_ref().unwrap()), "\"preferred\"");
    assert_eq!(file.slice(&c.spans.host.keep_free[1]), "3");
    let d = c.diagnostic_at(Some(&tikv.near[0]), Severity::Warning, "`nvme0n1` does not exist");
    let rendered = d.render(false);
    assert!(rendered.contains("every-key.toml:25:9"), "{rendered}");
}

/// Reads a file as the launcher does (within its bound there) and validates it.
fn load(path: &Path) -> Result<pinctl_config::Config, pinctl_config::ConfigError> {
    match std::fs::read(path) {
        Ok(bytes) => pinctl_config::from_bytes(path, &bytes),
        Err(e) => Err(pinctl_config::ConfigError::io(path, e)),
    }
}

#[test]
fn io_errors_name_the_path() {
    let missing = Path::new("/nonexistent/pinctl.toml");
    let e = load(missing).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("error: cannot read `/nonexistent/pinctl.toml`: "), "{text}");
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn non_utf8_files_are_refused_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.toml");
    std::fs::write(&path, b"[service.a]\ncommand = [\"/bin/caf\xe9\"]\n").unwrap();
    let text = load(&path).unwrap_err().to_string();
    assert!(text.contains("is not UTF-8 text (invalid byte on line 2)"), "{text}");
}

#[test]
fn parsing_is_deterministic() {
    let text = std::fs::read_to_string(good("every-key.toml")).unwrap();
    let a = parse(Path::new("x.toml"), &text).unwrap();
    let b = parse(Path::new("x.toml"), &text).unwrap();
    assert_eq!(a, b);
    let bad = "[service.a]\ncommand = []\ncpus = 0\nbogus = 1\n";
    let e1 = parse(Path::new("x.toml"), bad).unwrap_err().to_string();
    let e2 = parse(Path::new("x.toml"), bad).unwrap_err().to_string();
    assert_eq!(e1, e2);
    assert_eq!(e1.matches("error:").count(), 4, "three errors and the summary:\n{e1}");
}

#[test]
fn the_examples_in_docs_are_real_configs() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md"))
            .expect("docs/config.md");
    let mut blocks = 0;
    let mut rest = doc.as_str();
    while let Some(start) = rest.find("```toml\n") {
        let body_start = start + "```toml\n".len();
        let end = rest[body_start..].find("```").expect("closed block") + body_start;
        let body = &rest[body_start..end];
        rest = &rest[end + 3..];
        // Fragments (a single key or table) are marked as such; whole files must load.
        if body.starts_with("# fragment") {
            continue;
        }
        let is_bad = body.starts_with("# refused");
        match (parse(Path::new("pinctl.toml"), body), is_bad) {
            (Ok(c), false) => assert!(c.warnings.is_empty(), "{body}\n{:?}", c.warnings),
            (Err(e), true) => {
                // The report shown right after a refused example is the real one.
                let shown = rest.trim_start().strip_prefix("```text\n").expect("a report follows");
                let shown = &shown[..shown.find("```").expect("closed block")];
                assert_eq!(shown, format!("{e}\n"), "docs/config.md shows a stale report");
            }
            (Ok(_), true) => panic!("this example should be refused:\n{body}"),
            (Err(e), false) => panic!("this example does not load:\n{body}\n{e}"),
        }
        blocks += 1;
    }
    assert!(blocks >= 3, "expected the full examples in docs/config.md");
}

#[test]
fn windows_line_endings_and_a_byte_order_mark_are_read() {
    let text = "\u{feff}[service.a]\r\ncommand = [\"/bin/a\"]\r\ncpus = 0\r\n";
    let e = parse(Path::new("crlf.toml"), text).unwrap_err().to_string();
    assert!(e.contains("--> crlf.toml:3:8\n"), "{e}");
    assert!(e.contains("\n3 | cpus = 0\n"), "{e}");
    let ok = parse(Path::new("crlf.toml"), &text.replace("cpus = 0", "cpus = 2")).unwrap();
    assert_eq!(ok.services[0].size, InstanceSize::Cpus(2));
}

mod mutations {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever is done to a good file, parsing answers (a config or a report) and never
        /// panics, and every report names the file.
        #[test]
        fn damaged_files_get_a_report_not_a_panic(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..4, "[ -~éñ\\t\\n\"\\[\\]{}=,]{0,3}"), 1..4)
        ) {
            let mut text = std::fs::read_to_string(good("every-key.toml")).unwrap();
            for (at, delete, insert) in edits {
                let mut i = at.index(text.len() + 1);
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                let mut j = (i + delete).min(text.len());
                while !text.is_char_boundary(j) {
                    j += 1;
                }
                text.replace_range(i..j, &insert);
            }
            match parse(Path::new("mutated.toml"), &text) {
                Ok(c) => prop_assert!(!c.services.is_empty()),
                Err(e) => {
                    prop_assert!(e.error_count() > 0);
                    let report = e.to_string();
                    prop_assert!(report.contains("mutated.toml"), "{}", report);
                }
            }
        }
    }
}

#[test]
fn each_file_has_a_supervisor_of_its_own_by_default() {
    let load = |path: &str, text: &str| pinctl_config::parse(Path::new(path), text).unwrap();
    let command = "[service.a]\ncommand = [\"/bin/a\"]\n";
    let a = load("/etc/pinctl/pinctl.toml", command).supervisor().unwrap();
    assert_eq!(a.name, "pinctl");
    assert_eq!(a.socket, PathBuf::from("/run/pinctl/pinctl.sock"));
    assert_eq!(a.state_file, PathBuf::from("/run/pinctl/pinctl.state.json"));
    assert_eq!(a.legacy_state_file, Some(PathBuf::from("/run/pinctl/state.json")));
    let b = load("/etc/pinctl/tidb.toml", command).supervisor().unwrap();
    assert_eq!(
        (b.socket.to_str(), b.state_file.to_str()),
        (Some("/run/pinctl/tidb.sock"), Some("/run/pinctl/tidb.state.json"))
    );
    // `[host] name` names it; given paths win, and an explicit state file has no legacy one.
    let named = format!("[host]\nname = \"db\"\nstate-file = \"/var/lib/db.json\"\n{command}");
    let c = load("/etc/pinctl/pinctl.toml", &named).supervisor().unwrap();
    assert_eq!((c.name.as_str(), c.socket.to_str()), ("db", Some("/run/pinctl/db.sock")));
    assert_eq!((c.state_file.to_str(), c.legacy_state_file), (Some("/var/lib/db.json"), None));
    // A file name that cannot name a supervisor says what to do.
    let e = load("/etc/My DB.toml", command).supervisor().unwrap_err();
    assert!(e.contains("set `[host] name`"), "{e}");
}

#[test]
fn docs_describe_every_key() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md"))
            .expect("docs/config.md");
    let headings: Vec<&str> = doc.lines().filter(|l| l.starts_with('#')).collect();
    let documented = |key: &str| headings.iter().any(|h| h.contains(&format!("`{key}`")));
    for key in pinctl_config::HOST_KEYS.iter().chain(&pinctl_config::SERVICE_KEYS) {
        assert!(documented(key), "docs/config.md has no heading for `{key}`");
    }
    // every-key.toml loads, so each key listed in messages is one the parser accepts.
    let every = std::fs::read_to_string(good("every-key.toml")).unwrap();
    for key in pinctl_config::HOST_KEYS.iter().chain(&pinctl_config::SERVICE_KEYS) {
        let written = every.contains(&format!("\n{key} = ")) || every.contains(&format!(".{key}]"));
        assert!(written, "every-key.toml lacks `{key}`");
    }
    for key in pinctl_config::LIMIT_KEYS {
        assert!(doc.contains(&format!("`{key}`")), "docs/config.md does not mention limit `{key}`");
    }
}

#[test]
fn drift_keys_are_read_with_defaults_and_inheritance() {
    let c = load_clean("every-key.toml");
    assert_eq!(c.watch.interval, std::time::Duration::from_secs(5));
    assert_eq!(c.watch.metrics_listen.unwrap().to_string(), "127.0.0.1:9464");
    assert_eq!(c.watch.node_free_watermark, Some(1 << 30));
    let tikv = c.watch.drift("tikv");
    assert_eq!(tikv.on_drift, pinctl_config::OnDrift::Rebalance);
    assert_eq!(tikv.drift_hold, std::time::Duration::from_secs(60));
    assert_eq!(tikv.min_locality, 0.95);
    assert_eq!(tikv.min_memory, 1 << 30);
    assert_eq!(tikv.rebalance_rate, 64 << 20);
    assert_eq!(tikv.rebalance_stall, std::time::Duration::from_millis(10));
    assert_eq!(c.watch.pid_files["tikv-1"], std::path::PathBuf::from("/run/tikv/tikv-1.pid"));
    // mysql has its own alert command and every other default.
    let mysql = c.watch.drift("mysql");
    assert_eq!(mysql.alert_command.as_ref().unwrap()[0], "/usr/local/bin/page-oncall");
    assert_eq!(mysql.on_drift, pinctl_config::OnDrift::Alert);
    assert_eq!(mysql.min_locality, pinctl_config::DriftSettings::DEFAULT_MIN_LOCALITY);
    assert_eq!(mysql.rebalance_stall, std::time::Duration::from_millis(20));
    assert!(!c.watch.pid_files.contains_key("mysql"));
    let minimal = load_clean("minimal.toml");
    assert_eq!(minimal.watch.interval, std::time::Duration::from_secs(10));
    assert_eq!(minimal.watch.metrics_listen, None);
}

#[test]
fn instances_share_what_does_not_change_per_instance() {
    // 8192 instances of a service with a 64 KiB argument: one copy of it, not 512 MiB.
    let long = "x".repeat(64 << 10);
    let text = format!(
        "[service.big]\ncommand = [\"/bin/big\", \"{long}\", \"--id={{instance}}\"]\n\
         instances = {}\ncpus = 1\n",
        pinctl_config::MAX_INSTANCES
    );
    let c = pinctl_config::parse(Path::new("big.toml"), &text).unwrap();
    let instances = &c.service("big").unwrap().instances;
    assert_eq!(instances.len(), 8192);
    let first = &instances[0].command[1];
    assert!(instances.iter().all(|i| std::sync::Arc::ptr_eq(&i.command[1], first)));
    assert_eq!(&*instances[8191].command[2], "--id=8191");
}

#[test]
fn sharing_follows_the_size_and_defaults_apply_to_one_node_services_only() {
    let text = r#"
[defaults]
share-nodes = "always"

[service.sized]
command = ["/bin/a", "{instance}"]
instances = 2
nodes = 1

[service.unsized]
command = ["/bin/b", "{instance}"]
instances = 2

[service.pairs]
command = ["/bin/c", "{instance}"]
instances = 2
nodes = 2

[service.small]
command = ["/bin/d", "{instance}"]
instances = 2
cpus = 2

[service.alone]
command = ["/bin/e", "{instance}"]
instances = 2
share-nodes = "never"
"#;
    let c = parse(Path::new("sharing.toml"), text).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let mode = |name: &str| c.service(name).unwrap().share_nodes;
    assert_eq!(mode("sized"), ShareNodes::Always);
    assert_eq!(mode("unsized"), ShareNodes::Always);
    // The default is not an error where sharing means nothing; it does not apply there.
    assert_eq!(mode("pairs"), ShareNodes::Never);
    assert_eq!(mode("small"), ShareNodes::Never);
    assert_eq!(mode("alone"), ShareNodes::Never);
    let plain =
        parse(Path::new("plain.toml"), "[service.a]\ncommand = [\"/a\"]\nnodes = 1\n").unwrap();
    assert_eq!(plain.services[0].share_nodes, ShareNodes::Never, "`nodes = 1` written: owned");
    for (ratio, hundredths) in [("1", 100), ("2", 200), ("1.25", 125), ("64", 6400), ("1.0", 100)] {
        let text = format!("[host]\ncpu-overcommit = {ratio}\n[service.a]\ncommand = [\"/a\"]\n");
        let c = parse(Path::new("ratio.toml"), &text).unwrap();
        assert_eq!(c.host.cpu_overcommit.unwrap().hundredths(), hundredths, "{ratio}");
    }
}
