//! Memory-policy modes and flags as types, and the one place that turns them into the `int` the
//! kernel takes (`include/uapi/linux/mempolicy.h`) and back. The `MPOL_*` numbers are defined
//! here because libc lacks the newer ones (MPOL_PREFERRED_MANY, MPOL_WEIGHTED_INTERLEAVE), and
//! they stay private to this crate so that no caller does bit arithmetic on modes.

use std::ffi::c_int;
use std::fmt;
use std::ops::BitOr;

use pinctl_topology::{MemoryPolicy, NodeSet};

pub(crate) const MPOL_DEFAULT: c_int = 0;
pub(crate) const MPOL_PREFERRED: c_int = 1;
pub(crate) const MPOL_BIND: c_int = 2;
pub(crate) const MPOL_INTERLEAVE: c_int = 3;
pub(crate) const MPOL_LOCAL: c_int = 4;
pub(crate) const MPOL_PREFERRED_MANY: c_int = 5;
pub(crate) const MPOL_WEIGHTED_INTERLEAVE: c_int = 6;

pub(crate) const MPOL_F_STATIC_NODES: c_int = 1 << 15;
pub(crate) const MPOL_F_RELATIVE_NODES: c_int = 1 << 14;
pub(crate) const MPOL_F_NUMA_BALANCING: c_int = 1 << 13;
/// Every mode flag the kernel reports back with the mode.
const MPOL_MODE_FLAGS: c_int = MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING;

/// `get_mempolicy` flag: return a node id (the next interleave node, or the node of `addr`).
pub(crate) const MPOL_F_NODE: c_int = 1 << 0;
/// `get_mempolicy` flag: look up the policy of the mapping at `addr`.
pub(crate) const MPOL_F_ADDR: c_int = 1 << 1;
/// `get_mempolicy` flag: return the nodes the cpuset allows.
pub(crate) const MPOL_F_MEMS_ALLOWED: c_int = 1 << 2;

/// `move_pages`/`mbind` flag: move pages used only by the target process (moving shared pages
/// too, MPOL_MF_MOVE_ALL, needs CAP_SYS_NICE and disturbs other processes).
pub(crate) const MPOL_MF_MOVE: c_int = 1 << 1;

/// A memory-policy mode (`set_mempolicy(2)`), in the kernel's order, which is also the order in
/// which the modes arrived (so `<` reads "older than").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyMode {
    /// MPOL_DEFAULT: fall back to the default policy (allocate on the faulting CPU's node).
    Default,
    /// MPOL_PREFERRED: one node first, others when it is full.
    Preferred,
    /// MPOL_BIND: only the given nodes.
    Bind,
    /// MPOL_INTERLEAVE: round-robin over the given nodes.
    Interleave,
    /// MPOL_LOCAL (Linux 3.8): the faulting CPU's node.
    Local,
    /// MPOL_PREFERRED_MANY (Linux 5.15): several preferred nodes.
    PreferredMany,
    /// MPOL_WEIGHTED_INTERLEAVE (Linux 6.9): round-robin weighted by
    /// `/sys/kernel/mm/mempolicy/weighted_interleave/node*`.
    WeightedInterleave,
}

impl PolicyMode {
    /// Every mode, in kernel order.
    pub const ALL: [PolicyMode; 7] = [
        PolicyMode::Default,
        PolicyMode::Preferred,
        PolicyMode::Bind,
        PolicyMode::Interleave,
        PolicyMode::Local,
        PolicyMode::PreferredMany,
        PolicyMode::WeightedInterleave,
    ];

    /// Whether the mode takes a node mask (default and local take none).
    pub fn takes_nodes(self) -> bool {
        !matches!(self, PolicyMode::Default | PolicyMode::Local)
    }

    fn number(self) -> c_int {
        match self {
            PolicyMode::Default => MPOL_DEFAULT,
            PolicyMode::Preferred => MPOL_PREFERRED,
            PolicyMode::Bind => MPOL_BIND,
            PolicyMode::Interleave => MPOL_INTERLEAVE,
            PolicyMode::Local => MPOL_LOCAL,
            PolicyMode::PreferredMany => MPOL_PREFERRED_MANY,
            PolicyMode::WeightedInterleave => MPOL_WEIGHTED_INTERLEAVE,
        }
    }
}

/// pinctl's name of the mode (`bind`, `preferred-many`, ...), the one its config and command
/// line use.
impl fmt::Display for PolicyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MemoryPolicy::from(*self).name())
    }
}

impl From<MemoryPolicy> for PolicyMode {
    fn from(p: MemoryPolicy) -> PolicyMode {
        match p {
            MemoryPolicy::Default => PolicyMode::Default,
            MemoryPolicy::Preferred => PolicyMode::Preferred,
            MemoryPolicy::Bind => PolicyMode::Bind,
            MemoryPolicy::Interleave => PolicyMode::Interleave,
            MemoryPolicy::Local => PolicyMode::Local,
            MemoryPolicy::PreferredMany => PolicyMode::PreferredMany,
            MemoryPolicy::WeightedInterleave => PolicyMode::WeightedInterleave,
        }
    }
}

impl From<PolicyMode> for MemoryPolicy {
    fn from(m: PolicyMode) -> MemoryPolicy {
        match m {
            PolicyMode::Default => MemoryPolicy::Default,
            PolicyMode::Preferred => MemoryPolicy::Preferred,
            PolicyMode::Bind => MemoryPolicy::Bind,
            PolicyMode::Interleave => MemoryPolicy::Interleave,
            PolicyMode::Local => MemoryPolicy::Local,
            PolicyMode::PreferredMany => MemoryPolicy::PreferredMany,
            PolicyMode::WeightedInterleave => MemoryPolicy::WeightedInterleave,
        }
    }
}

/// The optional mode flags of a policy. The bits are this type's own, not the kernel's: only
/// this crate's one encoding function knows those.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PolicyFlags(u8);

impl PolicyFlags {
    /// No flag.
    pub const NONE: PolicyFlags = PolicyFlags(0);
    /// MPOL_F_STATIC_NODES (Linux 2.6.26): node ids are physical and do not follow cpuset
    /// changes.
    pub const STATIC_NODES: PolicyFlags = PolicyFlags(1);
    /// MPOL_F_RELATIVE_NODES (Linux 2.6.26): node ids are relative to the cpuset's allowed
    /// nodes (numactl's `+`). The kernel refuses it together with [`Self::STATIC_NODES`].
    pub const RELATIVE_NODES: PolicyFlags = PolicyFlags(2);
    /// MPOL_F_NUMA_BALANCING (Linux 5.12): automatic NUMA balancing may migrate pages within
    /// a bind set. Older kernels, and other modes, refuse it with EINVAL.
    pub const NUMA_BALANCING: PolicyFlags = PolicyFlags(4);

    /// Each flag with the word the kernel's numa_maps uses for it, in the kernel's order.
    const NAMED: [(PolicyFlags, &'static str); 3] = [
        (PolicyFlags::STATIC_NODES, "static"),
        (PolicyFlags::RELATIVE_NODES, "relative"),
        (PolicyFlags::NUMA_BALANCING, "balancing"),
    ];

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: PolicyFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether no flag is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// These flags less those of `other`.
    pub fn without(self, other: PolicyFlags) -> PolicyFlags {
        PolicyFlags(self.0 & !other.0)
    }

    /// The set flags by the words numa_maps uses (`static`, `relative`, `balancing`).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        PolicyFlags::NAMED.into_iter().filter(move |(f, _)| self.contains(*f)).map(|(_, n)| n)
    }
}

impl BitOr for PolicyFlags {
    type Output = PolicyFlags;
    fn bitor(self, other: PolicyFlags) -> PolicyFlags {
        PolicyFlags(self.0 | other.0)
    }
}

/// `static|balancing`, the kernel's numa_maps spelling; empty for no flag.
impl fmt::Display for PolicyFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in self.names().enumerate() {
            if i > 0 {
                f.write_str("|")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

impl fmt::Debug for PolicyFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PolicyFlags({self})")
    }
}

/// A memory policy to set: a mode, its flags and its nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPolicyRequest {
    pub mode: PolicyMode,
    pub flags: PolicyFlags,
    /// `None` for modes that take no nodes (default, local) and for `preferred` meaning
    /// "local"; the kernel is then passed a NULL mask.
    pub nodes: Option<NodeSet>,
}

impl MemoryPolicyRequest {
    /// `mode` on `nodes`, without flags.
    pub fn new(mode: impl Into<PolicyMode>, nodes: Option<NodeSet>) -> MemoryPolicyRequest {
        MemoryPolicyRequest { mode: mode.into(), flags: PolicyFlags::NONE, nodes }
    }
}

/// A mode number `get_mempolicy` returned that this crate does not know (a newer kernel),
/// flags stripped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown memory policy mode `{0}`")]
pub struct UnknownMode(pub i32);

/// A policy's mode and flags as `get_mempolicy` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportedPolicy {
    pub mode: Result<PolicyMode, UnknownMode>,
    pub flags: PolicyFlags,
}

impl ReportedPolicy {
    /// A known mode with its flags.
    pub fn new(mode: PolicyMode, flags: PolicyFlags) -> ReportedPolicy {
        ReportedPolicy { mode: Ok(mode), flags }
    }

    /// The number the kernel returned, flags included: what numactl's `--show` prints for a
    /// policy it has no name for (`policy: [8194]`). Not for deciding anything.
    pub fn number(self) -> i32 {
        match self.mode {
            Ok(mode) => encode(mode, self.flags),
            Err(UnknownMode(n)) => n | encode_flags(self.flags),
        }
    }
}

/// `bind`, `bind=balancing`, `interleave=static`; `mode 7` for an unknown mode.
impl fmt::Display for ReportedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            Ok(mode) => write!(f, "{mode}")?,
            Err(UnknownMode(n)) => write!(f, "mode {n}")?,
        }
        if !self.flags.is_empty() {
            write!(f, "={}", self.flags)?;
        }
        Ok(())
    }
}

fn encode_flags(flags: PolicyFlags) -> c_int {
    let mut raw = 0;
    if flags.contains(PolicyFlags::STATIC_NODES) {
        raw |= MPOL_F_STATIC_NODES;
    }
    if flags.contains(PolicyFlags::RELATIVE_NODES) {
        raw |= MPOL_F_RELATIVE_NODES;
    }
    if flags.contains(PolicyFlags::NUMA_BALANCING) {
        raw |= MPOL_F_NUMA_BALANCING;
    }
    raw
}

/// The `mode` argument of `set_mempolicy`/`mbind`: the mode number with its flag bits. The
/// only place a typed policy becomes a number.
pub(crate) fn encode(mode: PolicyMode, flags: PolicyFlags) -> c_int {
    mode.number() | encode_flags(flags)
}

/// The inverse of [`encode`], for what `get_mempolicy` returns.
pub(crate) fn decode(raw: c_int) -> ReportedPolicy {
    let bare = raw & !MPOL_MODE_FLAGS;
    let mut flags = PolicyFlags::NONE;
    for (bit, flag) in [
        (MPOL_F_STATIC_NODES, PolicyFlags::STATIC_NODES),
        (MPOL_F_RELATIVE_NODES, PolicyFlags::RELATIVE_NODES),
        (MPOL_F_NUMA_BALANCING, PolicyFlags::NUMA_BALANCING),
    ] {
        if raw & bit != 0 {
            flags = flags | flag;
        }
    }
    let mode = PolicyMode::ALL.into_iter().find(|m| m.number() == bare).ok_or(UnknownMode(bare));
    ReportedPolicy { mode, flags }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_numbers_follow_the_kernel_enum() {
        for (i, m) in PolicyMode::ALL.into_iter().enumerate() {
            assert_eq!(encode(m, PolicyFlags::NONE), i as c_int, "{m}");
            assert_eq!(decode(i as c_int), ReportedPolicy::new(m, PolicyFlags::NONE));
            assert_eq!(PolicyMode::from(MemoryPolicy::from(m)), m);
        }
        // MemoryPolicy::ALL is in kernel order too, so the two enums line up index by index.
        for (p, m) in MemoryPolicy::ALL.into_iter().zip(PolicyMode::ALL) {
            assert_eq!(PolicyMode::from(p), m);
        }
    }

    #[test]
    fn flags_take_the_uapi_bits_and_come_back() {
        let bind_balancing = encode(PolicyMode::Bind, PolicyFlags::NUMA_BALANCING);
        assert_eq!(bind_balancing, 8194);
        assert_eq!(encode(PolicyMode::Interleave, PolicyFlags::STATIC_NODES), 3 | 1 << 15);
        assert_eq!(encode(PolicyMode::Preferred, PolicyFlags::RELATIVE_NODES), 1 | 1 << 14);
        let all = PolicyFlags::STATIC_NODES | PolicyFlags::RELATIVE_NODES;
        for flags in [PolicyFlags::NONE, PolicyFlags::NUMA_BALANCING, all] {
            for m in PolicyMode::ALL {
                assert_eq!(decode(encode(m, flags)), ReportedPolicy::new(m, flags));
            }
        }
        assert_eq!(decode(bind_balancing).number(), 8194);
    }

    #[test]
    fn unknown_modes_stay_representable() {
        let r = decode(7 | MPOL_F_STATIC_NODES);
        assert_eq!(r.mode, Err(UnknownMode(7)));
        assert_eq!(r.flags, PolicyFlags::STATIC_NODES);
        assert_eq!(r.number(), 7 | MPOL_F_STATIC_NODES);
        assert_eq!(r.to_string(), "mode 7=static");
        assert_eq!(UnknownMode(7).to_string(), "unknown memory policy mode `7`");
    }

    #[test]
    fn flag_sets_print_as_numa_maps_does() {
        let f = PolicyFlags::STATIC_NODES | PolicyFlags::NUMA_BALANCING;
        assert_eq!(f.to_string(), "static|balancing");
        assert!(
            f.contains(PolicyFlags::NUMA_BALANCING) && !f.contains(PolicyFlags::RELATIVE_NODES)
        );
        assert_eq!(f.without(PolicyFlags::NUMA_BALANCING), PolicyFlags::STATIC_NODES);
        assert!(PolicyFlags::NONE.is_empty() && PolicyFlags::NONE.to_string().is_empty());
        let bind = ReportedPolicy::new(PolicyMode::Bind, PolicyFlags::NUMA_BALANCING);
        assert_eq!(bind.to_string(), "bind=balancing");
        assert_eq!(PolicyMode::PreferredMany.to_string(), "preferred-many");
    }
}
