//! `pinctl exec`.

use std::process::ExitCode;

use crate::exit::{CmdResult, Failed, Status};

/// Arguments of `pinctl exec`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {}

pub(crate) fn run(_args: ExecArgs) -> CmdResult {
    Err(Failed::new(Status::Failure, anyhow::anyhow!("`pinctl exec` is being built")))
}

#[allow(dead_code)]
fn _ok() -> ExitCode {
    ExitCode::SUCCESS
}
