//! Memory of this process mapped apart from the allocator, for measuring (`pinctl probe`): a
//! region whose placement a range policy ([`mbind`](crate::mbind)) decides page by page as it
//! is first touched, that may be backed by transparent huge pages, and that is handed back to
//! the kernel whole when dropped. The allocator's memory could not serve: its first page is
//! already placed by whoever touched it, and it cannot ask for huge pages.

use std::ffi::c_void;
use std::io;

use crate::raw;

/// The size of a transparent huge page on x86-64 and most arm64 kernels; the region is
/// aligned to it so that every 2 MiB of it can be one huge page.
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// A private anonymous mapping of `u64` words, aligned to [`HUGE_PAGE_BYTES`]. No page is
/// allocated until written; dropping it unmaps it.
#[derive(Debug)]
pub struct MappedBuffer {
    /// What `mmap` returned and its length (the aligned words lie inside).
    mapping: *mut c_void,
    mapping_len: usize,
    /// The first word, aligned, and the number of words.
    words: *mut u64,
    len: usize,
}

// SAFETY: the buffer owns its mapping exclusively (no other handle to it exists); sending it
// to another thread moves that ownership, and shared references only read it through `&[u64]`.
unsafe impl Send for MappedBuffer {}
// SAFETY: `&MappedBuffer` gives only `&[u64]`, which any number of threads may read at once;
// writing needs `&mut MappedBuffer`.
unsafe impl Sync for MappedBuffer {}

impl MappedBuffer {
    /// Maps `bytes` rounded up to whole huge pages. ENOMEM when the address space (or
    /// `vm.overcommit_memory = 2`) refuses it; nothing is allocated yet either way.
    pub fn new(bytes: usize) -> io::Result<MappedBuffer> {
        let len_bytes = bytes.max(1).div_ceil(HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES;
        // One huge page more, so an aligned start always fits inside.
        let mapping_len = len_bytes
            .checked_add(HUGE_PAGE_BYTES)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        let mapping = raw::mmap_anonymous(mapping_len)?;
        let start = (mapping as usize).next_multiple_of(HUGE_PAGE_BYTES);
        let words = start as *mut u64;
        Ok(MappedBuffer { mapping, mapping_len, words, len: len_bytes / size_of::<u64>() })
    }

    /// The address of the first word (aligned to [`HUGE_PAGE_BYTES`]).
    pub fn addr(&self) -> usize {
        self.words as usize
    }

    /// Its length in bytes (a multiple of [`HUGE_PAGE_BYTES`]).
    pub fn len_bytes(&self) -> usize {
        self.len * size_of::<u64>()
    }

    /// The words, for reading.
    pub fn words(&self) -> &[u64] {
        // SAFETY: `words` points to `len` u64s inside the live mapping (aligned start plus
        // len_bytes fits in mapping_len by construction); anonymous memory reads as zeroes
        // until written, a valid u64; `&self` keeps writers away for the borrow's life.
        unsafe { std::slice::from_raw_parts(self.words, self.len) }
    }

    /// The words, for writing.
    pub fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `words`; `&mut self` makes this the only reference into the mapping.
        unsafe { std::slice::from_raw_parts_mut(self.words, self.len) }
    }

    /// `madvise(MADV_HUGEPAGE)`: ask for transparent huge pages where the kernel's mode is
    /// `madvise` (under `always` it does anyway, under `never` not at all). EINVAL on
    /// kernels built without THP. Call before touching the pages.
    pub fn advise_huge_pages(&self) -> io::Result<()> {
        raw::madvise(self.addr(), self.len_bytes(), libc::MADV_HUGEPAGE)
    }
}

impl Drop for MappedBuffer {
    fn drop(&mut self) {
        // Nothing borrows the words any more (borrows end before drop). A failure leaves the
        // mapping in place, which costs address space only.
        let _ = raw::munmap(self.mapping, self.mapping_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kernel, LinuxKernel, MemoryPolicyRequest, PageStatus, PolicyMode, mbind};

    #[test]
    fn a_bound_buffer_lands_on_its_node_and_reads_back_what_was_written() {
        let mut buffer = MappedBuffer::new(3 << 20).unwrap();
        assert_eq!(buffer.len_bytes(), 4 << 20, "rounded up to whole huge pages");
        assert_eq!(buffer.addr() % HUGE_PAGE_BYTES, 0);
        assert!(buffer.words().iter().all(|&w| w == 0), "fresh memory reads as zeroes");
        let k = LinuxKernel;
        let bits = k.node_mask_bits().unwrap();
        let mut allowed = crate::Mask::with_bits(bits);
        k.get_mems_allowed(&mut allowed).unwrap();
        let node = allowed.iter().next().unwrap() as u32;
        let bind =
            MemoryPolicyRequest::new(PolicyMode::Bind, Some(std::iter::once(node).collect()));
        mbind(buffer.addr(), buffer.len_bytes(), &bind, bits).unwrap();
        // Kernels without THP refuse the advice; the buffer works either way.
        let _ = buffer.advise_huge_pages();
        for (i, w) in buffer.words_mut().iter_mut().enumerate() {
            *w = i as u64;
        }
        assert_eq!(buffer.words()[12345], 12345);
        let pages: Vec<usize> = (0..4).map(|k| buffer.addr() + k * (1 << 20)).collect();
        let status = k.move_pages(std::process::id(), &pages, None).unwrap();
        assert!(status.iter().all(|s| *s == PageStatus::Node(node)), "{status:?}");
        let far = MappedBuffer::new(1);
        assert_eq!(far.unwrap().len_bytes(), HUGE_PAGE_BYTES);
    }
}
