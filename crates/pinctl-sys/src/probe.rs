//! Which newer memory policies the running kernel accepts, found by trying them on pinctl's
//! own thread and restoring the policy it had: nothing else is touched.

use std::io;

use crate::kernel::Kernel;
use crate::mask::Mask;
use crate::mode::{PolicyFlags, PolicyMode};

/// Support for the policies that arrived after the original four.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSupport {
    /// MPOL_PREFERRED_MANY (Linux 5.15).
    pub preferred_many: bool,
    /// MPOL_WEIGHTED_INTERLEAVE (Linux 6.9).
    pub weighted_interleave: bool,
    /// MPOL_F_NUMA_BALANCING with MPOL_BIND (Linux 5.12).
    pub numa_balancing: bool,
    /// MPOL_LOCAL (Linux 3.8).
    pub local: bool,
}

impl KernelSupport {
    /// Whether `mode` with `flags` is supported. Static and relative node numbering predate
    /// every kernel pinctl runs on.
    pub fn supports(&self, mode: PolicyMode, flags: PolicyFlags) -> bool {
        let flags_ok = !flags.contains(PolicyFlags::NUMA_BALANCING) || self.numa_balancing;
        flags_ok
            && match mode {
                PolicyMode::PreferredMany => self.preferred_many,
                PolicyMode::WeightedInterleave => self.weighted_interleave,
                PolicyMode::Local => self.local,
                PolicyMode::Default
                | PolicyMode::Preferred
                | PolicyMode::Bind
                | PolicyMode::Interleave => true,
            }
    }
}

/// Tries each newer mode with the first allowed node on the calling thread, then restores
/// the thread's previous policy. EINVAL, ENOSYS and EOPNOTSUPP mean "not supported"; any other
/// error (EPERM from seccomp) is returned, as is a failure to restore. A thread whose policy
/// has a mode this crate does not know is not probed (it could not be restored): that is an
/// error of kind `InvalidData`.
pub fn probe_support<K: Kernel + ?Sized>(
    kernel: &K,
    node_bits: usize,
) -> io::Result<KernelSupport> {
    let mut saved = Mask::with_bits(node_bits);
    let saved_policy = kernel.get_mempolicy(&mut saved)?;
    let saved_mode =
        saved_policy.mode.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut allowed = Mask::with_bits(node_bits);
    kernel.get_mems_allowed(&mut allowed)?;
    let mut one = Mask::with_bits(node_bits);
    if let Some(first) = allowed.iter().next() {
        one.set(first);
    }
    let attempt = |mode: PolicyMode, flags: PolicyFlags, nodes: Option<&Mask>| match kernel
        .set_mempolicy(mode, flags, nodes)
    {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    };
    let none = PolicyFlags::NONE;
    let result = (|| {
        Ok(KernelSupport {
            preferred_many: attempt(PolicyMode::PreferredMany, none, Some(&one))?,
            weighted_interleave: attempt(PolicyMode::WeightedInterleave, none, Some(&one))?,
            numa_balancing: attempt(PolicyMode::Bind, PolicyFlags::NUMA_BALANCING, Some(&one))?,
            local: attempt(PolicyMode::Local, none, None)?,
        })
    })();
    // Default and local take no mask, nor does preferred when it means "local".
    let restore_nodes = match saved_mode {
        PolicyMode::Default | PolicyMode::Local => None,
        PolicyMode::Preferred if saved.is_empty() => None,
        _ => Some(&saved),
    };
    kernel.set_mempolicy(saved_mode, saved_policy.flags, restore_nodes)?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Call, RecordingKernel};
    use crate::mode::ReportedPolicy;

    #[test]
    fn old_kernels_report_missing_modes_and_the_policy_is_restored() {
        let mut k = RecordingKernel::new(4, 2);
        k.max_mode = PolicyMode::PreferredMany;
        k.balancing_supported = false;
        let m = Mask::from_set(&"0-1".parse::<pinctl_topology::NodeSet>().unwrap(), 64);
        k.set_mempolicy(PolicyMode::Interleave, PolicyFlags::STATIC_NODES, Some(&m)).unwrap();
        let before = k.policy();
        let s = probe_support(&k, 64).unwrap();
        assert!(s.preferred_many && !s.weighted_interleave && !s.numa_balancing && s.local);
        assert!(!s.supports(PolicyMode::WeightedInterleave, PolicyFlags::NONE));
        assert!(s.supports(PolicyMode::Bind, PolicyFlags::NONE));
        assert!(!s.supports(PolicyMode::Bind, PolicyFlags::NUMA_BALANCING));
        assert_eq!(k.policy(), before);
        let one = Some("0".parse().unwrap());
        let set = |mode, flags, nodes| Call::SetMempolicy { mode, flags, nodes, maxnode: 65 };
        assert_eq!(
            k.calls()[1..],
            [
                Call::GetMempolicy { maxnode: 65 },
                Call::GetMemsAllowed { maxnode: 65 },
                set(PolicyMode::PreferredMany, PolicyFlags::NONE, one.clone()),
                set(PolicyMode::WeightedInterleave, PolicyFlags::NONE, one.clone()),
                set(PolicyMode::Bind, PolicyFlags::NUMA_BALANCING, one),
                Call::SetMempolicy {
                    mode: PolicyMode::Local,
                    flags: PolicyFlags::NONE,
                    nodes: None,
                    maxnode: 0
                },
                set(
                    PolicyMode::Interleave,
                    PolicyFlags::STATIC_NODES,
                    Some("0-1".parse().unwrap())
                ),
            ]
        );
    }

    #[test]
    fn seccomp_denial_is_an_error_not_unsupported() {
        let k = RecordingKernel::new(4, 2);
        k.fail_next("set_mempolicy", libc::EPERM);
        assert_eq!(probe_support(&k, 64).unwrap_err().raw_os_error(), Some(libc::EPERM));
        assert_eq!(k.policy().0, PolicyMode::Default);
    }

    #[test]
    fn this_kernel_can_be_probed_and_keeps_its_policy() {
        let k = crate::LinuxKernel;
        let bits = k.node_mask_bits().unwrap();
        let mut before = Mask::with_bits(bits);
        let policy: ReportedPolicy = k.get_mempolicy(&mut before).unwrap();
        let s = probe_support(&k, bits).unwrap();
        assert!(s.supports(PolicyMode::Bind, PolicyFlags::NONE));
        let mut after = Mask::with_bits(bits);
        assert_eq!(k.get_mempolicy(&mut after).unwrap(), policy);
        assert!(after.same_ids(&before));
    }
}
