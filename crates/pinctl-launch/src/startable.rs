//! Whether a service's instances can start on this machine: the program they run exists and
//! is executable, their user and group exist. The supervisor asks before each start (and a
//! failure is the instance's exit status, 127, 126, 217 or 216); `pinctl check` asks for every
//! service of a file at once, so a file that cannot start fails before it is run.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use pinctl_config::{Diagnostic, Severity};
use pinctl_sys::User;

use crate::ExitStatus;
use crate::planned::ServiceFile;

/// Why an instance cannot start: the exit status it stands for and the reason.
pub type NotStartable = (ExitStatus, String);

/// The `PATH` a program without a `/` is looked up in when the instance's environment and
/// pinctl's have none (systemd's default).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The path `program` runs from: as given when it has a `/`, else the first executable in
/// `path_var` (or [`DEFAULT_PATH`]).
pub fn resolve_program(program: &str, path_var: Option<&str>) -> Result<PathBuf, NotStartable> {
    let executable = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        if !p.exists() {
            return Err((ExitStatus::NotFound, format!("`{program}` does not exist")));
        }
        if !executable(&p) {
            return Err((
                ExitStatus::NotExecutable,
                format!("`{program}` is not an executable file"),
            ));
        }
        return Ok(p);
    }
    for dir in path_var.unwrap_or(DEFAULT_PATH).split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(program);
        if executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err((ExitStatus::NotFound, format!("`{program}` not found in PATH")))
}

/// The account `name` (a user name or a numeric id).
pub fn lookup_user(name: &str) -> Result<User, NotStartable> {
    let found = match name.parse::<u32>() {
        Ok(id) => pinctl_sys::user_by_id(id),
        Err(_) => pinctl_sys::user_by_name(name),
    };
    match found {
        Ok(Some(u)) => Ok(u),
        Ok(None) => Err((ExitStatus::User, format!("unknown user `{name}`"))),
        Err(e) => Err((ExitStatus::User, format!("cannot look up user `{name}`: {e}"))),
    }
}

/// The group id of `name` (a group name or a numeric id).
pub fn lookup_group(name: &str) -> Result<u32, NotStartable> {
    if let Ok(id) = name.parse::<u32>() {
        return Ok(id);
    }
    match pinctl_sys::group_by_name(name) {
        Ok(Some(gid)) => Ok(gid),
        Ok(None) => Err((ExitStatus::Group, format!("unknown group `{name}`"))),
        Err(e) => Err((ExitStatus::Group, format!("cannot look up group `{name}`: {e}"))),
    }
}

impl ServiceFile {
    /// Errors for what would keep the file's instances from starting on this machine: a
    /// `command` or `alert-command` whose program is missing or not executable (looked up in
    /// the instance's `PATH`, else pinctl's), a `user` or `group` that does not exist. One per
    /// service and key (the first instance that fails), each at its value in the file. Empty
    /// on another host's topology, where none of it can be known.
    pub fn unstartable(&self) -> Vec<Diagnostic> {
        if !self.loaded.is_live {
            return Vec::new();
        }
        let config = &self.config;
        let own_path = std::env::var("PATH").ok();
        let mut out = Vec::new();
        for service in &config.services {
            let spans = config.service_spans(&service.name);
            let mut say = |span: Option<&pinctl_config::Span>, (status, why): NotStartable| {
                let span = span.or(spans.map(|s| &s.name));
                let message = format!(
                    "{}: {why}: it cannot start (exit status {})",
                    service.name,
                    status.code()
                );
                out.push(config.diagnostic_at(span, Severity::Error, message));
            };
            let command_failure = service.instances.iter().find_map(|i| {
                let path_var = i.env.get("PATH").cloned().or_else(|| own_path.clone());
                // Resolved as the supervisor resolves it, before the child changes folder.
                resolve_program(i.command.first()?, path_var.as_deref()).err()
            });
            if let Some(f) = command_failure {
                say(spans.and_then(|s| s.command.as_ref()), f);
            }
            if let Some(program) =
                config.watch.drift(&service.name).alert_command.and_then(|a| a.first().cloned())
            {
                if let Err((status, why)) = resolve_program(&program, own_path.as_deref()) {
                    say(None, (status, format!("`alert-command`: {why}")));
                }
            }
            if let Some(Err(f)) = service.user.as_deref().map(lookup_user) {
                say(spans.and_then(|s| s.user.as_ref()), f);
            }
            if let Some(Err(f)) = service.group.as_deref().map(lookup_group) {
                say(spans.and_then(|s| s.group.as_ref()), f);
            }
        }
        out
    }
}
