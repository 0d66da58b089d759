//! The metrics endpoint, scraped live and checked with `promtool` (Debian's `prometheus`
//! package, installed by scripts/test); the shipped alerting rules checked and tested on
//! sample series. A missing promtool fails these tests: it is a dependency of the test suite.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use pinctl_drift::metrics::{self, Metrics};
use pinctl_drift::rebalance::{MoveReport, MoveStop, RepinReport};
use pinctl_drift::rules::{DriftKind, Edge, Finding};
use pinctl_drift::sample::{
    HostSample, InstanceSample, MemorySource, NodeBytes, NodeMemory, NodeSample, ThreadSample,
};
use pinctl_drift::watch::{CycleReport, DriftEvent, InstanceReport, RebalanceReport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn promtool(args: &[&str], stdin: Option<&str>, dir: &Path) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(
            "promtool is needed by these tests: apt-get install prometheus (scripts/test does)",
        );
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn report() -> CycleReport {
    let mut memory = NodeMemory::default();
    memory.0.insert(0, NodeBytes { anon: 3 << 30, file: 1 << 20, shmem: 0, huge: 0 });
    memory.0.insert(1, NodeBytes { anon: 1 << 30, ..Default::default() });
    let sample = InstanceSample {
        at: Duration::from_secs(10),
        pids: vec![4242],
        start_times: [(4242, 500)].into(),
        refused: Vec::new(),
        cgroup: Some("/sys/fs/cgroup/system.slice/mysql@0.service".into()),
        memory,
        source: MemorySource::Cgroup,
        threads: vec![ThreadSample {
            tid: 4242,
            allowed: "0-63".parse().unwrap(),
            last_cpu: Some(40),
            running: true,
        }],
        policies: Vec::new(),
        cost: Duration::from_micros(45),
    };
    let finding = Finding { value: 0.75, threshold: 0.9, detail: "75%".into() };
    let mut host = HostSample { numa_pages_migrated: 12, ..Default::default() };
    for n in 0..2 {
        host.nodes.insert(
            n,
            NodeSample {
                total_bytes: 64 << 30,
                free_bytes: 10 << 30,
                numa_miss: 5,
                numa_foreign: 7,
            },
        );
    }
    CycleReport {
        host,
        instances: vec![
            InstanceReport {
                instance: "mysql-0".into(),
                service: "mysql".into(),
                action: pinctl_config::OnDrift::Rebalance,
                planned_cpus: "0-31".into(),
                planned_nodes: "0".into(),
                planned_policy: "bind".into(),
                sample: Some(sample),
                error: None,
                refused: false,
                local_fraction: Some(0.75),
                locality_not_judged: None,
                threads_out_of_place: 1,
                interrupts_per_second: Some(12.5),
                findings: vec![(DriftKind::Locality, finding.clone())],
                drifting: vec![DriftKind::Locality],
                episodes: BTreeMap::from([(DriftKind::Locality, 1)]),
            },
            InstanceReport {
                instance: "mysql-1".into(),
                service: "mysql".into(),
                action: pinctl_config::OnDrift::Alert,
                planned_cpus: "32-63".into(),
                planned_nodes: "1".into(),
                planned_policy: "bind".into(),
                sample: None,
                error: Some("not running".into()),
                refused: false,
                local_fraction: None,
                locality_not_judged: None,
                threads_out_of_place: 0,
                interrupts_per_second: None,
                findings: Vec::new(),
                drifting: Vec::new(),
                episodes: BTreeMap::new(),
            },
        ],
        events: vec![DriftEvent {
            instance: "mysql-0".into(),
            service: "mysql".into(),
            kind: DriftKind::Locality,
            edge: Edge::Start,
            episode: 1,
            value: 0.75,
            threshold: 0.9,
            detail: "75%".into(),
            alert: true,
            action: pinctl_config::OnDrift::Rebalance,
            lasted_seconds: None,
            local_fraction: Some(0.75),
        }],
        rebalances: vec![RebalanceReport {
            instance: "mysql-0".into(),
            pid: 4242,
            threads: Some(RepinReport { repinned: 3, vanished: 0, rounds: 2, complete: true }),
            memory: Some(MoveReport {
                pages_moved: 1000,
                bytes_moved: 4_096_000,
                bytes_counted: 4_096_000,
                passes: 1,
                locality_after: Some(0.93),
                pages_failed: 2,
                blocks: 0,
                blocks_whole: 0,
                batches: 9,
                took: Duration::from_millis(120),
                lookup: Duration::from_millis(30),
                worst_stall: Duration::from_millis(14),
                call_cost: Duration::from_millis(2),
                page_cost: Duration::from_micros(1),
                stop: MoveStop::LocalityRestored,
            }),
            error: None,
        }],
        notices: Vec::new(),
        took: Duration::from_micros(300),
    }
}

async fn scrape(addr: std::net::SocketAddr, path: &str, accept: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: test\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[test]
fn a_live_scrape_passes_promtool_check_metrics() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut m = Metrics::new();
    m.record(&report());
    // The kernel's counters add their increase, not their value, the second time.
    let mut second = report();
    for n in second.host.nodes.values_mut() {
        n.numa_miss = 8;
    }
    m.record(&second);
    let listening = metrics::Listening::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listening.addr;
    rt.block_on(async { listening.serve(m.server()) }).unwrap();
    let response = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), scrape(addr, "/metrics", "*/*"))
            .await
            .unwrap()
    });
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    for line in [
        "pinctl_instance_memory_bytes{service_instance=\"mysql-0\",node=\"1\",kind=\"anon\"} 1073741824",
        "pinctl_instance_local_memory_ratio{service_instance=\"mysql-0\"} 0.75",
        "pinctl_instance_drifting{service_instance=\"mysql-0\",kind=\"locality\"} 1",
        "pinctl_instance_drift_episodes_total{service_instance=\"mysql-0\",kind=\"locality\"} 2",
        "pinctl_instance_drift_episodes_total{service_instance=\"mysql-0\",kind=\"cpu\"} 0",
        "pinctl_instance_up{service_instance=\"mysql-1\"} 0",
        "pinctl_instance_threads_out_of_place{service_instance=\"mysql-0\"} 1",
        "pinctl_instance_interrupts_per_second{service_instance=\"mysql-0\"} 12.5",
        "pinctl_instance_drift_episodes_total{service_instance=\"mysql-0\",kind=\"interrupts\"} 0",
        "pinctl_rebalance_moved_pages_total{service_instance=\"mysql-0\"} 2000",
        "pinctl_rebalance_moved_bytes_total{service_instance=\"mysql-0\"} 8192000",
        "pinctl_rebalance_worst_batch_stall_seconds{service_instance=\"mysql-0\"} 0.014",
        "pinctl_node_free_memory_bytes{node=\"0\"} 10737418240",
        "pinctl_node_numa_miss_pages_total{node=\"1\"} 8",
        "pinctl_numa_balancing_migrated_pages_total 12",
    ] {
        assert!(body.contains(line), "missing `{line}` in\n{body}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (ok, out) = promtool(&["check", "metrics"], Some(body), dir.path());
    assert!(ok, "promtool check metrics:\n{out}\n{body}");
    let om = rt.block_on(scrape(addr, "/metrics", "application/openmetrics-text; version=1.0.0"));
    assert!(om.to_ascii_lowercase().contains("content-type: application/openmetrics-text"), "{om}");
    assert!(om.trim_end().ends_with("# EOF"), "{om}");
    let not_found = rt.block_on(scrape(addr, "/nothing", "*/*"));
    assert!(not_found.starts_with("HTTP/1.1 404"), "{not_found}");
}

#[test]
fn idle_connections_in_every_slot_cannot_lock_scrapes_out() {
    // Connections that never finish a request (an unprivileged user's, say) fill every slot;
    // each real scrape after them is served, in place of the one that waited longest. The
    // scrapes' own wait (5 s) is shorter than the header timeout (10 s): none is served by
    // an idle connection timing out.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let m = Metrics::new();
    let listening = metrics::Listening::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listening.addr;
    rt.block_on(async { listening.serve(m.server()) }).unwrap();
    let mut idle = Vec::new();
    for n in 0..metrics::MAX_CONNECTIONS {
        let mut s = rt.block_on(tokio::net::TcpStream::connect(addr)).unwrap();
        if n % 2 == 0 {
            // Half of them start a request head and never finish it.
            rt.block_on(s.write_all(b"GET /metr")).unwrap();
        }
        idle.push(s);
    }
    let scrapes = 30;
    let mut served = 0;
    for _ in 0..scrapes {
        let r = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), scrape(addr, "/metrics", "*/*")).await
        });
        if r.is_ok_and(|text| text.starts_with("HTTP/1.1 200")) {
            served += 1;
        }
    }
    assert_eq!(served, scrapes, "every scrape is served");
    // Room was made once, by closing the oldest idle connection; each scrape then left its
    // slot free for the next.
    let mut byte = [0u8; 1];
    let first = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(5), idle[0].read(&mut byte)).await
    });
    assert!(matches!(first, Ok(Ok(0) | Err(_))), "the oldest idle connection was closed");
    let body = rt.block_on(scrape(addr, "/metrics", "*/*"));
    assert!(body.contains("pinctl_metrics_connections_dropped_total 1\n"), "{body}");
}

fn configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/prometheus")
}

#[test]
fn the_shipped_alerting_rules_pass_promtool_check_and_their_tests() {
    let dir = configs();
    let (ok, out) = promtool(&["check", "rules", "pinctl-rules.yml"], None, &dir);
    assert!(ok, "promtool check rules:\n{out}");
    assert!(out.contains("SUCCESS: 8 rules found"), "{out}");
    let (ok, out) = promtool(&["test", "rules", "pinctl-rules.test.yml"], None, &dir);
    assert!(ok, "promtool test rules:\n{out}");
}

#[test]
fn every_metric_the_rules_and_dashboard_use_is_exported() {
    let mut m = Metrics::new();
    m.record(&report());
    let text = m.encode();
    let rules = std::fs::read_to_string(configs().join("pinctl-rules.yml")).unwrap();
    let dashboard =
        std::fs::read_to_string(configs().join("../grafana/pinctl-drift.json")).unwrap();
    let _: serde_json::Value = serde_json::from_str(&dashboard).expect("the dashboard is JSON");
    for source in [&rules, &dashboard] {
        for name in source.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if name.starts_with("pinctl_") {
                assert!(
                    text.contains(&format!("\n{name}{{")) || text.contains(&format!("\n{name} ")),
                    "`{name}` is not exported"
                );
            }
        }
    }
}
