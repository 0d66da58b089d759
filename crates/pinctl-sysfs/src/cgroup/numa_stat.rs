//! `memory.numa_stat` (bytes per node per counter, from counters the kernel keeps anyway:
//! cheap to read often) and the `hugetlb.<size>.numa_stat` files in the same format.

use pinctl_topology::NodeId;

use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::ParseError;

/// One line: a counter and its bytes per node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaStatLine {
    /// `anon`, `file`, `kernel_stack`, ...
    pub counter: String,
    /// Bytes per node, ascending by node.
    pub bytes: Vec<(NodeId, u64)>,
}

/// Parses a `numa_stat` (`anon N0=1234 N1=0` per line).
pub fn parse(text: &str) -> Result<Vec<NumaStatLine>, ParseError> {
    parse_of(text, &[])
}

/// [`parse`], only the lines of the counters in `wanted` (every line when it is
/// empty; a name ending in `=` stands for every counter that starts with it, as the hugetlb
/// files' `total=<bytes>`). A watcher reads the file every cycle for three of its 27 counters
/// per node: the others are neither parsed nor kept, and do not fail the file.
pub fn parse_of(text: &str, wanted: &[&str]) -> Result<Vec<NumaStatLine>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        let Some(counter) = words.next() else { continue };
        let kept = wanted.is_empty()
            || wanted.iter().any(|w| match w.strip_suffix('=') {
                Some(_) => counter.starts_with(w),
                None => counter == *w,
            });
        if !kept {
            continue;
        }
        let mut bytes = Vec::new();
        for w in words {
            let parsed = w
                .strip_prefix('N')
                .and_then(|r| r.split_once('='))
                .and_then(|(n, v)| Some((n.parse::<NodeId>().ok()?, v.parse::<u64>().ok()?)));
            bytes.push(parsed.ok_or_else(|| ParseError::new(i + 1, w, "`N<node>=<bytes>`"))?);
        }
        bytes.sort_unstable();
        out.push(NumaStatLine { counter: counter.to_string(), bytes });
    }
    Ok(out)
}

/// The counters in `wanted` (see [`parse_of`]) of the `memory.numa_stat` of the cgroup at
/// `folder`, `None` when it is gone.
pub fn read(
    files: &mut dyn KernelFiles,
    folder: &str,
    wanted: &[&str],
) -> Result<Option<Vec<NumaStatLine>>, DiscoveryError> {
    parsed(files, &format!("{folder}/memory.numa_stat"), |t| parse_of(t, wanted))
}

/// The lines in `wanted` of every `hugetlb.<size>.numa_stat` of the cgroup at `folder` (one
/// per huge page size the hugetlb controller is enabled for), in no set order.
pub fn read_hugetlb(
    files: &mut dyn KernelFiles,
    folder: &str,
    wanted: &[&str],
) -> Result<Vec<NumaStatLine>, DiscoveryError> {
    let mut out = Vec::new();
    for name in files.names(folder)?.unwrap_or_default() {
        if name.starts_with("hugetlb.") && name.ends_with(".numa_stat") {
            let rel = format!("{folder}/{name}");
            if let Some(lines) = parsed(files, &rel, |t| parse_of(t, wanted))? {
                out.extend(lines);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_per_node() {
        let s = parse("anon N0=4096 N1=0\nfile N1=8192 N0=12\n").unwrap();
        assert_eq!(s[0].counter, "anon");
        assert_eq!(s[0].bytes, vec![(0, 4096), (1, 0)]);
        assert_eq!(s[1].bytes, vec![(0, 12), (1, 8192)]);
        let e = parse("anon N0=1\nfile M0=1\n").unwrap_err();
        assert_eq!((e.line, e.value.as_str()), (2, "M0=1"));
        // Only the wanted counters: the others are skipped, even when they would not parse.
        let text = "anon N0=1\nanon_thp N0=2\nkernel_stack N0=?\nshmem N0=3\n";
        let s = parse_of(text, &["anon", "shmem"]).unwrap();
        let names: Vec<&str> = s.iter().map(|l| l.counter.as_str()).collect();
        assert_eq!(names, ["anon", "shmem"]);
        assert_eq!(parse_of("anon N0=?\n", &["anon"]).unwrap_err().line, 1);
        let huge = "total=4 N0=4\nhierarchical_total=8 N0=8\n";
        let s = parse_of(huge, &["total="]).unwrap();
        assert_eq!((s.len(), s[0].counter.as_str()), (1, "total=4"));
    }

    #[test]
    fn reads_a_cgroup_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        let cg = dir.path().join("sys/fs/cgroup/db.service");
        std::fs::create_dir_all(&cg).unwrap();
        std::fs::write(cg.join("memory.numa_stat"), "anon N0=4096 N1=8192\nfile N0=0 N1=1\n")
            .unwrap();
        std::fs::write(cg.join("hugetlb.2MB.numa_stat"), "total=2 N0=2\n").unwrap();
        std::fs::write(cg.join("hugetlb.1GB.numa_stat"), "total=0 N0=0\n").unwrap();
        let mut fs = crate::FsRoot::new(dir.path());
        let folder = crate::cgroup::folder("/db.service").unwrap();
        let s = read(&mut fs, &folder, &["anon"]).unwrap().unwrap();
        assert_eq!(s, [NumaStatLine { counter: "anon".into(), bytes: vec![(0, 4096), (1, 8192)] }]);
        assert_eq!(read_hugetlb(&mut fs, &folder, &["total="]).unwrap().len(), 2);
        assert_eq!(read(&mut fs, "sys/fs/cgroup/none", &[]).unwrap(), None);
    }
}
