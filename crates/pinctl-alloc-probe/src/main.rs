//! `pinctl-alloc-probe`: allocates N MiB, writes to every page so the kernel must place each one
//! under the process's memory policy, then reports what the kernel says about that placement,
//! one `key=value` per line (stable keys, parsed by tests/vm's guest scripts):
//!
//! ```text
//! pid=812
//! mib=64
//! touched_pages=16384
//! mapping=7f2a1c000000-7f2a20001000
//! policy=bind:2
//! node_pages=2:16385
//! resident_pages=16385
//! kernelpagesize_kB=4
//! cpus_allowed_list=4-5
//! mems_allowed_list=0-3
//! numa_maps=7f2a1c000000 bind:2 anon=16385 dirty=16385 N2=16385 kernelpagesize_kB=4
//! ready
//! ```
//!
//! With `--hold` it then waits until a signal ends it, so a test can read `/proc/PID/numa_maps`
//! from outside. It sets no policy or affinity of its own: it observes the one it was started
//! under.
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use pinctl_alloc_probe::{
    NodePages, mapping_containing, parse_maps, parse_numa_maps, status_field,
};

/// Writing one byte per 4 KiB touches every page whatever the kernel's base page size is on
/// x86_64, and every 4 KiB piece of a transparent huge page.
const TOUCH_STRIDE: usize = 4096;

const USAGE: &str = "usage: pinctl-alloc-probe [--mib N] [--hold]\n\
  --mib N   allocate and touch N MiB (default 64; 0 reports without allocating)\n\
  --hold    after the report, wait until killed by a signal\n";

#[derive(Debug)]
struct Options {
    mib: usize,
    hold: bool,
}

fn parse_args(args: impl Iterator<Item = String>) -> anyhow::Result<Option<Options>> {
    let mut opts = Options { mib: 64, hold: false };
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mib" => {
                let value = args.next().context("`--mib` needs a number of MiB")?;
                opts.mib = value
                    .parse()
                    .with_context(|| format!("`--mib {value}`: not a whole number of MiB"))?;
            }
            "--hold" => opts.hold = true,
            "-h" | "--help" => return Ok(None),
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    Ok(Some(opts))
}

fn read(path: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read `{path}`"))
}

fn run(opts: &Options) -> anyhow::Result<()> {
    let bytes = opts.mib.checked_mul(1 << 20).context("`--mib` is too large")?;
    // `vec![0; n]` gets fresh zero pages from mmap without writing them, so the writes below
    // are the first touch of every page: that is when the policy decides the node.
    let mut buf = vec![0u8; bytes];
    for i in (0..bytes).step_by(TOUCH_STRIDE) {
        buf[i] = 1;
    }
    // Reading the pages back through black_box keeps the writes from being optimised away.
    let touched: usize =
        std::hint::black_box(&buf).iter().step_by(TOUCH_STRIDE).map(|&b| b as usize).sum();

    let status = read("/proc/self/status")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "pid={}", std::process::id())?;
    writeln!(out, "mib={}", opts.mib)?;
    writeln!(out, "touched_pages={touched}")?;
    if bytes > 0 {
        let addr = buf.as_ptr() as u64;
        let maps = parse_maps(&read("/proc/self/maps")?).context("reading `/proc/self/maps`")?;
        let area = mapping_containing(&maps, addr)
            .with_context(|| format!("no mapping in `/proc/self/maps` contains {addr:#x}"))?;
        let numa_maps_text = read("/proc/self/numa_maps")?;
        let numa_maps =
            parse_numa_maps(&numa_maps_text).context("reading `/proc/self/numa_maps`")?;
        let entry = numa_maps
            .iter()
            .zip(numa_maps_text.lines().filter(|l| !l.trim().is_empty()))
            .find(|(e, _)| e.start == area.start);
        let Some((entry, line)) = entry else {
            bail!("`/proc/self/numa_maps` has no line for the mapping at {:#x}", area.start);
        };
        writeln!(out, "mapping={:x}-{:x}", area.start, area.end)?;
        writeln!(out, "policy={}", entry.policy)?;
        writeln!(out, "node_pages={}", NodePages(&entry.node_pages))?;
        writeln!(out, "resident_pages={}", entry.total_pages())?;
        if let Some(kb) = entry.counters.get("kernelpagesize_kB") {
            writeln!(out, "kernelpagesize_kB={kb}")?;
        }
        writeln!(out, "numa_maps={line}")?;
    } else {
        // No allocation to look at: the task policy still shows on the heap or stack line.
        let numa_maps = parse_numa_maps(&read("/proc/self/numa_maps")?)
            .context("reading `/proc/self/numa_maps`")?;
        let policy = numa_maps.first().map(|e| e.policy.as_str()).unwrap_or("unknown");
        writeln!(out, "policy={policy}")?;
    }
    for (key, field) in
        [("cpus_allowed_list", "Cpus_allowed_list"), ("mems_allowed_list", "Mems_allowed_list")]
    {
        let value = status_field(&status, field)
            .with_context(|| format!("`/proc/self/status` has no `{field}`"))?;
        writeln!(out, "{key}={value}")?;
    }
    writeln!(out, "ready")?;
    out.flush()?;
    drop(out);
    if opts.hold {
        // Keep the allocation alive for an outside reader; a signal's default action ends us.
        loop {
            std::thread::park();
        }
    }
    drop(buf);
    Ok(())
}

fn main() -> ExitCode {
    let opts = match parse_args(std::env::args().skip(1)) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            let _ = std::io::stdout().write_all(USAGE.as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "pinctl-alloc-probe: error: {e:#}");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "pinctl-alloc-probe: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
