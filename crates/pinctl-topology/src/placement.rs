//! Where an instance runs: the one value the planner decides, the launcher applies, the
//! supervisor keeps (its state file carries it) and the drift watcher compares what runs with.

use serde::{Deserialize, Serialize};

use crate::{CpuSet, MemoryPolicy, NodeSet};

/// Where an instance runs: the nodes whose CPUs it runs on, those CPUs, and its memory policy
/// with the policy's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The nodes whose CPUs it runs on.
    pub nodes: NodeSet,
    pub cpus: CpuSet,
    pub memory_policy: MemoryPolicy,
    /// The policy's node mask; empty for `default` and `local`, which take none.
    pub memory_nodes: NodeSet,
}

impl Placement {
    /// The nodes its memory belongs on: the policy's nodes, or the CPUs' nodes for a policy
    /// without nodes (`default` and `local` allocate where the CPU that faults is).
    pub fn memory_home(&self) -> &NodeSet {
        if self.memory_nodes.is_empty() { &self.nodes } else { &self.memory_nodes }
    }

    /// Its memory policy as the kernel prints it in `/proc/PID/numa_maps`: `bind:0-1`,
    /// `prefer:2`, `local`.
    pub fn numa_maps_policy(&self) -> String {
        let name = self.memory_policy.numa_maps_name();
        if self.memory_policy.takes_nodes() {
            format!("{name}:{}", self.memory_nodes)
        } else {
            name.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(policy: MemoryPolicy, memory_nodes: &str) -> Placement {
        Placement {
            nodes: "0".parse().unwrap(),
            cpus: "0-3".parse().unwrap(),
            memory_policy: policy,
            memory_nodes: memory_nodes.parse().unwrap(),
        }
    }

    #[test]
    fn policies_as_numa_maps_prints_them_and_back() {
        assert_eq!(placement(MemoryPolicy::Bind, "0-1").numa_maps_policy(), "bind:0-1");
        assert_eq!(placement(MemoryPolicy::Preferred, "0-1").numa_maps_policy(), "prefer:0-1");
        assert_eq!(
            placement(MemoryPolicy::PreferredMany, "1").numa_maps_policy(),
            "prefer (many):1"
        );
        assert_eq!(placement(MemoryPolicy::Local, "").numa_maps_policy(), "local");
        for p in MemoryPolicy::ALL {
            assert_eq!(MemoryPolicy::from_numa_maps_name(p.numa_maps_name()), Some(p));
        }
        assert_eq!(MemoryPolicy::from_numa_maps_name("preferred"), None);
    }

    #[test]
    fn memory_belongs_on_the_policys_nodes_or_the_cpus_nodes() {
        assert_eq!(placement(MemoryPolicy::Bind, "1").memory_home().to_string(), "1");
        assert_eq!(placement(MemoryPolicy::Local, "").memory_home().to_string(), "0");
    }

    #[test]
    fn the_json_form_is_the_state_files() {
        let text = r#"{"nodes":"0","cpus":"0-3","memory_policy":"bind","memory_nodes":"0"}"#;
        let p: Placement = serde_json::from_str(text).unwrap();
        assert_eq!(p, placement(MemoryPolicy::Bind, "0"));
        assert_eq!(serde_json::to_string(&p).unwrap(), text);
    }
}
