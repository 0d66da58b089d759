//! The binary's one error type: every way a command fails, the exit status it maps to
//! ([`ExitStatus`], docs/exit-codes.md) and how it is shown. Commands return it; only
//! [`report`] prints.

use std::io::{self, Write};
use std::process::ExitCode;

use pinctl_launch::{ExitStatus, LaunchError, chain};
use pinctl_topology::text::escaped_but_newlines;

/// Why a command failed.
#[derive(Debug)]
pub(crate) enum Error {
    /// A bad command line (exit 2).
    Usage(String),
    /// A launch, or the plan behind it, failed: its own status (1, 2, 126, 127, 215, 242).
    Launch(LaunchError),
    /// Anything else: bad input, an unreadable topology, an output that could not be written
    /// (exit 1). The chain of causes is printed after the message.
    Failure(anyhow::Error),
    /// Already explained on the terminal (numactl's usage text): only the status is left.
    Reported(ExitStatus),
}

impl Error {
    pub(crate) fn usage(message: impl std::fmt::Display) -> Error {
        Error::Usage(message.to_string())
    }

    pub(crate) fn failure(error: impl Into<anyhow::Error>) -> Error {
        Error::Failure(error.into())
    }

    /// The status the process exits with.
    pub(crate) fn status(&self) -> ExitStatus {
        match self {
            Error::Usage(_) => ExitStatus::Usage,
            Error::Launch(e) => e.exit_status(),
            Error::Failure(_) => ExitStatus::Failure,
            Error::Reported(s) => *s,
        }
    }

    /// What the user reads on stderr, without the trailing newline; `None` when it was
    /// already shown.
    pub(crate) fn message(&self) -> Option<String> {
        match self {
            // Control characters (escape sequences) from input never reach the terminal; the
            // values quoted inside messages are shortened and escaped where they are quoted.
            Error::Usage(m) => Some(format!("error: {}", escaped_but_newlines(m))),
            // Located diagnostics carry their own `error:` lines.
            Error::Launch(e @ (LaunchError::Config(_) | LaunchError::Rejected { .. })) => {
                Some(e.to_string())
            }
            Error::Launch(e) => Some(format!("error: {}", escaped_but_newlines(&chain(e)))),
            Error::Failure(e) => {
                Some(format!("error: {}", escaped_but_newlines(&format!("{e:#}"))))
            }
            Error::Reported(_) => None,
        }
    }

    /// A broken pipe on stdout (`pinctl topology | head`) is not a failure (ripgrep agrees).
    fn is_broken_pipe(&self) -> bool {
        let Error::Failure(e) = self else { return false };
        e.chain()
            .filter_map(|c| c.downcast_ref::<io::Error>())
            .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl From<LaunchError> for Error {
    fn from(e: LaunchError) -> Error {
        Error::Launch(e)
    }
}

impl From<pinctl_supervise::client::ClientError> for Error {
    fn from(e: pinctl_supervise::client::ClientError) -> Error {
        match e {
            pinctl_supervise::client::ClientError::Config(e) => Error::Launch(e),
            e => Error::failure(e),
        }
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Error {
        Error::Failure(e)
    }
}

/// What every subcommand returns: `Ok(code)` is the exit status on success paths (0, or 1
/// for `check` finding problems it already printed).
pub(crate) type CmdResult = Result<ExitCode, Error>;

/// Prints a failure the way users read it and turns it into the process exit status.
pub(crate) fn report(result: CmdResult) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(message) = e.message() {
                // Nothing useful is left to do when stderr itself is gone.
                let _ = writeln!(io::stderr().lock(), "{message}");
            }
            ExitCode::from(e.status().code())
        }
    }
}

/// Prints warnings of a launch the way errors are printed. A failed write is ignored: a
/// warning must not stop the service from starting.
pub(crate) fn warn_all(warnings: &[pinctl_launch::Warning]) {
    for w in warnings {
        warn(&w.to_string());
    }
}

/// Prints one warning as [`warn_all`] does.
pub(crate) fn warn(text: &str) {
    let _ = writeln!(io::stderr().lock(), "warning: {}", escaped_but_newlines(text));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/exit-codes.md is the user's copy of [`ExitStatus`]: every status appears in its
    /// table with the same name, and the table names no other.
    #[test]
    fn the_exit_status_table_matches_the_docs() {
        let doc = include_str!("../../../docs/exit-codes.md");
        let rows: Vec<(u8, &str)> = doc
            .lines()
            .filter_map(|l| {
                let mut cells = l.split('|').map(str::trim).skip(1);
                let code = cells.next()?.parse().ok()?;
                Some((code, cells.next()?))
            })
            .filter(|(code, _)| *code != 0)
            .collect();
        let ours: Vec<(u8, &str)> = ExitStatus::ALL.iter().map(|s| (s.code(), s.name())).collect();
        assert_eq!(rows, ours);
    }

    #[test]
    fn causes_are_chained_and_pipes_are_quiet() {
        let e = Error::failure(anyhow::anyhow!("inner").context("outer"));
        assert_eq!(e.message().unwrap(), "error: outer: inner");
        assert_eq!(e.status(), ExitStatus::Failure);
        let pipe = Error::failure(anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe)));
        assert!(pipe.is_broken_pipe());
        assert_eq!(Error::usage("x").status().code(), 2);
    }
}
