//! `sys/kernel/mm/transparent_hugepage/hpage_pmd_size`: the size of a transparent huge page.

use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::{ParseError, int};

/// The size in bytes; `None` for one that makes no sense (over 1 GiB, not a power of two).
pub fn parse(text: &str) -> Result<Option<u64>, ParseError> {
    let size = u64::try_from(int(text)?).ok();
    Ok(size.filter(|s| s.is_power_of_two() && *s <= 1 << 30))
}

/// The size under the root of `files`, `None` when the kernel has no transparent huge pages.
pub fn read_huge_page_size(files: &mut dyn KernelFiles) -> Result<Option<u64>, DiscoveryError> {
    let rel = "sys/kernel/mm/transparent_hugepage/hpage_pmd_size";
    Ok(parsed(files, rel, parse)?.flatten())
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::parse("2097152\n").unwrap(), Some(2 << 20));
        assert_eq!(super::parse("3000\n").unwrap(), None);
        assert_eq!(super::parse("-1\n").unwrap(), None);
        assert_eq!(super::parse(&(2u64 << 30).to_string()).unwrap(), None);
        assert!(super::parse("x").is_err());
    }
}
