//! Readers behind `pinctl-alloc-probe`, the VM test bed's allocator: they turn what the kernel
//! says about a process (`/proc/PID/maps`, `/proc/PID/numa_maps`, `/proc/PID/status`) into the
//! facts the scenarios assert on — which mapping holds an address, its memory policy, how many
//! pages sit on each node, and the allowed CPU and node lists.
//!
//! Parsers take `&str` so they are tested on literal kernel text; the binary reads the files.
//! This crate must not set policies or affinity itself: the point of the probe is to observe a
//! placement applied by someone else (numactl, `pinctl exec`), so everything it reports must
//! come from the kernel, never from its own arguments.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;

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
    #[error("line `{line}` of numa_maps has no address and policy")]
    NumaMapsLine { line: String },
    #[error("field `{field}` of numa_maps line `{line}` is not `key=number`")]
    NumaMapsField { field: String, line: String },
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

/// One line of `/proc/PID/numa_maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaMapsEntry {
    pub start: u64,
    /// The policy exactly as the kernel prints it: `default`, `bind:2`, `interleave:0-3`,
    /// `prefer:2`, `prefer (many):1-2`, `bind=static:1`, `local`. For a mapping without a
    /// policy of its own this is the task's policy.
    pub policy: String,
    /// `N<node>=<pages>` fields: resident pages per node, in base pages.
    pub node_pages: BTreeMap<u32, u64>,
    /// Other `key=number` fields (`anon`, `dirty`, `kernelpagesize_kB`, ...).
    pub counters: BTreeMap<String, u64>,
    /// Flag fields without a value, or with a non-numeric one (`heap`, `stack`, `file=...`).
    pub other: Vec<String>,
}

impl NumaMapsEntry {
    /// Resident pages on all nodes.
    pub fn total_pages(&self) -> u64 {
        self.node_pages.values().sum()
    }
}

/// Parses `/proc/PID/numa_maps`.
pub fn parse_numa_maps(text: &str) -> Result<Vec<NumaMapsEntry>, ProcParseError> {
    text.lines().filter(|l| !l.trim().is_empty()).map(parse_numa_maps_line).collect()
}

fn parse_numa_maps_line(line: &str) -> Result<NumaMapsEntry, ProcParseError> {
    let bad = || ProcParseError::NumaMapsLine { line: line.to_owned() };
    let (start, rest) = line.split_once(' ').ok_or_else(bad)?;
    let start = u64::from_str_radix(start, 16).map_err(|_| bad())?;
    // The kernel names MPOL_PREFERRED_MANY "prefer (many)": the only policy with a space.
    let (policy, fields) = match rest.strip_prefix("prefer (many)") {
        Some(after) => {
            let (tail, fields) = after.split_once(' ').unwrap_or((after, ""));
            (format!("prefer (many){tail}"), fields)
        }
        None => {
            let (policy, fields) = rest.split_once(' ').unwrap_or((rest, ""));
            (policy.to_owned(), fields)
        }
    };
    if policy.is_empty() {
        return Err(bad());
    }
    let mut entry = NumaMapsEntry {
        start,
        policy,
        node_pages: BTreeMap::new(),
        counters: BTreeMap::new(),
        other: Vec::new(),
    };
    for field in fields.split_whitespace() {
        let bad_field =
            || ProcParseError::NumaMapsField { field: field.to_owned(), line: line.to_owned() };
        let Some((key, value)) = field.split_once('=') else {
            entry.other.push(field.to_owned());
            continue;
        };
        let node = key.strip_prefix('N').and_then(|n| n.parse::<u32>().ok());
        match (node, value.parse::<u64>()) {
            (Some(node), Ok(pages)) => {
                entry.node_pages.insert(node, pages);
            }
            (Some(_), Err(_)) => return Err(bad_field()),
            (None, Ok(n)) => {
                entry.counters.insert(key.to_owned(), n);
            }
            (None, Err(_)) => entry.other.push(field.to_owned()),
        }
    }
    Ok(entry)
}

/// The value of `key` in `/proc/PID/status` (`Cpus_allowed_list`, `Mems_allowed_list`).
pub fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

/// Per-node page counts in the probe's report form: `0:12,2:16372` (nodes with pages only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePages<'a>(pub &'a BTreeMap<u32, u64>);

impl fmt::Display for NodePages<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (node, pages) in self.0.iter().filter(|(_, p)| **p > 0) {
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
    fn numa_maps_reads_policy_and_node_pages() {
        let text = "\
55d0c2a00000 default heap anon=3 dirty=3 N0=3 kernelpagesize_kB=4
7f2a1c000000 bind:2 anon=16385 dirty=16385 active=0 N2=16385 kernelpagesize_kB=4
7f2a20001000 interleave:0-3 file=/usr/lib/with=eq.so mapped=1 N0=1 N1=0 kernelpagesize_kB=4
7f2a30000000 prefer (many):1-2 anon=10 dirty=10 N1=4 N3=6 kernelpagesize_kB=4
7f2a40000000 bind=static:1 anon=1 N1=1 kernelpagesize_kB=4
7f2a50000000 prefer (many)=relative:0,2
";
        let e = parse_numa_maps(text).unwrap();
        assert_eq!(e[0].policy, "default");
        assert_eq!(e[0].other, ["heap"]);
        assert_eq!(e[1].start, 0x7f2a1c000000);
        assert_eq!(e[1].policy, "bind:2");
        assert_eq!(e[1].node_pages, BTreeMap::from([(2, 16385)]));
        assert_eq!(e[1].counters["anon"], 16385);
        assert_eq!(e[1].counters["kernelpagesize_kB"], 4);
        assert_eq!(e[2].policy, "interleave:0-3");
        assert_eq!(e[2].other, ["file=/usr/lib/with=eq.so"]);
        assert_eq!(NodePages(&e[2].node_pages).to_string(), "0:1");
        assert_eq!(e[3].policy, "prefer (many):1-2");
        assert_eq!(e[3].total_pages(), 10);
        assert_eq!(NodePages(&e[3].node_pages).to_string(), "1:4,3:6");
        assert_eq!(e[4].policy, "bind=static:1");
        assert_eq!(e[5].policy, "prefer (many)=relative:0,2");
        assert!(e[5].node_pages.is_empty());
    }

    #[test]
    fn numa_maps_rejects_a_bad_node_count() {
        let err = parse_numa_maps("7f00 default N1=x").unwrap_err();
        assert!(matches!(err, ProcParseError::NumaMapsField { field, .. } if field == "N1=x"));
        assert!(parse_numa_maps("zz default").is_err());
    }

    #[test]
    fn status_fields_are_trimmed() {
        let status = "Name:\tprobe\nCpus_allowed_list:\t4-5\nMems_allowed_list:\t0-3\n";
        assert_eq!(status_field(status, "Cpus_allowed_list"), Some("4-5"));
        assert_eq!(status_field(status, "Mems_allowed_list"), Some("0-3"));
        assert_eq!(status_field(status, "Cpus_allowed"), None);
    }
}
