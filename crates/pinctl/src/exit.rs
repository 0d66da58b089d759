//! One error type for the binary and its mapping to exit codes (docs/exit-codes.md).

use std::io;
use std::process::ExitCode;

/// Exit statuses pinctl itself uses. A command that execs another program exits with that
/// program's status; these are the codes of pinctl's own failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Status {
    /// Bad input: an invalid config, topology source or placement; an infeasible plan.
    Failure = 1,
    /// Bad command line (clap also uses 2).
    Usage = 2,
}

/// A failure carrying the exit status it maps to.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
    /// Whether the message was already printed (e.g. rendered diagnostics).
    pub(crate) reported: bool,
}

impl Failed {
    pub(crate) fn new(status: Status, error: impl Into<anyhow::Error>) -> Self {
        Failed { code: status as u8, error: error.into(), reported: false }
    }

    pub(crate) fn with_code(code: u8, error: impl Into<anyhow::Error>) -> Self {
        Failed { code, error: error.into(), reported: false }
    }

    /// A failure whose explanation has already been written to stderr.
    pub(crate) fn reported(status: Status) -> Self {
        Failed { code: status as u8, error: anyhow::anyhow!("reported"), reported: true }
    }
}

impl From<anyhow::Error> for Failed {
    fn from(error: anyhow::Error) -> Self {
        Failed::new(Status::Failure, error)
    }
}

/// What every subcommand returns: `Ok(code)` is the exit status on success paths (0, or 1
/// for `check` finding problems it already printed).
pub(crate) type CmdResult = Result<ExitCode, Failed>;

/// Prints a failure the way users read it and turns it into the process exit status. A broken
/// pipe on stdout (`pinctl topology | head`) is not an error (ripgrep does the same).
pub(crate) fn report(result: CmdResult) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(f) if is_broken_pipe(&f.error) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.reported {
                eprintln!("error: {:#}", f.error);
            }
            ExitCode::from(f.code)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}
