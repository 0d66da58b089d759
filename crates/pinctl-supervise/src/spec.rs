//! What an instance should be (its [`InstanceSpec`]), and the reload rule: given the specs of
//! the running instances and those of the new file, which instances stop, start, restart or
//! are left alone ([`diff`]). Pure: no I/O.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use pinctl_topology::Placement;
use serde::{Deserialize, Serialize};

use crate::lifecycle::Policy;

/// Resource limits (soft = hard), `None` = inherited. `u64::MAX` is infinity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsSpec {
    pub nofile: Option<u64>,
    pub nproc: Option<u64>,
    pub memlock: Option<u64>,
    pub core: Option<u64>,
    pub stack: Option<u64>,
}

/// Everything needed to start one instance, computed from the service file and the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceSpec {
    /// `tikv-0`, or the service name for a single-instance service.
    pub name: String,
    pub service: String,
    pub command: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub user: Option<String>,
    pub group: Option<String>,
    pub working_dir: Option<PathBuf>,
    pub limits: LimitsSpec,
    pub placement: Placement,
    /// A file for the instance's output; `None`: lines on pinctl's stdout, prefixed.
    pub output: Option<PathBuf>,
    /// `enforce = "cgroup"`: the instance's cgroup gets `cpuset.cpus`/`cpuset.mems`.
    pub enforce_cgroup: bool,
    /// Lifecycle rules; changing them changes how the instance is supervised, never the
    /// running process.
    pub policy: Policy,
}

/// The fields whose change restarts an instance (see [`diff`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Field {
    Command,
    Env,
    User,
    Group,
    WorkingDir,
    Limits,
    Placement,
    Output,
    Enforce,
}

impl Field {
    pub fn name(self) -> &'static str {
        match self {
            Field::Command => "command",
            Field::Env => "env",
            Field::User => "user",
            Field::Group => "group",
            Field::WorkingDir => "working-dir",
            Field::Limits => "limits",
            Field::Placement => "placement",
            Field::Output => "output",
            Field::Enforce => "enforce",
        }
    }
}

impl InstanceSpec {
    /// The fields that differ between `self` and `new` and need a restart to apply.
    pub fn changed(&self, new: &InstanceSpec) -> Vec<Field> {
        let mut out = Vec::new();
        let mut check = |differs: bool, f: Field| {
            if differs {
                out.push(f);
            }
        };
        check(self.command != new.command, Field::Command);
        check(self.env != new.env, Field::Env);
        check(self.user != new.user, Field::User);
        check(self.group != new.group, Field::Group);
        check(self.working_dir != new.working_dir, Field::WorkingDir);
        check(self.limits != new.limits, Field::Limits);
        check(self.placement != new.placement, Field::Placement);
        check(self.output != new.output, Field::Output);
        check(self.enforce_cgroup != new.enforce_cgroup, Field::Enforce);
        out
    }

    /// A digest of everything that needs a restart to change (FNV-1a over a canonical JSON
    /// form), recorded in the state file so a new supervisor sees what changed meanwhile.
    pub fn digest(&self) -> String {
        let canonical = serde_json::json!([
            self.command,
            self.env,
            self.user,
            self.group,
            self.working_dir,
            self.limits,
            self.placement,
            self.output,
            self.enforce_cgroup
        ]);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in canonical.to_string().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }
}

/// What a reload does to one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum Change {
    /// In the new file only.
    Start,
    /// In the running set only.
    Stop,
    /// In both, with these fields changed.
    Restart { fields: Vec<Field> },
    /// In both, nothing that needs a restart changed (lifecycle keys may have).
    Keep,
    /// The same instance under another name: a service going from one instance (`s`) to
    /// several (`s-0`, `s-1`, ...) or back, whose instance 0 is otherwise unchanged. It keeps
    /// running, renamed.
    Rename { from: String },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Start => f.write_str("start (new)"),
            Change::Stop => f.write_str("stop (removed)"),
            Change::Keep => f.write_str("keep"),
            Change::Rename { from } => write!(f, "keep (was `{from}`)"),
            Change::Restart { fields } => {
                let names: Vec<&str> = fields.iter().map(|f| f.name()).collect();
                write!(f, "restart ({} changed)", names.join(", "))
            }
        }
    }
}

/// The difference between the running specs and the new ones, one entry per instance name:
/// first every instance of the new file in its order, then the removed ones in theirs. A
/// service scaled from one instance to several (or back) renames its instance 0 (`s` to
/// `s-0`, or `s-0` to `s`): when nothing else of it changed that is a [`Change::Rename`], so
/// scaling leaves the instances that remain untouched.
pub fn diff(old: &[InstanceSpec], new: &[InstanceSpec]) -> Vec<(String, Change)> {
    let old_by_name: BTreeMap<&str, &InstanceSpec> =
        old.iter().map(|s| (s.name.as_str(), s)).collect();
    let new_names: std::collections::BTreeSet<&str> = new.iter().map(|s| s.name.as_str()).collect();
    let mut renamed = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for n in new {
        let change = match old_by_name.get(n.name.as_str()) {
            None => match renamed_from(n, &old_by_name, &new_names) {
                Some(from) => {
                    renamed.insert(from.clone());
                    Change::Rename { from }
                }
                None => Change::Start,
            },
            Some(o) => {
                let fields = o.changed(n);
                if fields.is_empty() { Change::Keep } else { Change::Restart { fields } }
            }
        };
        out.push((n.name.clone(), change));
    }
    for o in old {
        if !new_names.contains(o.name.as_str()) && !renamed.contains(&o.name) {
            out.push((o.name.clone(), Change::Stop));
        }
    }
    out
}

/// The old instance `new` is instance 0 of, renamed by scaling: `s` for `s-0`, `s-0` for `s`,
/// of the same service, gone from the new file, and the same in every other respect.
fn renamed_from(
    new: &InstanceSpec,
    old: &BTreeMap<&str, &InstanceSpec>,
    new_names: &std::collections::BTreeSet<&str>,
) -> Option<String> {
    let service = new.service.as_str();
    let first = format!("{service}-0");
    let other = if new.name == service {
        first.as_str()
    } else if new.name == first {
        service
    } else {
        return None;
    };
    let o = old.get(other).filter(|o| o.service == new.service && !new_names.contains(other))?;
    o.changed(new).is_empty().then(|| other.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::lifecycle::Restart;
    use pinctl_topology::MemoryPolicy;

    pub(crate) fn spec(name: &str) -> InstanceSpec {
        InstanceSpec {
            name: name.into(),
            service: name.split('-').next().unwrap().into(),
            command: vec!["/bin/sleep".into(), "1000".into()],
            env: BTreeMap::new(),
            user: None,
            group: None,
            working_dir: None,
            limits: LimitsSpec::default(),
            placement: Placement {
                nodes: "0".parse().unwrap(),
                cpus: "0-1".parse().unwrap(),
                memory_policy: MemoryPolicy::Bind,
                memory_nodes: "0".parse().unwrap(),
            },
            output: None,
            enforce_cgroup: false,
            policy: Policy::default(),
        }
    }

    #[test]
    fn reload_adds_removes_changes_and_keeps() {
        let old = vec![spec("a-0"), spec("a-1"), spec("b"), spec("c")];
        let mut changed = spec("a-1");
        changed.command.push("--verbose".into());
        changed.placement.cpus = "2-3".parse().unwrap();
        let mut lifecycle_only = spec("b");
        lifecycle_only.policy.restart = Restart::Always;
        lifecycle_only.policy.stop_timeout = std::time::Duration::from_secs(1);
        let new = vec![spec("a-0"), changed, lifecycle_only, spec("d")];
        assert_eq!(
            diff(&old, &new),
            vec![
                ("a-0".into(), Change::Keep),
                ("a-1".into(), Change::Restart { fields: vec![Field::Command, Field::Placement] }),
                ("b".into(), Change::Keep),
                ("d".into(), Change::Start),
                ("c".into(), Change::Stop),
            ]
        );
    }

    #[test]
    fn every_restart_field_is_seen() {
        let base = spec("x");
        let mut all = base.clone();
        all.command = vec!["/bin/true".into()];
        all.env.insert("A".into(), "1".into());
        all.user = Some("nobody".into());
        all.group = Some("nogroup".into());
        all.working_dir = Some("/tmp".into());
        all.limits.nofile = Some(1024);
        all.placement.memory_policy = MemoryPolicy::Preferred;
        all.output = Some("/tmp/x.log".into());
        all.enforce_cgroup = true;
        assert_eq!(base.changed(&all).len(), 9);
        assert_ne!(base.digest(), all.digest());
        let mut policy_only = base.clone();
        policy_only.policy.restart = Restart::Never;
        assert_eq!(base.digest(), policy_only.digest());
        assert_eq!(base.digest().len(), 16);
    }

    #[test]
    fn scaling_renames_instance_zero_and_leaves_the_rest() {
        let mut one = spec("s");
        one.service = "s".into();
        let mut zero = one.clone();
        zero.name = "s-0".into();
        let mut first = one.clone();
        first.name = "s-1".into();
        assert_eq!(
            diff(&[one.clone()], &[zero.clone(), first.clone()]),
            vec![
                ("s-0".into(), Change::Rename { from: "s".into() }),
                ("s-1".into(), Change::Start),
            ]
        );
        assert_eq!(
            diff(&[zero.clone(), first.clone()], &[one.clone()]),
            vec![("s".into(), Change::Rename { from: "s-0".into() }), ("s-1".into(), Change::Stop)]
        );
        // Anything else changed with it: the old one stops, the new one starts.
        let mut changed = zero.clone();
        changed.command.push("--other".into());
        assert_eq!(
            diff(&[one.clone()], &[changed]),
            vec![("s-0".into(), Change::Start), ("s".into(), Change::Stop)]
        );
        assert_eq!(Change::Rename { from: "s".into() }.to_string(), "keep (was `s`)");
    }

    #[test]
    fn identical_files_change_nothing() {
        let s = vec![spec("a-0"), spec("a-1")];
        assert!(diff(&s, &s).iter().all(|(_, c)| *c == Change::Keep));
        assert_eq!(
            Change::Restart { fields: vec![Field::Env, Field::User] }.to_string(),
            "restart (env, user changed)"
        );
    }
}
