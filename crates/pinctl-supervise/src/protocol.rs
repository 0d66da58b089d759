//! The control socket's protocol (docs/supervisor.md): one JSON object per line each way, a
//! [`Request`] from the client, a [`Response`] from the supervisor, then the next request.

use pinctl_topology::Placement;
use serde::{Deserialize, Serialize};

use crate::spec::Change;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    /// Every instance, or those named.
    Status {
        #[serde(default)]
        names: Vec<String>,
    },
    /// Start the named instances (clears `failed`); answers once each is running or failed.
    Start { names: Vec<String> },
    /// Stop the named instances; answers once each has stopped.
    Stop { names: Vec<String> },
    /// Stop and start the named instances; answers once each is running or failed.
    Restart { names: Vec<String> },
    /// Re-read the service file and apply the difference (or only show it).
    Reload {
        #[serde(default)]
        dry_run: bool,
    },
    /// Exit, leaving every instance running for the next supervisor to adopt.
    Detach,
    /// Open every instance's `output` file again at its path (logrotate moved it); answers
    /// once each is reopened or could not be.
    ReopenLogs,
}

/// One instance as `pinctl status` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceStatus {
    pub name: String,
    pub service: String,
    /// systemd's state names: `active`, `activating`, `deactivating`, `auto-restart`,
    /// `failed`, `inactive`.
    pub state: String,
    pub pid: Option<i32>,
    /// Seconds since the running process started (under this supervisor or adopted).
    pub uptime_s: Option<f64>,
    /// Automatic restarts.
    pub restarts: u32,
    pub last_exit: Option<String>,
    /// Why it is `failed`.
    pub reason: Option<String>,
    /// Whether the process was adopted from an earlier supervisor.
    pub adopted: bool,
    /// Where it runs, as the supervisor placed it (a reload keeps instances where they run).
    /// Flattened, its four fields are the strings an older client reads (`nodes`, `cpus`,
    /// `memory_policy`, `memory_nodes`), and an older supervisor's answer reads as one.
    #[serde(flatten)]
    pub placement: Placement,
    /// Its own cgroup v2 path (`/pinctl/db/db-0`) while it runs in one: every process in it is
    /// the instance's (`pinctl watch` samples it there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// CPU time (user + system) of the running process so far, in seconds: every thread, and
    /// the children it has waited for. `None` when nothing runs or `/proc` cannot tell.
    #[serde(default)]
    pub cpu_s: Option<f64>,
    /// Resident memory of the running process (`VmRSS`), in bytes.
    #[serde(default)]
    pub rss_bytes: Option<u64>,
    /// What the drift watcher found at its last sample; `None` when nothing watches the
    /// instance (not sampled yet, or `pinctl run` started without a watcher).
    #[serde(default)]
    pub drift: Option<DriftState>,
}

/// An instance's drift as the watcher of `pinctl run` last sampled it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DriftState {
    /// Share of its memory on its planned nodes; `None` under `min-memory` or unsampled.
    pub local_fraction: Option<f64>,
    /// Why a sampled instance's locality is not judged (`3.2MiB resident, under min-memory
    /// 64.0MiB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locality_not_judged: Option<String>,
    /// Kinds with an episode going on (`locality`, `cpu`, `policy`, `node-pressure`); empty
    /// when the instance is where it was planned.
    pub drifting: Vec<String>,
    /// Threads allowed or running outside the planned CPUs.
    pub threads_out_of_place: usize,
    /// Why the last sample failed, when it did.
    #[serde(default)]
    pub error: Option<String>,
}

/// One line of a reload's difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeLine {
    pub name: String,
    #[serde(flatten)]
    pub change: Change,
}

/// The supervisor's answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<Vec<InstanceStatus>>,
    /// A reload's difference, `{"name", "change", "fields"}` each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<serde_json::Value>>,
    /// What the plan (and the file) warn about, as `pinctl plan` says it; a reload's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Changes a reload could not apply (they need a restart of `pinctl run`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applied: Vec<String>,
    /// Instances a `start`, `restart` or reload started that did not survive their start:
    /// each with why (their last exit, or that they failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_to_start: Vec<StartFailure>,
    /// Output files a `reopen-logs` opened again, or could not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reopened: Vec<ReopenedOutput>,
    /// Who answers a `status`: the supervisor's name, its service file and PID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<SupervisorStatus>,
}

/// A supervisor as `status` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SupervisorStatus {
    /// `[host] name`, else its service file's name.
    pub name: String,
    /// The service file it runs (`pinctl run -c FILE`), as given to it.
    #[serde(default)]
    pub file: Option<String>,
    pub pid: u32,
}

/// An instance's output file after a `reopen-logs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReopenedOutput {
    pub name: String,
    pub path: String,
    /// Why it could not be opened again (its writer keeps the file it had).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An instance that did not survive its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartFailure {
    pub name: String,
    pub reason: String,
}

impl Response {
    pub fn error(message: impl Into<String>) -> Response {
        Response { ok: false, error: Some(message.into()), ..Response::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_one_json_object_each() {
        let r: Request = serde_json::from_str(r#"{"cmd":"stop","names":["a-0","b"]}"#).unwrap();
        assert_eq!(r, Request::Stop { names: vec!["a-0".into(), "b".into()] });
        let r: Request = serde_json::from_str(r#"{"cmd":"status"}"#).unwrap();
        assert_eq!(r, Request::Status { names: vec![] });
        let r: Request = serde_json::from_str(r#"{"cmd":"reload","dry_run":true}"#).unwrap();
        assert_eq!(r, Request::Reload { dry_run: true });
        assert_eq!(serde_json::to_string(&Request::Detach).unwrap(), r#"{"cmd":"detach"}"#);
        let r: Request = serde_json::from_str(r#"{"cmd":"reopen-logs"}"#).unwrap();
        assert_eq!(r, Request::ReopenLogs);
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"explode"}"#).is_err());
    }

    #[test]
    fn a_status_carries_its_placement_in_the_four_fields_an_older_client_reads() {
        let older = r#"{"name":"db-0","service":"db","state":"active","pid":7,"uptime_s":1.5,
            "restarts":0,"last_exit":null,"reason":null,"adopted":false,"nodes":"0-1",
            "cpus":"0-7","memory_policy":"preferred","memory_nodes":"1"}"#;
        let status: InstanceStatus = serde_json::from_str(older).unwrap();
        let p = &status.placement;
        assert_eq!((p.nodes.to_string(), p.cpus.to_string()), ("0-1".into(), "0-7".into()));
        assert_eq!(p.memory_policy, pinctl_topology::MemoryPolicy::Preferred);
        assert_eq!(p.memory_nodes.to_string(), "1");
        let sent = serde_json::to_value(&status).unwrap();
        for (key, value) in [
            ("nodes", "0-1"),
            ("cpus", "0-7"),
            ("memory_policy", "preferred"),
            ("memory_nodes", "1"),
        ] {
            assert_eq!(sent[key], value, "{key}");
        }
        // A placement that does not parse is refused with the answer, not dropped later.
        let bad = older.replace(r#""cpus":"0-7""#, r#""cpus":"7-0""#);
        assert!(serde_json::from_str::<InstanceStatus>(&bad).is_err());
    }

    #[test]
    fn errors_carry_their_message_only() {
        let text = serde_json::to_string(&Response::error("no instance `x`")).unwrap();
        assert_eq!(text, r#"{"ok":false,"error":"no instance `x`"}"#);
    }
}
