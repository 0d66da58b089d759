//! Fuzz targets for every parser of outside input (issue 12): the service file, snapshot JSON,
//! CPU and node lists (kernel and numactl grammars), tar captures, numa_maps and
//! /proc/PID/status. Each is a proptest strategy mixing arbitrary text with structured but
//! hostile input (huge ids, backwards ranges, long values, lying tar headers), run in the
//! normal suite with a bounded number of cases. Every case must return (no panic), and the
//! parser's peak heap use, measured by a counting global allocator for this test binary,
//! must stay under a bound proportional to the input.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::path::Path;

use proptest::prelude::*;

/// Counts the heap bytes each thread holds and the most it held, so a measurement is not
/// disturbed by tests running on other threads.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every method forwards to the system allocator with the caller's own arguments and
// only updates thread-local counters (const-initialised, so touching them never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through `alloc`/`realloc`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `realloc`'s contract; `ptr` came from `System`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result and the most heap it held at once beyond what was live
/// before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    let peak = PEAK.with(Cell::get) - start;
    (out, peak.max(0) as usize)
}

const MIB: usize = 1 << 20;

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig { cases: n, failure_persistence: None, ..ProptestConfig::default() }
}

/// Ids as hostile input writes them: small, at the ceilings, just above, and huge.
fn id() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..300,
        Just(4095),
        Just(4096),
        Just(65535),
        Just(65536),
        Just(1 << 20),
        Just(u64::from(u32::MAX)),
        any::<u64>()
    ]
}

/// CPU or node lists: arbitrary text, or elements with hostile ids, backwards ranges,
/// strides and repetition.
fn list() -> impl Strategy<Value = String> {
    let elem = prop_oneof![
        id().prop_map(|a| a.to_string()),
        (id(), id()).prop_map(|(a, b)| format!("{a}-{b}")),
        (id(), id(), 0u64..70, 0u64..70).prop_map(|(a, b, u, g)| format!("{a}-{b}:{u}/{g}")),
        Just("all".to_string()),
        Just("!0".to_string()),
        Just("+1".to_string()),
        "\\PC{0,12}",
    ];
    prop_oneof![
        "\\PC{0,200}",
        proptest::collection::vec(elem, 0..12).prop_map(|v| v.join(",")),
        (0usize..2_000).prop_map(|n| "0-65535,".repeat(n)),
    ]
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn cpu_and_node_lists(text in list()) {
        let (_, peak) = peak_of(|| {
            let _ = pinctl_topology::CpuSet::parse_list(&text);
            let _ = pinctl_topology::NodeSet::parse_node_list(&text);
            let _ = pinctl_topology::CpuSet::parse_mask(&text);
            let _ = pinctl_sysfs::parse::id_list::<pinctl_topology::CpuKind>(&text);
            use pinctl_launch::spec::{CpuSpec, NodeSpec, SpecError};
            let cpus: pinctl_topology::CpuSet = "0-63".parse().unwrap();
            let nodes: pinctl_topology::NodeSet = "0-63".parse().unwrap();
            for spec in [CpuSpec::parse(&text), CpuSpec::parse_numactl(&text)].into_iter().flatten() {
                let _ = spec.resolve(&cpus, |_| -> Result<_, SpecError> {
                    Ok(pinctl_topology::CpuSet::new())
                });
            }
            for spec in [NodeSpec::parse(&text), NodeSpec::parse_numactl(&text)].into_iter().flatten() {
                let _ = spec.resolve(&nodes, |_| -> Result<_, SpecError> {
                    Ok(pinctl_topology::NodeSet::new())
                });
            }
        });
        // A set is at most an 8 KiB bitmap (MAX_CPU_ID); the rest is the split of the text.
        prop_assert!(peak <= 64 * 1024 + 8 * text.len(), "{peak} bytes for {} bytes", text.len());
    }

    #[test]
    fn service_files(text in prop_oneof![
        "\\PC{0,400}",
        (
            prop_oneof!["[a-z]{1,8}", "\\PC{1,8}", (1usize..70_000).prop_map(|n| "s".repeat(n))],
            prop_oneof!["\\PC{0,40}", (0usize..20_000).prop_map(|n| "x".repeat(n))],
            0u64..10_000,
            list(),
            list(),
        ).prop_map(|(name, arg, n, cpus, nodes)| format!(
            "\u{feff}[host]\nkeep-free = []\nreserve-cpus = {cpus:?}\n[service.{name:?}]\n\
             command = [\"/bin/x\", {arg:?}, \"{{instance}}\"]\ninstances = {n}\ncpus = 1\n\
             only-nodes = {nodes:?}\nnear = [\"nvme{{instance}}n1\"]\n"
        )),
    ]) {
        let (_, peak) = peak_of(|| pinctl_config::parse(Path::new("fuzz.toml"), &text));
        // Up to 8192 instances (MAX_INSTANCES) of at most about 2.5 KiB each with a 200-byte
        // name (MAX_SERVICE_NAME), sharing their long arguments (a copy per instance would be
        // 8192 times the argument), plus the document held by the TOML parser with its spans
        // and diagnostics (about 125 bytes per byte of input at worst, measured).
        prop_assert!(peak <= 32 * MIB + 160 * text.len(), "{peak} bytes for {} bytes", text.len());
    }

    #[test]
    fn numa_maps_and_status(text in prop_oneof![
        "\\PC{0,400}",
        proptest::collection::vec(
            (any::<u64>(), id(), id(), "\\PC{0,20}").prop_map(|(addr, n, p, junk)| format!(
                "{addr:x} bind:{n} anon={p} dirty={p} N{n}={p} N{p}={n} kernelpagesize_kB={n} {junk}"
            )),
            0..40,
        ).prop_map(|v| v.join("\n")),
        (list(), list()).prop_map(|(c, m)| format!(
            "Name:\tx\nCpus_allowed:\tff\nCpus_allowed_list:\t{c}\nMems_allowed_list:\t{m}\n"
        )),
    ]) {
        let (_, peak) = peak_of(|| {
            let _ = pinctl_sysfs::proc::pid::numa_maps::parse(&text);
            let _ = pinctl_sysfs::proc::pid::status::parse(&text);
        });
        prop_assert!(peak <= MIB + 64 * text.len(), "{peak} bytes for {} bytes", text.len());
    }

    /// `/proc/interrupts`: a header naming huge CPU ids or thousands of columns, rows with
    /// huge numbers or too few counts, odd names; the table never costs much more than the
    /// text (a count is 8 bytes for at least 2 of text).
    #[test]
    fn proc_interrupts(text in prop_oneof![
        "\\PC{0,400}",
        (id(), 0usize..300, proptest::collection::vec((id(), any::<u64>(), "\\PC{0,12}"), 0..40))
            .prop_map(|(hi, columns, rows)| {
                let mut t: String = (0..columns).map(|c| format!(" CPU{}", (c as u64).wrapping_mul(hi) % 70_000)).collect();
                t.push('\n');
                for (n, count, name) in rows {
                    t.push_str(&format!("{n}: {}  chip 1-edge  {name}\n", format!("{count} ").repeat(columns)));
                }
                t
            }),
    ]) {
        let (_, peak) = peak_of(|| {
            if let Ok(t) = pinctl_sysfs::proc::interrupts::parse(&text) {
                for l in &t.lines {
                    let _ = l.name();
                    let _ = t.fired(l);
                }
            }
        });
        prop_assert!(peak <= MIB + 64 * text.len(), "{peak} bytes for {} bytes", text.len());
    }
}

/// A snapshot-shaped document with hostile values where the model has ids and sets.
fn snapshot_json() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,300}",
        snapshot_doc(),
        snapshot_doc().prop_map(|d| format!("\u{feff}{d}")),
        (0usize..5000).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n))),
    ]
}

fn snapshot_doc() -> impl Strategy<Value = String> {
    let node =
        (id(), list(), any::<Option<u64>>(), any::<Option<u64>>()).prop_map(|(i, c, t, f)| {
            serde_json::json!({"id": i, "cpus": c, "memory_bytes": t, "memory_free_bytes": f,
                           "has_cpu": true, "has_memory": true})
        });
    let cpu = (id(), any::<bool>(), proptest::option::of(id())).prop_map(
        |(i, o, n)| serde_json::json!({"id": i, "online": o, "package": 0, "core": 0, "node": n}),
    );
    let device = ("\\PC{0,10}", proptest::option::of(id()), list()).prop_map(|(name, n, ns)| {
        serde_json::json!({"name": name, "kind": "nvme", "pci": null, "node": n, "nodes": ns,
                           "locality": "numa-node"})
    });
    (
        proptest::collection::vec(node, 0..6),
        proptest::collection::vec(proptest::collection::vec(0u32..40, 0..5), 0..5),
        proptest::collection::vec(cpu, 0..10),
        proptest::collection::vec(device, 0..4),
    )
        .prop_map(|(nodes, distances, cpus, devices)| {
            serde_json::json!({"nodes": nodes, "distances": distances, "cpus": cpus,
                "devices": devices, "host": {"kernel": null, "numa_balancing": null,
                "zone_reclaim_mode": null, "allowed_cpus": null, "allowed_nodes": null,
                "offline_nodes": ""}, "warnings": []})
            .to_string()
        })
}

/// A tar stream of hostile entries: odd paths, lying sizes, links, optionally gzipped,
/// truncated or followed by garbage.
fn tarball() -> impl Strategy<Value = Vec<u8>> {
    let entry = (
        prop_oneof![
            "[a-z/.]{1,40}",
            Just("cap/sys/devices/system/node/online".to_string()),
            Just("cap/sys/devices/system/cpu/online".to_string()),
            (1usize..3000).prop_map(|n| "d/".repeat(n) + "f"),
        ],
        prop_oneof![Just(0u64), 0u64..64, Just(1u64 << 40), any::<u64>()],
        "\\PC{0,40}",
        0u8..3,
    );
    (proptest::collection::vec(entry, 0..8), any::<bool>(), 0u8..3).prop_map(
        |(entries, gzip, tail)| {
            let mut raw = Vec::new();
            for (path, claimed, data, kind) in entries {
                let mut h = tar::Header::new_gnu();
                let _ = h.set_path(&path);
                h.set_mode(0o644);
                h.set_entry_type(match kind {
                    0 => tar::EntryType::Regular,
                    1 => tar::EntryType::Directory,
                    _ => tar::EntryType::Symlink,
                });
                if kind == 2 {
                    let _ = h.set_link_name("../../x");
                }
                h.set_size(if claimed == 0 { data.len() as u64 } else { claimed });
                h.set_cksum();
                raw.extend_from_slice(h.as_bytes());
                raw.extend_from_slice(data.as_bytes());
                raw.resize(raw.len().div_ceil(512) * 512, 0);
            }
            raw.extend_from_slice(&[0u8; 1024]);
            let mut bytes = if gzip {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(&raw).unwrap();
                e.finish().unwrap()
            } else {
                raw
            };
            match tail {
                1 => bytes.extend_from_slice(b"trailing garbage"),
                2 => bytes.truncate(bytes.len() / 2),
                _ => {}
            }
            bytes
        },
    )
}

proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn snapshots(text in snapshot_json()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        std::fs::write(&path, &text).unwrap();
        let src = pinctl_sysfs::TopologySource::Snapshot(path);
        let (_, peak) = peak_of(|| pinctl_capture::load_topology(&src).map(|_| ()));
        prop_assert!(peak <= 2 * MIB + 64 * text.len(), "{peak} bytes for {} bytes", text.len());
    }

    #[test]
    fn tar_captures(bytes in tarball()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.tar.gz");
        std::fs::write(&path, &bytes).unwrap();
        let (_, peak) = peak_of(|| pinctl_capture::read_tarball(&path).map(|_| ()));
        // Decoder windows and buffers, plus what the archive really holds: never what a
        // header claims.
        prop_assert!(peak <= 4 * MIB + 64 * bytes.len(), "{peak} bytes for {} bytes", bytes.len());
    }
}

/// The allocation bound is real: the measurement sees an allocation made inside it.
#[test]
fn the_counter_sees_allocations() {
    let (_, peak) = peak_of(|| std::hint::black_box(vec![0u8; 3 * MIB]));
    assert!(peak >= 3 * MIB, "{peak}");
}
