//! Readers behind `pinctl-alloc-probe`, the VM test bed's allocator: they turn what the kernel
//! says about a process (`/proc/PID/maps`, `/proc/PID/status`) into the facts the scenarios
//! assert on — which mapping holds an address and the allowed CPU and node lists — and print
//! per-node page counts. `/proc/PID/numa_maps` is read with pinctl-sysfs's parser, the one
//! pinctl itself uses, so the probe cannot disagree with it about a policy's spelling.
//!
//! Parsers take `&str` so they are tested on literal kernel text; the binary reads the files.
//! This crate must not set policies or affinity itself: the point of the probe is to observe a
//! placement applied by someone else (numactl, `pinctl exec`), so everything it reports must
//! come from the kernel, never from its own arguments.
#![forbid(unsafe_code)]

use std::fmt;

use pinctl_topology::NodeId;

/// One line of `/proc/PID/maps`: a virtual memory area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsEntry {
    pub start: u64,
    pub end: u64,
    /// The pathname column (`[heap]`, `/usr/lib/...`), empty for anonymous memory.
    pub path: String,
}

/// Why a line of a `/proc` file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcParseError {
    #[error("line `{line}` of maps has no `start-end` address range")]
    MapsRange { line: String },
}

/// Parses `/proc/PID/maps`.
pub fn parse_maps(text: &str) -> Result<Vec<MapsEntry>, ProcParseError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let bad = || ProcParseError::MapsRange { line: line.to_owned() };
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next().and_then(|r| r.split_once('-')).ok_or_else(bad)?;
            let start = u64::from_str_radix(start, 16).map_err(|_| bad())?;
            let end = u64::from_str_radix(end, 16).map_err(|_| bad())?;
            // perms, offset, dev, inode, then the optional path (which may contain spaces).
            let path = fields.skip(4).collect::<Vec<_>>().join(" ");
            Ok(MapsEntry { start, end, path })
        })
        .collect()
}

/// The mapping that contains `addr`, if any.
pub fn mapping_containing(maps: &[MapsEntry], addr: u64) -> Option<&MapsEntry> {
    maps.iter().find(|m| m.start <= addr && addr < m.end)
}

/// The value of `key` in `/proc/PID/status` (`Cpus_allowed_list`, `Mems_allowed_list`).
pub fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

/// Per-node page counts (as numa_maps' `N<node>=<pages>`, ascending by node) in the probe's
/// report form: `0:12,2:16372` (nodes with pages only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePages<'a>(pub &'a [(NodeId, u64)]);

impl fmt::Display for NodePages<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (node, pages) in self.0.iter().filter(|(_, p)| *p > 0) {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{node}:{pages}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c2a00000-55d0c2a21000 rw-p 00000000 00:00 0                          [heap]
7f2a1c000000-7f2a20001000 rw-p 00000000 00:00 0 
7f2a20001000-7f2a20002000 r--p 00000000 08:01 1234                       /usr/lib/with space.so
";

    #[test]
    fn maps_finds_the_area_of_an_address() {
        let maps = parse_maps(MAPS).unwrap();
        assert_eq!(maps.len(), 3);
        assert_eq!(maps[2].path, "/usr/lib/with space.so");
        let m = mapping_containing(&maps, 0x7f2a1c000010).unwrap();
        assert_eq!((m.start, m.end, m.path.as_str()), (0x7f2a1c000000, 0x7f2a20001000, ""));
        assert!(mapping_containing(&maps, 0x7f2a20001000).unwrap().path.ends_with(".so"));
        assert!(mapping_containing(&maps, 0x1000).is_none());
    }

    #[test]
    fn maps_rejects_a_line_without_range() {
        assert!(matches!(parse_maps("garbage"), Err(ProcParseError::MapsRange { .. })));
    }

    #[test]
    fn node_pages_list_nodes_with_pages() {
        assert_eq!(NodePages(&[(0, 1), (1, 0), (3, 6)]).to_string(), "0:1,3:6");
        assert_eq!(NodePages(&[(1, 4), (3, 6)]).to_string(), "1:4,3:6");
        assert_eq!(NodePages(&[(2, 0)]).to_string(), "");
    }

    #[test]
    fn status_fields_are_trimmed() {
        let status = "Name:\tprobe\nCpus_allowed_list:\t4-5\nMems_allowed_list:\t0-3\n";
        assert_eq!(status_field(status, "Cpus_allowed_list"), Some("4-5"));
        assert_eq!(status_field(status, "Mems_allowed_list"), Some("0-3"));
        assert_eq!(status_field(status, "Cpus_allowed"), None);
    }
}
