//! Renderers more than one command prints with: a plan's text form (`plan`, `fleet`), a
//! topology's interrupts and memory performance (`topology`, `plan`, `probe`), and the padded
//! table they share; where the drift watcher's lines go (`watch`, `run`).

pub(crate) mod interrupts;
pub(crate) mod performance;
pub(crate) mod plan;

use std::io::{self, Write};

use pinctl_drift::watch_loop::{Said, Sink};

/// A table with a header row, columns padded to their widest cell.
pub(crate) fn table<const N: usize>(
    out: &mut impl Write,
    header: [&str; N],
    rows: &[[String; N]],
) -> io::Result<()> {
    for line in aligned(header, rows) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The lines of [`table`], the header's first, for a caller that writes more under a row.
pub(crate) fn aligned<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> Vec<String> {
    let mut width = header.map(str::len);
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Padding by hand: `{:<w$}` panics on a width above 65,535 (a long name or CPU list).
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (k, cell) in cells.iter().enumerate() {
            s.push_str(cell);
            if k + 1 < N {
                s.extend(std::iter::repeat_n(' ', width[k] - cell.chars().count() + 2));
            }
        }
        s.trim_end().to_string()
    };
    let rows = rows.iter().map(|row| line(row.iter().map(String::as_str).collect()));
    std::iter::once(line(header.to_vec())).chain(rows).collect()
}

/// Where the watch loop's lines go: `pinctl watch` writes them to stdout (one JSON object each
/// under `--json`); `pinctl run` writes them to stderr after `pinctl: watch: `, like the
/// supervisor's own lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogTo {
    Stdout { json: bool },
    Supervisor,
}

impl Sink for LogTo {
    fn say(&mut self, said: Said<'_>) {
        let line = pinctl_drift::text::line(&said, *self == LogTo::Stdout { json: true });
        // A closed output must not stop the watcher: metrics and alerts go on.
        match self {
            LogTo::Stdout { .. } => {
                let mut out = io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            // Under `pinctl run`, through the supervisor's relay: a stalled reader of its log
            // must not stall the watcher either.
            LogTo::Supervisor => {
                pinctl_supervise::relay::log_line(&format!("pinctl: watch: {line}"))
            }
        }
    }
}
