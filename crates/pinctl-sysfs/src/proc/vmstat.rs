//! `/proc/vmstat`: the kernel's memory counters (`name value` per line).

use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::{ParseError, counters};

/// The value of counter `name` in `vmstat`, `None` when this kernel does not keep it.
pub fn parse_counter(text: &str, name: &str) -> Result<Option<u64>, ParseError> {
    Ok(counters(text)?.into_iter().find(|(k, _)| *k == name).map(|(_, v)| v))
}

/// Counter `name` under the root of `files`; `None` when there is no such file or counter
/// (`numa_pages_migrated` needs `CONFIG_NUMA_BALANCING`).
pub fn read_counter(
    files: &mut dyn KernelFiles,
    name: &str,
) -> Result<Option<u64>, DiscoveryError> {
    Ok(parsed(files, "proc/vmstat", |t| parse_counter(t, name))?.flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_counter() {
        let text = "nr_free_pages 12\nnuma_pages_migrated 7\n\n";
        assert_eq!(parse_counter(text, "numa_pages_migrated").unwrap(), Some(7));
        assert_eq!(parse_counter(text, "pgfault").unwrap(), None);
        assert_eq!(parse_counter("a 1\nlonely\n", "a").unwrap_err().line, 2);
        let live = read_counter(&mut crate::FsRoot::new("/".as_ref()), "nr_free_pages");
        assert!(live.unwrap().is_some());
    }
}
