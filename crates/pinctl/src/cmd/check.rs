//! `pinctl check`.

use std::process::ExitCode;

use crate::exit::{CmdResult, Failed, Status};

/// Arguments of `pinctl check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {}

pub(crate) fn run(_args: CheckArgs) -> CmdResult {
    Err(Failed::new(Status::Failure, anyhow::anyhow!("`pinctl check` is being built")))
}

#[allow(dead_code)]
fn _ok() -> ExitCode {
    ExitCode::SUCCESS
}
