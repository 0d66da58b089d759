//! Files discovery could not use and what it assumed instead (docs/topology.md, "When a file
//! is broken"). Kept apart from the host warnings because they are facts about the source,
//! not recomputable from the rest of the model: [`crate::Topology::refresh_warnings`] keeps
//! them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One file of the source that was missing where it is required, empty, unreadable or did not
/// parse, and what discovery assumed in its place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryWarning {
    /// The file, relative to the topology root (`sys/devices/system/cpu/cpu0/online`).
    pub file: String,
    /// What is wrong with it (`is empty`, `does not parse (...)`).
    pub problem: String,
    /// What discovery assumed instead (`CPU 0 is online`).
    pub assumed: String,
}

impl fmt::Display for DiscoveryWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` {}; assumed {}", self.file, self.problem, self.assumed)
    }
}
