//! Memory-policy mode numbers and flags of `include/uapi/linux/mempolicy.h`, defined once here
//! because libc lacks the newer ones (MPOL_PREFERRED_MANY, MPOL_WEIGHTED_INTERLEAVE).

use std::ffi::c_int;

use pinctl_topology::MemoryPolicy;

/// Allocate on the node of the faulting CPU, following the default policy.
pub const MPOL_DEFAULT: c_int = 0;
/// One preferred node (or, with an empty mask, the local node).
pub const MPOL_PREFERRED: c_int = 1;
/// Only the given nodes.
pub const MPOL_BIND: c_int = 2;
/// Round-robin over the given nodes.
pub const MPOL_INTERLEAVE: c_int = 3;
/// The node of the faulting CPU (Linux 3.8).
pub const MPOL_LOCAL: c_int = 4;
/// Several preferred nodes (Linux 5.15).
pub const MPOL_PREFERRED_MANY: c_int = 5;
/// Round-robin weighted by `/sys/kernel/mm/mempolicy/weighted_interleave/node*` (Linux 6.9).
pub const MPOL_WEIGHTED_INTERLEAVE: c_int = 6;

/// Mode flag: node ids are physical and do not follow cpuset changes (Linux 2.6.26).
pub const MPOL_F_STATIC_NODES: c_int = 1 << 15;
/// Mode flag: node ids are relative to the cpuset's allowed nodes (Linux 2.6.26); what
/// numactl's `+` notation means for a policy.
pub const MPOL_F_RELATIVE_NODES: c_int = 1 << 14;
/// Mode flag: let automatic NUMA balancing migrate pages within a `bind` set (Linux 5.12 for
/// bind; other modes reject it with EINVAL).
pub const MPOL_F_NUMA_BALANCING: c_int = 1 << 13;
/// Every mode flag; `mode & !MPOL_MODE_FLAGS` is the bare mode.
pub const MPOL_MODE_FLAGS: c_int =
    MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING;

/// `get_mempolicy` flag: return a node id (next interleave node, or node of `addr`).
pub const MPOL_F_NODE: c_int = 1 << 0;
/// `get_mempolicy` flag: look up the policy of the mapping at `addr`.
pub const MPOL_F_ADDR: c_int = 1 << 1;
/// `get_mempolicy` flag: return the nodes the cpuset allows.
pub const MPOL_F_MEMS_ALLOWED: c_int = 1 << 2;

/// `mbind` flag: fail if existing pages do not follow the policy.
pub const MPOL_MF_STRICT: c_int = 1 << 0;
/// `mbind` flag: move pages used only by this process.
pub const MPOL_MF_MOVE: c_int = 1 << 1;
/// `mbind` flag: move every page of the range (CAP_SYS_NICE).
pub const MPOL_MF_MOVE_ALL: c_int = 1 << 2;

/// The kernel's mode number of a policy.
pub trait PolicyMode {
    /// `MPOL_*` for this policy, without flags.
    fn mode(self) -> c_int;
}

impl PolicyMode for MemoryPolicy {
    fn mode(self) -> c_int {
        match self {
            MemoryPolicy::Default => MPOL_DEFAULT,
            MemoryPolicy::Preferred => MPOL_PREFERRED,
            MemoryPolicy::Bind => MPOL_BIND,
            MemoryPolicy::Interleave => MPOL_INTERLEAVE,
            MemoryPolicy::Local => MPOL_LOCAL,
            MemoryPolicy::PreferredMany => MPOL_PREFERRED_MANY,
            MemoryPolicy::WeightedInterleave => MPOL_WEIGHTED_INTERLEAVE,
        }
    }
}

/// The policy of a mode number as `get_mempolicy` reports it (flags stripped); `None` for a
/// mode newer than pinctl.
pub fn mode_of(mode: c_int) -> Option<MemoryPolicy> {
    let bare = mode & !MPOL_MODE_FLAGS;
    MemoryPolicy::ALL.into_iter().find(|p| p.mode() == bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_numbers_follow_the_kernel_enum_order() {
        // MemoryPolicy::ALL is in kernel order, so index == mode number.
        for (i, p) in MemoryPolicy::ALL.into_iter().enumerate() {
            assert_eq!(p.mode(), i as c_int, "{p}");
            assert_eq!(mode_of(p.mode()), Some(p));
        }
        assert_eq!(mode_of(MPOL_BIND | MPOL_F_NUMA_BALANCING), Some(MemoryPolicy::Bind));
        assert_eq!(mode_of(7), None);
        assert_eq!(MPOL_BIND | MPOL_F_NUMA_BALANCING, 8194);
    }
}
