//! `pinctl-alloc-probe`: allocates N MiB, writes to every page so the kernel must place each one
//! under the process's memory policy, then reports what the kernel says about that placement,
//! one `key=value` per line (stable keys, parsed by tests/vm's guest scripts):
//!
//! ```text
//! pid=812
//! mib=64
//! touched_pages=16384
//! get_mempolicy=bind:2
//! get_mempolicy_addr=bind:2
//! mapping=7f2a1c000000-7f2a20001000
//! policy=bind:2
//! node_pages=2:16384
//! resident_pages=16384
//! kernelpagesize_kB=4
//! cpus_allowed_list=4-5
//! mems_allowed_list=0-3
//! numa_maps=7f2a1c000000 bind:2 anon=16384 dirty=16384 N2=16384 kernelpagesize_kB=4
//! ready
//! ```
//!
//! `policy` and `node_pages` are the allocation's numa_maps line; `get_mempolicy` (the task's
//! policy) and `get_mempolicy_addr` (the allocation's) are what `get_mempolicy(2)` returns, in
//! pinctl's policy names (`bind:2`, `preferred:2`, `default:`).
//!
//! With `--hold` it then waits until a signal ends it, so a test can read `/proc/PID/numa_maps`
//! from outside. It sets no task policy or affinity of its own: it observes the ones it was
//! started under. `--mbind POLICY:NODES` gives the allocation its own policy before the first
//! touch, through pinctl-sys's `mbind`, so the syscall layer is exercised on a real multi-node
//! kernel too.
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use pinctl_alloc_probe::NodePages;
use pinctl_sys::{Kernel, LinuxKernel, Mask, MemoryPolicyRequest, UnknownMode};
use pinctl_sysfs::proc::pid::numa_maps::parse as parse_numa_maps;
use pinctl_sysfs::proc::pid::{maps, status};
use pinctl_topology::{MemoryPolicy, NodeSet};

/// Writing one byte per 4 KiB touches every page whatever the kernel's base page size is on
/// x86_64, and every 4 KiB piece of a transparent huge page.
const TOUCH_STRIDE: usize = 4096;

/// Room for every node id the kernel can have (MAX_NUMNODES is 1024 on distribution kernels);
/// get_mempolicy fails with EINVAL when the mask is smaller than the kernel's node id space.
const NODE_MASK_BITS: usize = 1024;

const USAGE: &str = "usage: pinctl-alloc-probe [--mib N] [--mbind POLICY:NODES] [--hold]\n\
  --mib N               allocate and touch N MiB (default 64; 0 reports without allocating)\n\
  --mbind POLICY:NODES  give the allocation this policy (bind:1, interleave:0-3) before touching\n\
  --hold                after the report, wait until killed by a signal\n";

#[derive(Debug)]
struct Options {
    mib: usize,
    mbind: Option<(MemoryPolicy, NodeSet)>,
    hold: bool,
}

fn parse_mbind(value: &str) -> anyhow::Result<(MemoryPolicy, NodeSet)> {
    let (policy, nodes) = value.split_once(':').unwrap_or((value, ""));
    let policy: MemoryPolicy =
        policy.parse().with_context(|| format!("`--mbind {value}`: unknown policy"))?;
    let nodes: NodeSet =
        nodes.parse().with_context(|| format!("`--mbind {value}`: bad node list"))?;
    Ok((policy, nodes))
}

fn parse_args(args: impl Iterator<Item = String>) -> anyhow::Result<Option<Options>> {
    let mut opts = Options { mib: 64, mbind: None, hold: false };
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mib" => {
                let value = args.next().context("`--mib` needs a number of MiB")?;
                opts.mib = value
                    .parse()
                    .with_context(|| format!("`--mib {value}`: not a whole number of MiB"))?;
            }
            "--mbind" => {
                let value = args.next().context("`--mbind` needs POLICY:NODES")?;
                opts.mbind = Some(parse_mbind(&value)?);
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

/// `get_mempolicy` as `name:nodes[=flag]` (`bind:2`, `interleave:0-3`, `default:`).
fn read_policy(addr: Option<usize>) -> anyhow::Result<String> {
    let mut nodes = Mask::with_bits(NODE_MASK_BITS);
    let policy = match addr {
        Some(a) => pinctl_sys::get_mempolicy_at(a, &mut nodes),
        None => LinuxKernel.get_mempolicy(&mut nodes),
    }
    .context("get_mempolicy failed")?;
    let name = match policy.mode {
        Ok(mode) => MemoryPolicy::from(mode).name().to_owned(),
        Err(UnknownMode(n)) => format!("mode{n}"),
    };
    let mut text = format!("{name}:{}", nodes.to_set::<pinctl_topology::NodeKind>());
    for word in policy.flags.names() {
        text.push('=');
        text.push_str(word);
    }
    Ok(text)
}

fn run(opts: &Options) -> anyhow::Result<()> {
    let bytes = opts.mib.checked_mul(1 << 20).context("`--mib` is too large")?;
    // `vec![0; n]` gets fresh zero pages from mmap without writing them, so the writes below
    // are the first touch of every page: that is when the policy decides the node. One page
    // more than asked lets the measured range start on a page boundary (malloc puts a header
    // first), which mbind needs and which makes it exactly `bytes / 4096` whole pages.
    let mut buf = vec![0u8; bytes + TOUCH_STRIDE];
    let skip = (TOUCH_STRIDE - buf.as_ptr() as usize % TOUCH_STRIDE) % TOUCH_STRIDE;
    let range = &mut buf[skip..skip + bytes];
    let start = range.as_ptr() as usize;
    if let Some((policy, nodes)) = &opts.mbind {
        let req = MemoryPolicyRequest::new(*policy, policy.takes_nodes().then(|| nodes.clone()));
        pinctl_sys::mbind(start, bytes, &req, NODE_MASK_BITS)
            .with_context(|| format!("mbind({}:{nodes}) of {bytes} bytes failed", policy.name()))?;
    }
    for i in (0..bytes).step_by(TOUCH_STRIDE) {
        range[i] = 1;
    }
    // Reading the pages back through black_box keeps the writes from being optimised away.
    let touched: usize =
        std::hint::black_box(&*range).iter().step_by(TOUCH_STRIDE).map(|&b| b as usize).sum();

    let status =
        status::parse(&read("/proc/self/status")?).context("reading `/proc/self/status`")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "pid={}", std::process::id())?;
    writeln!(out, "mib={}", opts.mib)?;
    writeln!(out, "touched_pages={touched}")?;
    writeln!(out, "get_mempolicy={}", read_policy(None)?)?;
    if bytes > 0 {
        writeln!(out, "get_mempolicy_addr={}", read_policy(Some(start))?)?;
        let addr = start as u64;
        let maps = maps::parse(&read("/proc/self/maps")?).context("reading `/proc/self/maps`")?;
        let area = maps::containing(&maps, addr)
            .with_context(|| format!("no mapping in `/proc/self/maps` contains {addr:#x}"))?;
        let numa_maps_text = read("/proc/self/numa_maps")?;
        let numa_maps =
            parse_numa_maps(&numa_maps_text).context("reading `/proc/self/numa_maps`")?;
        let entry = numa_maps
            .iter()
            .zip(numa_maps_text.lines().filter(|l| !l.trim().is_empty()))
            .find(|(e, _)| e.address == area.start);
        let Some((entry, line)) = entry else {
            bail!("`/proc/self/numa_maps` has no line for the mapping at {:#x}", area.start);
        };
        writeln!(out, "mapping={:x}-{:x}", area.start, area.end)?;
        writeln!(out, "policy={}", entry.policy)?;
        writeln!(out, "node_pages={}", NodePages(&entry.pages))?;
        writeln!(out, "resident_pages={}", entry.total_pages())?;
        if let Some(kb) = entry.page_size_kb {
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
    let no = |field: &str| format!("`/proc/self/status` has no `{field}`");
    let cpus = status.cpus.with_context(|| no("Cpus_allowed_list"))?;
    let nodes = status.nodes.with_context(|| no("Mems_allowed_list"))?;
    writeln!(out, "cpus_allowed_list={cpus}")?;
    writeln!(out, "mems_allowed_list={nodes}")?;
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
