//! pinctl's service file: the TOML schema of `[host]`, `[defaults]` and `[service.NAME]`,
//! its validation into the typed [`Config`] the planner and launcher consume, and
//! diagnostics that point into the file (file, line, column, the offending text under a
//! caret), every problem at once.
//!
//! This crate only reads text. It must not look at the machine (sysfs, devices, paths in
//! `near`): checks that need a topology take one as an argument ([`check_against`]), and
//! whether a `near` path exists is decided by the command that runs the plan.
#![forbid(unsafe_code)]

mod check;
mod diagnostic;
mod interrupts;
pub mod model;
mod parse;
mod values;
mod watch;

use std::path::Path;

pub use check::check_against;
pub use diagnostic::{ConfigError, Diagnostic, Location, Severity, SourceFile, Span, render_all};
pub use interrupts::{InterruptsConfig, ServiceInterrupts};
pub use model::*;
pub use parse::{
    DEFAULT_MEMORY_POLICY, DEFAULT_RESTART_DELAY, DEFAULT_RESTART_MAX_DELAY, DEFAULT_START_LIMIT,
    DEFAULT_STOP_SIGNAL, DEFAULT_STOP_TIMEOUT, HOST_KEYS, LIMIT_KEYS, MAX_EXPANDED_BYTES,
    MAX_INSTANCES, MAX_SHARE_WEIGHT, MIN_RESTART_DELAY, SERVICE_KEYS, TOP_KEYS,
};
pub use values::{is_instance_name, is_interface_name, is_service_unit_name};
pub use watch::{DriftSettings, OnDrift, WatchConfig};

/// Largest service file read: 1 MiB, hundreds of times a real one (pinctl reads only regular
/// files, so `-c /dev/zero` or a FIFO is an error at once). This crate reads no file: the
/// launcher reads the file within this bound and hands its bytes to [`from_bytes`].
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// Validates the bytes of the service file at `path` (read by the caller): not UTF-8 is an
/// error naming the line. `path` is only used in messages.
pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Config, ConfigError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        let line = bytes[..offset].iter().filter(|&&b| b == b'\n').count() + 1;
        ConfigError::from_diagnostics(
            path,
            vec![Diagnostic::for_file(
                path,
                Severity::Error,
                format!("`{}` is not UTF-8 text (invalid byte on line {line})", path.display()),
            )],
        )
    })?;
    parse(path, text)
}

/// Validates service-file text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    parse::parse(path, text)
}
