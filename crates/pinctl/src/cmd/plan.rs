//! `pinctl plan`.

use std::process::ExitCode;

use crate::exit::{CmdResult, Failed, Status};

/// Arguments of `pinctl plan`.
#[derive(Debug, clap::Args)]
pub(crate) struct PlanArgs {}

pub(crate) fn run(_args: PlanArgs) -> CmdResult {
    Err(Failed::new(Status::Failure, anyhow::anyhow!("`pinctl plan` is being built")))
}

#[allow(dead_code)]
fn _ok() -> ExitCode {
    ExitCode::SUCCESS
}
