//! Launch overhead, side by side in one run: `pinctl exec --nodes 0 -- true`, numactl doing
//! the same, plain `/bin/true`, and the plan-driven `pinctl exec -c FILE --service X -- true`.
//! Each command runs ROUNDS times, interleaved round-robin so drift hits all rows alike; the
//! report gives the median and 90th percentile wall time of a fork+exec+wait and the ratios.
//!
//! Run with `cargo bench --bench exec` (release build). Numbers are reported, never asserted.
//! `PINCTL_BENCH_ALT=/path/to/pinctl[:/another/pinctl...]` adds the two pinctl rows for each
//! other build of the binary (scripts/bench passes the static build, `cargo build-static`;
//! `PINCTL_BENCH_ALT_EXTRA` appends builds to compare, e.g. the static build of an earlier
//! commit) to the same interleaved run.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::which;

const ROUNDS: usize = 400;

struct Row {
    name: String,
    argv: Vec<String>,
    times: Vec<Duration>,
}

fn runs_ok(argv: &[String]) -> Result<(), String> {
    let out = Command::new(&argv[0]).args(&argv[1..]).output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

fn time_once(argv: &[String]) -> Duration {
    let start = Instant::now();
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    let t = start.elapsed();
    assert!(status.success(), "{argv:?} failed");
    t
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let pinctl = env!("CARGO_BIN_EXE_pinctl").to_string();
    let truebin = which("true").map_or("/bin/true".to_string(), |p| p.display().to_string());
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("pinctl.toml");
    std::fs::write(
        &config,
        "[host]\nkeep-free = []\n\n[service.bench]\ncommand = [\"/bin/true\"]\nmemory-policy = \"bind\"\n",
    )
    .expect("write config");

    let mut rows = vec![
        Row { name: "/bin/true".into(), argv: vec![truebin.clone()], times: vec![] },
        Row {
            name: "pinctl exec --nodes 0 -- true".into(),
            argv: vec![
                pinctl.clone(),
                "exec".into(),
                "--nodes".into(),
                "0".into(),
                "--".into(),
                truebin.clone(),
            ],
            times: vec![],
        },
    ];
    let mut notes = Vec::new();
    match which("numactl") {
        Some(numactl) => rows.push(Row {
            name: "numactl --cpunodebind=0 --membind=0 true".into(),
            argv: vec![
                numactl.display().to_string(),
                "--cpunodebind=0".into(),
                "--membind=0".into(),
                truebin.clone(),
            ],
            times: vec![],
        }),
        None => notes.push("numactl row left out: numactl is not installed".to_string()),
    }
    let planned = vec![
        pinctl.clone(),
        "exec".into(),
        "-c".into(),
        config.display().to_string(),
        "--service".into(),
        "bench".into(),
        "--".into(),
        truebin.clone(),
    ];
    // Several builds can be compared in one interleaved run (e.g. before and after a change:
    // PINCTL_BENCH_ALT=old/pinctl:new/pinctl); each gets its two rows.
    let alts = std::env::var("PINCTL_BENCH_ALT").unwrap_or_default();
    for (k, alt) in alts.split(':').filter(|a| !a.is_empty()).enumerate() {
        let label = format!("alt{}", k + 1);
        notes.push(format!("{label}: {alt}"));
        let swap = |argv: &[String]| -> Vec<String> {
            std::iter::once(alt.to_string()).chain(argv[1..].iter().cloned()).collect()
        };
        rows.push(Row {
            name: format!("{label}: pinctl exec --nodes 0 -- true"),
            argv: swap(&rows[1].argv),
            times: vec![],
        });
        if runs_ok(&planned).is_ok() {
            rows.push(Row {
                name: format!("{label}: pinctl exec -c FILE --service bench"),
                argv: swap(&planned),
                times: vec![],
            });
        }
    }
    match runs_ok(&planned) {
        Ok(()) => rows.push(Row {
            name: "pinctl exec -c FILE --service bench -- true".into(),
            argv: planned,
            times: vec![],
        }),
        Err(e) => notes.push(format!("plan-driven row left out: {e}")),
    }
    for row in &rows {
        if let Err(e) = runs_ok(&row.argv) {
            panic!("`{}` does not run here: {e}", row.name);
        }
    }

    for _ in 0..ROUNDS {
        for row in &mut rows {
            row.times.push(time_once(&row.argv));
        }
    }
    let median = |r: &Row| {
        let mut t = r.times.clone();
        t.sort();
        (percentile(&t, 0.5), percentile(&t, 0.9))
    };
    let base = median(&rows[0]).0;
    let numactl = rows.iter().find(|r| r.name.starts_with("numactl")).map(|r| median(r).0);
    println!("exec overhead, {ROUNDS} runs each, interleaved (fork + exec + wait, wall time)");
    println!(
        "{:<46} {:>10} {:>10} {:>9} {:>10}",
        "command", "median", "p90", "x true", "x numactl"
    );
    for row in &rows {
        let (m, p90) = median(row);
        let vs_numactl = numactl
            .map_or("-".to_string(), |n| format!("{:.2}", m.as_secs_f64() / n.as_secs_f64()));
        println!(
            "{:<46} {:>8.0}us {:>8.0}us {:>9.2} {:>10}",
            row.name,
            m.as_secs_f64() * 1e6,
            p90.as_secs_f64() * 1e6,
            m.as_secs_f64() / base.as_secs_f64(),
            vs_numactl
        );
    }
    for n in notes {
        println!("note: {n}");
    }
    println!("targets: pinctl exec <= 1.00x numactl; plan-driven <= 1.30x numactl");
}
