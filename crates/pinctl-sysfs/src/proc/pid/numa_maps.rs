//! `/proc/PID/numa_maps`: per mapping, its memory policy and resident pages per node. The kernel
//! walks the process's page tables under its mmap lock to write it: slow and intrusive on large
//! processes, so periodic checks prefer a cgroup's counters ([`crate::cgroup::numa_stat`]).

use pinctl_topology::{MemoryPolicy, NodeId};

use super::Pid;
use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::ParseError;

/// One mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaMapsEntry {
    /// Start address of the mapping.
    pub address: u64,
    /// Memory policy as the kernel prints it: `default`, `bind:0-1`, `prefer:1`,
    /// `interleave:0-3`, `local`, `prefer (many):0-1`, `weighted interleave:0-1`, with flags
    /// after `=` (`bind=static:1`, `bind=static|balancing:1`). For a mapping without a
    /// policy of its own this is the task's policy.
    pub policy: String,
    /// Resident pages per node (`N<node>=<pages>`), ascending by node; empty when the mapping
    /// has no resident pages.
    pub pages: Vec<(NodeId, u64)>,
    /// `kernelpagesize_kB`, when present.
    pub page_size_kb: Option<u64>,
    /// `file=` path, when the mapping is a file.
    pub file: Option<String>,
}

impl NumaMapsEntry {
    /// Resident pages on all nodes.
    pub fn total_pages(&self) -> u64 {
        self.pages.iter().map(|&(_, p)| p).sum()
    }
}

/// Parses `numa_maps`: one mapping per line. A mapping without `N<node>=` fields
/// holds no resident pages (not an error).
pub fn parse(text: &str) -> Result<Vec<NumaMapsEntry>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(line).map_err(|e| ParseError { line: i + 1, ..e })?);
    }
    Ok(out)
}

/// Parses one line of `numa_maps` (the error's line number is 1).
pub fn parse_line(line: &str) -> Result<NumaMapsEntry, ParseError> {
    let line = line.trim();
    let (addr, rest) =
        line.split_once(' ').ok_or_else(|| ParseError::new(1, line, "`<address> <policy> ...`"))?;
    let address = u64::from_str_radix(addr, 16)
        .map_err(|_| ParseError::new(1, addr, "a hexadecimal address"))?;
    let (policy, attrs) = split_policy(rest);
    if policy.is_empty() {
        return Err(ParseError::new(1, line, "a memory policy after the address"));
    }
    let policy = policy.to_string();
    let tokens = attrs.split(' ').filter(|t| !t.is_empty());
    let mut entry =
        NumaMapsEntry { address, policy, pages: Vec::new(), page_size_kb: None, file: None };
    for t in tokens {
        let Some((key, value)) = t.split_once('=') else { continue };
        if let Some(node) = key.strip_prefix('N').and_then(|n| n.parse::<NodeId>().ok()) {
            let pages = value
                .parse()
                .map_err(|_| ParseError::new(1, t, "`N<node>=<pages>` with a decimal count"))?;
            entry.pages.push((node, pages));
        } else if key == "kernelpagesize_kB" {
            entry.page_size_kb = Some(
                value.parse().map_err(|_| ParseError::new(1, t, "a decimal page size in kB"))?,
            );
        } else if key == "file" {
            entry.file = Some(value.to_string());
        }
    }
    entry.pages.sort_unstable();
    Ok(entry)
}

/// Splits `<policy> <attributes...>` after the address. `mpol_to_str` writes the name (the
/// names are pinctl-topology's one table, [`MemoryPolicy::numa_maps_name`], and `unknown`),
/// then `=` and the flags (`static`, `relative`, `balancing`, joined by `|`), then `:` and the
/// node list, none of which holds a space. Two names contain a space, so the policy cannot be
/// taken as the first word; the longest name that fits wins (`prefer (many)`, not `prefer`).
/// A name pinctl does not know (a newer kernel's) is taken to be the first word.
fn split_policy(rest: &str) -> (&str, &str) {
    let rest = rest.trim_start_matches(' ');
    let name_len = MemoryPolicy::ALL
        .iter()
        .map(|p| p.numa_maps_name())
        .chain(["unknown"])
        .filter(|name| {
            rest.strip_prefix(*name)
                .is_some_and(|after| after.is_empty() || after.starts_with([' ', '=', ':']))
        })
        .map(str::len)
        .max()
        .unwrap_or(0);
    let end = rest[name_len..].find(' ').map_or(rest.len(), |i| name_len + i);
    (&rest[..end], &rest[end..])
}

/// The `numa_maps` of `pid` under the root of `files`, `None` when it is gone.
pub fn read(
    files: &mut dyn KernelFiles,
    pid: impl Into<Pid>,
) -> Result<Option<Vec<NumaMapsEntry>>, DiscoveryError> {
    parsed(files, &pid.into().file("numa_maps"), parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines() {
        let e = parse_line(
            "7f0e1c000000 bind:0-1 anon=512 dirty=512 active=0 N0=256 N1=256 kernelpagesize_kB=4",
        )
        .unwrap();
        assert_eq!(e.address, 0x7f0e1c000000);
        assert_eq!(e.policy, "bind:0-1");
        assert_eq!(e.pages, vec![(0, 256), (1, 256)]);
        assert_eq!(e.total_pages(), 512);
        assert_eq!(e.page_size_kb, Some(4));
        let e = parse_line("55d1 prefer (many):0-1 file=/bin/cat mapped=3 N1=3").unwrap();
        assert_eq!(e.policy, "prefer (many):0-1");
        assert_eq!(e.file.as_deref(), Some("/bin/cat"));
        let e = parse_line("7ffd default stack").unwrap();
        assert!(e.pages.is_empty());
        let e = parse_line("7ffd weighted interleave:0-3 heap anon=1 N2=1").unwrap();
        assert_eq!(e.policy, "weighted interleave:0-3");
        assert!(parse_line("zzzz default").is_err());
        assert!(parse_line("7ffd default N0=x").is_err());
        let err = parse("1000 default N0=1\n2000 default N0=q\n").unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn policies_with_spaces_flags_and_nodes() {
        // mpol_to_str's forms: name, `=flags`, `:nodes`; two names hold a space.
        for (text, policy) in [
            ("7ffd weighted interleave:0-3 anon=4 N0=1 N1=1 N2=1 N3=1", "weighted interleave:0-3"),
            ("7ffd weighted interleave=static:0-3 N0=1", "weighted interleave=static:0-3"),
            ("7ffd prefer (many)=relative:0,2", "prefer (many)=relative:0,2"),
            ("7ffd prefer (many):1-2 anon=10 N1=4", "prefer (many):1-2"),
            ("7ffd bind=static|balancing:1 anon=1 N1=1", "bind=static|balancing:1"),
            ("7ffd bind=balancing:1-2 heap", "bind=balancing:1-2"),
            ("7ffd prefer:2 file=/usr/lib/with=eq.so mapped=1 N2=1", "prefer:2"),
            ("7ffd interleave:0-3 stack", "interleave:0-3"),
            ("7ffd local huge anon=1", "local"),
            ("7ffd default", "default"),
            ("7ffd unknown anon=1", "unknown"),
            // A newer kernel's policy name: its first word, the attributes still read.
            ("7ffd tiered:0-1 N1=3", "tiered:0-1"),
        ] {
            let e = parse_line(text).unwrap();
            assert_eq!(e.policy, policy, "{text}");
        }
        let e = parse_line("7ffd weighted interleave:0-3 anon=4 N0=1 N1=1 N2=1 N3=1").unwrap();
        assert_eq!(e.pages, vec![(0, 1), (1, 1), (2, 1), (3, 1)]);
        let e = parse_line("7ffd prefer:2 file=/usr/lib/with=eq.so mapped=1 N2=1").unwrap();
        assert_eq!(e.file.as_deref(), Some("/usr/lib/with=eq.so"));
        assert_eq!(e.total_pages(), 1);
        // `interleaved` is not `interleave` followed by something.
        assert_eq!(parse_line("7ffd interleaved N0=1").unwrap().policy, "interleaved");
    }

    #[test]
    fn reads_the_live_process() {
        let mut fs = crate::FsRoot::new("/".as_ref());
        assert!(!read(&mut fs, Pid::Current).unwrap().unwrap().is_empty());
        assert_eq!(read(&mut fs, u32::MAX).unwrap(), None);
    }
}
