//! Policies of address ranges of the calling process (`mbind`, `get_mempolicy` with
//! `MPOL_F_ADDR`). They act on this process's own memory only, never another's, so they sit
//! outside the [`Kernel`](crate::Kernel) trait; the VM suite's allocation probe uses them to
//! exercise the syscall layer on a real multi-node kernel.

use std::io;

use crate::mask::Mask;
use crate::mode::{MPOL_F_ADDR, MemoryPolicyRequest, ReportedPolicy, decode, encode};
use crate::raw;

/// `mbind(addr, len, mode | flags, nodes)` with no `MPOL_MF_*` flag: the policy of pages
/// faulted in `addr..addr + len` from now on (pages already there stay where they are).
/// `node_bits` sizes the mask (see [`Kernel::node_mask_bits`](crate::Kernel::node_mask_bits)).
/// The kernel checks the range: EINVAL when `addr` is not page-aligned, EFAULT when it is not
/// mapped. Changing a policy never changes memory contents, so this is safe for any range.
pub fn mbind(
    addr: usize,
    len: usize,
    policy: &MemoryPolicyRequest,
    node_bits: usize,
) -> io::Result<()> {
    let mask = policy.nodes.as_ref().map(|n| Mask::from_set(n, node_bits));
    raw::mbind(addr, len, encode(policy.mode, policy.flags), mask.as_ref(), 0)
}

/// `get_mempolicy(&mode, nodes, maxnode, addr, MPOL_F_ADDR)`: the policy that governs the page
/// at `addr` of this process (the mapping's own, or the thread's when it has none).
pub fn get_mempolicy_at(addr: usize, nodes: &mut Mask) -> io::Result<ReportedPolicy> {
    raw::get_mempolicy(Some(nodes), addr, MPOL_F_ADDR).map(decode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::{PolicyFlags, PolicyMode};
    use crate::{Kernel, LinuxKernel};

    #[test]
    fn a_range_takes_its_own_policy_and_reads_it_back() {
        let k = LinuxKernel;
        let bits = k.node_mask_bits().unwrap();
        let mut allowed = Mask::with_bits(bits);
        k.get_mems_allowed(&mut allowed).unwrap();
        let first = allowed.iter().next().unwrap() as u32;
        let buf = vec![0u8; 3 * 4096];
        let addr = (buf.as_ptr() as usize).next_multiple_of(4096);
        let req =
            MemoryPolicyRequest::new(PolicyMode::Bind, Some(std::iter::once(first).collect()));
        mbind(addr, 4096, &req, bits).unwrap();
        let mut nodes = Mask::with_bits(bits);
        let got = get_mempolicy_at(addr, &mut nodes).unwrap();
        assert_eq!(got, ReportedPolicy::new(PolicyMode::Bind, PolicyFlags::NONE));
        assert_eq!(nodes.to_set(), req.nodes.clone().unwrap());
        // The rest of the heap keeps the thread's policy; unaligned ranges are refused.
        let err = mbind(addr + 1, 4096, &req, bits).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        // Give the range back its default before the allocator reuses it.
        mbind(addr, 4096, &MemoryPolicyRequest::new(PolicyMode::Default, None), bits).unwrap();
        drop(buf);
    }
}
