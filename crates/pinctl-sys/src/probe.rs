//! Which newer memory policies the running kernel accepts, found by trying them on pinctl's
//! own thread and restoring the policy it had: nothing else is touched.

use std::ffi::c_int;
use std::io;

use crate::kernel::Kernel;
use crate::mask::Mask;
use crate::mode::*;

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
    /// Whether `mode` (with its flags) is supported.
    pub fn supports(&self, mode: c_int) -> bool {
        let flags_ok = mode & MPOL_F_NUMA_BALANCING == 0 || self.numa_balancing;
        flags_ok
            && match mode & !MPOL_MODE_FLAGS {
                MPOL_PREFERRED_MANY => self.preferred_many,
                MPOL_WEIGHTED_INTERLEAVE => self.weighted_interleave,
                MPOL_LOCAL => self.local,
                m => (0..=MPOL_INTERLEAVE).contains(&m),
            }
    }
}

/// Tries each newer mode with the first allowed node on the calling thread, then restores
/// the thread's previous policy. EINVAL, ENOSYS and EOPNOTSUPP mean "not supported"; any other
/// error (EPERM from seccomp) is returned, as is a failure to restore.
pub fn probe_support<K: Kernel + ?Sized>(
    kernel: &K,
    node_bits: usize,
) -> io::Result<KernelSupport> {
    let mut saved = Mask::with_bits(node_bits);
    let saved_mode = kernel.get_mempolicy(&mut saved, 0)?;
    let mut allowed = Mask::with_bits(node_bits);
    kernel.get_mempolicy(&mut allowed, MPOL_F_MEMS_ALLOWED)?;
    let mut one = Mask::with_bits(node_bits);
    if let Some(first) = allowed.iter().next() {
        one.set(first);
    }
    let attempt = |mode: c_int, nodes: Option<&Mask>| -> io::Result<bool> {
        match kernel.set_mempolicy(mode, nodes) {
            Ok(()) => Ok(true),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    };
    let result = (|| {
        Ok(KernelSupport {
            preferred_many: attempt(MPOL_PREFERRED_MANY, Some(&one))?,
            weighted_interleave: attempt(MPOL_WEIGHTED_INTERLEAVE, Some(&one))?,
            numa_balancing: attempt(MPOL_BIND | MPOL_F_NUMA_BALANCING, Some(&one))?,
            local: attempt(MPOL_LOCAL, None)?,
        })
    })();
    let bare = saved_mode & !MPOL_MODE_FLAGS;
    let restore_nodes = match bare {
        MPOL_DEFAULT | MPOL_LOCAL => None,
        MPOL_PREFERRED if saved.is_empty() => None,
        _ => Some(&saved),
    };
    kernel.set_mempolicy(saved_mode, restore_nodes)?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Call, RecordingKernel};

    #[test]
    fn old_kernels_report_missing_modes_and_the_policy_is_restored() {
        let mut k = RecordingKernel::new(4, 2);
        k.max_mode = MPOL_PREFERRED_MANY;
        k.balancing_supported = false;
        let before = MemoryPolicyRequestLike::set(&k, MPOL_INTERLEAVE, "0-1");
        let s = probe_support(&k, 64).unwrap();
        assert!(s.preferred_many && !s.weighted_interleave && !s.numa_balancing && s.local);
        assert!(!s.supports(MPOL_WEIGHTED_INTERLEAVE) && s.supports(MPOL_BIND));
        assert_eq!(k.policy(), before);
        let last = k.calls().pop().unwrap();
        assert_eq!(
            last,
            Call::SetMempolicy {
                mode: MPOL_INTERLEAVE,
                nodes: Some("0-1".parse().unwrap()),
                maxnode: 65
            }
        );
    }

    #[test]
    fn seccomp_denial_is_an_error_not_unsupported() {
        let k = RecordingKernel::new(4, 2);
        k.fail_next("set_mempolicy", libc::EPERM);
        assert_eq!(probe_support(&k, 64).unwrap_err().raw_os_error(), Some(libc::EPERM));
        assert_eq!(k.policy().0, MPOL_DEFAULT);
    }

    #[test]
    fn this_kernel_can_be_probed_and_keeps_its_policy() {
        let k = crate::LinuxKernel;
        let bits = k.node_mask_bits().unwrap();
        let mut before = Mask::with_bits(bits);
        let mode = k.get_mempolicy(&mut before, 0).unwrap();
        let s = probe_support(&k, bits).unwrap();
        assert!(s.supports(MPOL_BIND));
        let mut after = Mask::with_bits(bits);
        assert_eq!(k.get_mempolicy(&mut after, 0).unwrap(), mode);
        assert!(after.same_ids(&before));
    }

    struct MemoryPolicyRequestLike;
    impl MemoryPolicyRequestLike {
        fn set(k: &RecordingKernel, mode: c_int, nodes: &str) -> (c_int, pinctl_topology::NodeSet) {
            let m = Mask::from_set(&nodes.parse::<pinctl_topology::NodeSet>().unwrap(), 64);
            k.set_mempolicy(mode, Some(&m)).unwrap();
            k.policy()
        }
    }
}
