//! `pinctl probe`: measures memory latency and read bandwidth between every CPU node and
//! memory node of this machine (pinctl-probe), shows them beside SLIT and HMAT, and saves them
//! with the topology for `--topology` (docs/probe.md). This module parses the arguments,
//! draws the progress bar and renders; the measuring is pinctl-probe's.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use pinctl_probe::{
    Event, Labels, LinuxMeasurer, MonotonicClock, ProbeDocument, ProbeOptions, ProbePlan, Progress,
    Silent,
};
use pinctl_sysfs::LoadedTopology;

use super::render::performance;
use crate::error::{CmdResult, Error};

/// Arguments of `pinctl probe`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProbeArgs {
    /// Small buffers and short passes (a few seconds): checks that the probe works, in CI or a
    /// VM. Its figures are not for planning.
    #[arg(long)]
    quick: bool,
    /// The time the whole probe may take, in seconds (default: about 10 for 2 nodes and 90
    /// for 8; with --quick, a few).
    #[arg(long, value_name = "SECONDS", value_parser = parse_budget)]
    budget: Option<Duration>,
    /// Print the result as JSON (docs/probe.md).
    #[arg(long)]
    json: bool,
    /// Also save this machine's topology with the result: a snapshot (FILE.json) or a capture
    /// (FILE.tar.gz, FILE.tgz) that `--topology` reads on any machine, so plans made there use
    /// the measured costs.
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
}

/// A budget in seconds: a positive number, at most a day.
fn parse_budget(text: &str) -> Result<Duration, String> {
    let seconds: f64 =
        text.trim().parse().map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(seconds > 0.0 && seconds <= 86_400.0) {
        return Err(format!("`{text}`: a budget is more than 0 and at most 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// What `--save` writes.
enum Save {
    Snapshot(PathBuf),
    Capture(PathBuf),
}

fn parse_save(path: &Path) -> Result<Save, Error> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let save = if name.ends_with(".json") {
        Save::Snapshot(path.to_path_buf())
    } else if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        Save::Capture(path.to_path_buf())
    } else {
        return Err(Error::usage(format!(
            "`--save {}`: name a snapshot (.json) or a capture (.tar.gz, .tgz)",
            path.display()
        )));
    };
    // Checked before measuring: a probe can take minutes, its result must have somewhere to go.
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Error::usage(format!(
            "`--save {}`: folder `{}` does not exist",
            path.display(),
            dir.display()
        )));
    }
    Ok(save)
}

pub(crate) fn run(args: ProbeArgs) -> CmdResult {
    let save = args.save.as_deref().map(parse_save).transpose()?;
    let mut loaded = LoadedTopology::live().map_err(Error::failure)?;
    pinctl_launch::probe_memory_policies(&pinctl_sys::LinuxKernel, &mut loaded);
    let topology = &mut loaded.topology;
    let llc = pinctl_probe::last_level_cache(topology);
    let options = ProbeOptions { quick: args.quick, budget: args.budget };
    let plan = ProbePlan::new(topology, llc, &options).map_err(Error::failure)?;

    let stderr = io::stderr();
    let mut err = stderr.lock();
    writeln!(err, "{}", performance::plan_line(&plan)).context("writing to stderr")?;
    drop(err);
    let labels =
        Labels::now(format!("pinctl {}", env!("CARGO_PKG_VERSION")), topology.host.kernel.clone());
    // A fixed seed: every run chases the same order, so runs differ only by the machine.
    let mut measurer = LinuxMeasurer::new(0x5eed).map_err(Error::failure)?;
    let clock = MonotonicClock::new();
    let measured = if io::stderr().is_terminal() {
        let mut bar = ProgressBar::default();
        let result = pinctl_probe::run_probe(&plan, &mut measurer, &clock, &mut bar, labels);
        bar.clear();
        result
    } else {
        pinctl_probe::run_probe(&plan, &mut measurer, &clock, &mut Silent, labels)
    }
    .map_err(Error::failure)?;
    drop(measurer);

    let mut err = io::stderr().lock();
    if measured.elapsed_ms > measured.budget_ms {
        writeln!(
            err,
            "warning: the probe took {:.1} s, past its {:.1} s budget: one pass per pair \
             took longer than the budget left for it",
            measured.elapsed_ms as f64 / 1000.0,
            measured.budget_ms as f64 / 1000.0
        )
        .context("writing to stderr")?;
    }
    drop(err);
    topology.memory_performance.measured = Some(measured.clone());
    let saved = match &save {
        Some(Save::Snapshot(path)) => {
            let json = serde_json::to_vec_pretty(&*topology).context("writing JSON")?;
            pinctl_capture::write_atomically(path, &json)
                .with_context(|| format!("cannot write `{}`", path.display()))?;
            Some(path)
        }
        Some(Save::Capture(path)) => {
            pinctl_capture::capture_topology_with(Path::new("/"), path, Some(&measured))
                .map_err(Error::failure)?;
            Some(path)
        }
        None => None,
    };

    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let document = ProbeDocument::new(topology, &measured);
    if args.json {
        serde_json::to_writer_pretty(&mut out, &document).context("writing JSON")?;
        writeln!(out).context("writing to stdout")?;
    } else {
        performance::render_probe(&mut out, topology, &document).context("writing to stdout")?;
        if let Some(path) = saved {
            writeln!(
                out,
                "\nsaved with the topology in `{}`: plan with `--topology {}`",
                path.display(),
                path.display()
            )
            .context("writing to stdout")?;
        }
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// One line on the terminal, rewritten in place: pairs done, the last pair's latency, time
/// spent of the budget. Written by hand: a progress-bar crate would bring its terminal
/// handling into the binary every unit starts with, for one line.
#[derive(Debug, Default)]
struct ProgressBar {
    drawn: bool,
}

impl ProgressBar {
    fn draw(&mut self, text: &str) {
        let mut err = io::stderr().lock();
        // `\r` and clear-to-end-of-line: the previous state is replaced, not appended to.
        let _ = write!(err, "\r\x1b[K{text}");
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(&mut self) {
        if self.drawn {
            let mut err = io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }
}

impl Progress for ProgressBar {
    fn event(&mut self, event: &Event, elapsed: Duration, budget: Duration) {
        const WIDTH: usize = 24;
        let time = format!("{:.1} s of {:.1} s", elapsed.as_secs_f64(), budget.as_secs_f64());
        let text = match event {
            Event::Preparing { memory } => {
                format!("probe: placing the buffer on memory node {memory}  {time}")
            }
            Event::Measured { pair, done, total } => {
                let filled = WIDTH * done / (*total).max(1);
                format!(
                    "probe: [{}{}] {done}/{total} pairs  {} -> {}: {:.1} ns  {time}",
                    "#".repeat(filled),
                    ".".repeat(WIDTH - filled),
                    pair.cpu_node,
                    pair.memory_node,
                    pair.latency_ns
                )
            }
        };
        self.draw(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_positive_seconds() {
        assert_eq!(parse_budget("2.5"), Ok(Duration::from_millis(2500)));
        assert!(parse_budget("0").is_err());
        assert!(parse_budget("-1").is_err());
        assert!(parse_budget("NaN").is_err());
        assert!(parse_budget("soon").is_err());
        assert!(parse_budget("1e9").is_err());
    }
}
