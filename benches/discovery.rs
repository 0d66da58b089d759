//! Topology discovery time, side by side with the tools people use for the same question, in
//! one run: pinctl's discovery in-process on the live machine and on a captured fixture (G01,
//! unpacked once), then `numactl --hardware`, `lstopo-no-graphics --of xml` and
//! `pinctl topology --json` as processes. Prints medians and ratios; targets: live discovery
//! (devices included) under 2 ms and no slower than `numactl --hardware`.
//!
//! Run: `cargo bench --bench discovery` (baselines: `apt-get install numactl hwloc`).
//! `PINCTL_BENCH_FIXTURE=<fixture folder>` times another capture of ../shared (e.g.
//! `G03-hwloc-power7-8n-sparse`, 256 CPUs; set `TMPDIR=/dev/shm` where unpacking 16,000 small
//! files to disk is slow).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Median of `runs` calls of `f` after a few warm-up calls.
fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..runs.min(5) {
        f();
    }
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

/// Median wall time of running a program to completion, or why it cannot be run.
fn time_process(runs: usize, program: &str, args: &[&str]) -> Result<Duration, String> {
    let run = || {
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("{program}: {e}"))
            .and_then(
                |s| if s.success() { Ok(()) } else { Err(format!("{program} exited with {s}")) },
            )
    };
    run()?;
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        run()?;
        samples.push(start.elapsed());
    }
    Ok(median(samples))
}

fn ms(d: Duration) -> String {
    format!("{:8.3} ms", d.as_secs_f64() * 1e3)
}

const DEFAULT_FIXTURE: &str = "G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax";

fn fixture_tarball(id: &str) -> Option<PathBuf> {
    let raw = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/topologies")
        .join(id)
        .join("raw");
    std::fs::read_dir(raw)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains(".tar"))
}

fn main() {
    let root = Path::new("/");
    let live = pinctl_sysfs::read_topology(root).expect("live discovery");
    println!(
        "live machine: {} nodes, {} CPUs, {} devices",
        live.nodes.len(),
        live.cpus.len(),
        live.devices.len()
    );
    let live_in_process = time(2000, || {
        std::hint::black_box(pinctl_sysfs::read_topology(root).unwrap());
    });
    println!("pinctl discovery, live, in-process        {}", ms(live_in_process));
    // What planning adds (`pinctl topology`, `plan`, `run`; never `pinctl exec`): every
    // interrupt's files, each listed device's vectors, the NICs' queues, irqbalance.
    let mut with_irqs = live.clone();
    pinctl_sysfs::attach_interrupts(&mut pinctl_sysfs::FsRoot::new(root), &mut with_irqs)
        .expect("live interrupts");
    let live_interrupts = time(2000, || {
        let mut t = live.clone();
        pinctl_sysfs::attach_interrupts(&mut pinctl_sysfs::FsRoot::new(root), &mut t).unwrap();
        std::hint::black_box(t);
    });
    println!(
        "pinctl interrupts, live ({} IRQs), in-process {}",
        with_irqs.interrupts.irqs.len(),
        ms(live_interrupts)
    );
    let guest =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/qemu-irq-4node.tar.gz");
    let guest_tree = pinctl_capture::unpack_tarball(&guest).expect("unpacking the guest's capture");
    let guest_t = pinctl_sysfs::read_topology(guest_tree.root()).unwrap();
    let guest_interrupts = time(2000, || {
        let mut t = guest_t.clone();
        pinctl_sysfs::attach_interrupts(&mut pinctl_sysfs::FsRoot::new(guest_tree.root()), &mut t)
            .unwrap();
        std::hint::black_box(t);
    });
    println!("pinctl interrupts, 4-node guest capture unpacked (26 IRQs) {}", ms(guest_interrupts));

    let id = std::env::var("PINCTL_BENCH_FIXTURE").unwrap_or_else(|_| DEFAULT_FIXTURE.into());
    let short = id.split('-').next().unwrap_or(&id).to_string();
    match fixture_tarball(&id) {
        Some(tarball) => {
            let tree = pinctl_capture::unpack_tarball(&tarball).expect("unpacking the fixture");
            let t = pinctl_sysfs::read_topology(tree.root()).unwrap();
            println!(
                "fixture {short}: {} nodes, {} CPUs, {} devices",
                t.nodes.len(),
                t.cpus.len(),
                t.devices.len()
            );
            let fixture = time(2000, || {
                std::hint::black_box(pinctl_sysfs::read_topology(tree.root()).unwrap());
            });
            println!("pinctl discovery, {short} unpacked, in-process {}", ms(fixture));
            let in_memory = time(20, || {
                std::hint::black_box(pinctl_capture::read_tarball(&tarball).unwrap());
            });
            println!("pinctl {short} tarball (decompress + tar + discovery) {}", ms(in_memory));
        }
        None => println!("fixture {id} skipped: not found under ../shared/fixtures/topologies"),
    }

    let pinctl = env!("CARGO_BIN_EXE_pinctl");
    let pinctl_json = time_process(200, pinctl, &["topology", "--json"]);
    // scripts/bench passes the static build here, the one hosts install (docs/exec.md).
    // Only the first build of the list (the static one); exec's bench times the others.
    let alt = std::env::var("PINCTL_BENCH_ALT")
        .ok()
        .and_then(|a| a.split(':').next().map(str::to_string))
        .filter(|a| !a.is_empty());
    let alt_json = alt.as_deref().map(|p| time_process(200, p, &["topology", "--json"]));
    let numactl = time_process(200, "numactl", &["--hardware"]);
    let lstopo = time_process(30, "lstopo-no-graphics", &["--of", "xml"]);
    for (name, r) in [
        ("pinctl topology --json (process)         ", &pinctl_json),
        ("numactl --hardware (process)             ", &numactl),
        ("lstopo-no-graphics --of xml (process)    ", &lstopo),
    ] {
        match r {
            Ok(d) => println!("{name} {}", ms(*d)),
            Err(e) => println!("{name} skipped: {e} (apt-get install numactl hwloc)"),
        }
    }

    if let (Some(path), Some(r)) = (&alt, &alt_json) {
        match r {
            Ok(d) => println!("alt pinctl topology --json (process)     {} ({path})", ms(*d)),
            Err(e) => println!("alt pinctl ({path}) skipped: {e}"),
        }
    }

    println!();
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    if let Ok(n) = numactl {
        println!("live discovery / numactl --hardware:      {:6.3}x", ratio(live_in_process, n));
        if let Ok(p) = pinctl_json {
            println!("pinctl process / numactl process:         {:6.3}x", ratio(p, n));
        }
        if let Some(Ok(p)) = alt_json {
            println!("alt pinctl process / numactl process:     {:6.3}x", ratio(p, n));
        }
    }
    if let Ok(l) = lstopo {
        println!("live discovery / lstopo --of xml:         {:6.3}x", ratio(live_in_process, l));
        if let Ok(p) = pinctl_json {
            println!("pinctl process / lstopo process:          {:6.3}x", ratio(p, l));
        }
    }
    let target = Duration::from_millis(2);
    println!(
        "target: live discovery under 2 ms: {} ({})",
        if live_in_process < target { "met" } else { "MISSED" },
        ms(live_in_process).trim()
    );
}
