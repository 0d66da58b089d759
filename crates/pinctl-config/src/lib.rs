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
    DEFAULT_MEMORY_POLICY, DEFAULT_RESTART_DELAY, DEFAULT_RESTART_MAX_DELAY, DEFAULT_SOCKET,
    DEFAULT_START_LIMIT, DEFAULT_STOP_SIGNAL, DEFAULT_STOP_TIMEOUT, HOST_KEYS, LEGACY_STATE_FILE,
    LIMIT_KEYS, MAX_EXPANDED_BYTES, MAX_INSTANCES, MIN_RESTART_DELAY, RUNTIME_DIR, SERVICE_KEYS,
    TOP_KEYS,
};
pub use values::{is_instance_name, is_service_unit_name};
pub use watch::{DriftSettings, OnDrift, WatchConfig};

/// Largest service file read: 1 MiB, hundreds of times a real one (pinctl reads only regular
/// files, so `-c /dev/zero` or a FIFO is an error at once).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// Reads and validates the service file at `path`. An I/O error names the path.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = pinctl_sysfs::fsroot::read_regular(path, MAX_CONFIG_BYTES)
        .map_err(|e| ConfigError::io(path, e))?;
    let text = String::from_utf8(text).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() + 1;
        ConfigError::from_diagnostics(
            path,
            vec![Diagnostic::for_file(
                path,
                Severity::Error,
                format!("`{}` is not UTF-8 text (invalid byte on line {line})", path.display()),
            )],
        )
    })?;
    parse(path, &text)
}

/// Validates service-file text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    parse::parse(path, text)
}
