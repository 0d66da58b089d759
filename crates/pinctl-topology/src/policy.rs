//! The memory policies Linux offers, by the names pinctl's config and command line use.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A memory policy mode (`set_mempolicy(2)`), without its node mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemoryPolicy {
    /// MPOL_DEFAULT: allocate on the node of the CPU that faults.
    Default,
    /// MPOL_BIND: only these nodes; allocation fails (OOM) when they are full.
    Bind,
    /// MPOL_PREFERRED: this node first, others when it is full.
    Preferred,
    /// MPOL_PREFERRED_MANY (Linux 5.15): these nodes first, others when they are full.
    PreferredMany,
    /// MPOL_INTERLEAVE: round-robin pages over these nodes.
    Interleave,
    /// MPOL_WEIGHTED_INTERLEAVE (Linux 6.9): round-robin by per-node weights.
    WeightedInterleave,
    /// MPOL_LOCAL: the node of the CPU that faults, never following the default policy.
    Local,
}

impl MemoryPolicy {
    /// Every policy, in the order of the kernel's mode numbers.
    pub const ALL: [MemoryPolicy; 7] = [
        MemoryPolicy::Default,
        MemoryPolicy::Preferred,
        MemoryPolicy::Bind,
        MemoryPolicy::Interleave,
        MemoryPolicy::Local,
        MemoryPolicy::PreferredMany,
        MemoryPolicy::WeightedInterleave,
    ];

    /// The name used in config files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            MemoryPolicy::Default => "default",
            MemoryPolicy::Bind => "bind",
            MemoryPolicy::Preferred => "preferred",
            MemoryPolicy::PreferredMany => "preferred-many",
            MemoryPolicy::Interleave => "interleave",
            MemoryPolicy::WeightedInterleave => "weighted-interleave",
            MemoryPolicy::Local => "local",
        }
    }

    /// The name the kernel prints for it in `/proc/PID/numa_maps` (mm/mempolicy.c's
    /// `mpol_to_str`): `bind`, `prefer`, `prefer (many)`, `weighted interleave`. The one table
    /// of those names: [`MemoryPolicy::from_numa_maps_name`] reads it back.
    pub fn numa_maps_name(self) -> &'static str {
        match self {
            MemoryPolicy::Default => "default",
            MemoryPolicy::Bind => "bind",
            MemoryPolicy::Preferred => "prefer",
            MemoryPolicy::PreferredMany => "prefer (many)",
            MemoryPolicy::Interleave => "interleave",
            MemoryPolicy::WeightedInterleave => "weighted interleave",
            MemoryPolicy::Local => "local",
        }
    }

    /// The policy whose numa_maps name is `name`.
    pub fn from_numa_maps_name(name: &str) -> Option<MemoryPolicy> {
        MemoryPolicy::ALL.into_iter().find(|p| p.numa_maps_name() == name)
    }

    /// Whether the policy takes a node mask (`default` and `local` take none).
    pub fn takes_nodes(self) -> bool {
        !matches!(self, MemoryPolicy::Default | MemoryPolicy::Local)
    }

    /// Whether the policy lets memory spill to other nodes when its nodes are full.
    pub fn may_spill(self) -> bool {
        !matches!(self, MemoryPolicy::Bind)
    }
}

/// A policy name that is not one of [`MemoryPolicy::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown memory policy `{0}`: expected one of default, bind, preferred, preferred-many, interleave, weighted-interleave, local"
)]
pub struct ParseMemoryPolicyError(pub String);

impl FromStr for MemoryPolicy {
    type Err = ParseMemoryPolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MemoryPolicy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| ParseMemoryPolicyError(s.to_string()))
    }
}

impl fmt::Display for MemoryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// In JSON a policy is its config name.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for MemoryPolicy {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MemoryPolicy".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = MemoryPolicy::ALL.iter().map(|p| p.name()).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

impl Serialize for MemoryPolicy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for MemoryPolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in MemoryPolicy::ALL {
            assert_eq!(p.name().parse::<MemoryPolicy>().unwrap(), p);
        }
        assert!("membind".parse::<MemoryPolicy>().is_err());
    }
}
