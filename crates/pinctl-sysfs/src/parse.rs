//! Parsers of the sysfs and procfs text formats pinctl reads. Each takes the file's text and
//! never touches the file system, so every one is tested on literal strings.

use std::fmt;

#[cfg(test)]
use pinctl_topology::CpuKind;
use pinctl_topology::text::shown;
use pinctl_topology::{
    CpuSet, IdKind, IdSet, MAX_NODE_ID, MemoryPolicy, NodeId, NodeSet, ParseIdSetError,
};

/// A line of a sysfs/procfs file that does not have the shape the kernel writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: invalid `{value}`: expected {expected}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// The offending text.
    pub value: String,
    /// What the kernel writes there.
    pub expected: &'static str,
    #[source]
    pub source: Option<ParseIdSetError>,
}

impl ParseError {
    pub(crate) fn new(line: usize, value: &str, expected: &'static str) -> Self {
        ParseError { line, value: shown(value), expected, source: None }
    }
}

/// A CPU or node list (`0-3,8-11`, the `cpulist`, `online`, `has_cpu` files).
pub fn id_list<K: IdKind>(text: &str) -> Result<IdSet<K>, ParseError> {
    id_set(text, IdSet::parse_list, "a kernel id list such as `0-3,8-11`")
}

/// A node list (`online`, `possible`, `has_cpu` of `sys/devices/system/node`): ids up to
/// [`MAX_NODE_ID`].
pub fn node_list(text: &str) -> Result<NodeSet, ParseError> {
    id_set(text, NodeSet::parse_node_list, "a kernel node list such as `0-3`")
}

/// A CPU mask (`cpumap`, `local_cpus`): comma-separated 32-bit hexadecimal words.
pub fn id_mask<K: IdKind>(text: &str) -> Result<IdSet<K>, ParseError> {
    id_set(text, IdSet::parse_mask, "a kernel mask such as `00000000,0000ffff`")
}

/// A one-line set file through `parse`; an error shows the (shortened) text.
fn id_set<K: IdKind>(
    text: &str,
    parse: fn(&str) -> Result<IdSet<K>, ParseIdSetError>,
    expected: &'static str,
) -> Result<IdSet<K>, ParseError> {
    parse(text).map_err(|e| ParseError {
        line: 1,
        value: shown(text.trim()),
        expected,
        source: Some(e),
    })
}

/// A signed decimal integer file (`numa_node`, `physical_package_id`, `core_id`).
pub fn int(text: &str) -> Result<i64, ParseError> {
    let t = text.trim();
    t.parse().map_err(|_| ParseError::new(1, t, "a decimal integer"))
}

/// An unsigned decimal integer file (`numa_balancing`, `zone_reclaim_mode`).
pub fn uint(text: &str) -> Result<u32, ParseError> {
    let t = text.trim();
    t.parse().map_err(|_| ParseError::new(1, t, "a non-negative decimal integer"))
}

/// What a CPU cache holds (`cache/indexN/type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheType {
    Data,
    Instruction,
    Unified,
}

/// A `cache/indexN/type` file: `Data`, `Instruction` or `Unified`.
pub fn cache_type(text: &str) -> Result<CacheType, ParseError> {
    match text.trim() {
        "Data" => Ok(CacheType::Data),
        "Instruction" => Ok(CacheType::Instruction),
        "Unified" => Ok(CacheType::Unified),
        t => Err(ParseError::new(1, t, "`Data`, `Instruction` or `Unified`")),
    }
}

/// A `cache/indexN/size` file in bytes: a number with the kernel's `K` suffix (`32768K`),
/// or `M`/`G` and a plain byte count as some architectures write it.
pub fn cache_size(text: &str) -> Result<u64, ParseError> {
    let t = text.trim();
    let bad = || ParseError::new(1, t, "a cache size such as `32768K`");
    let (digits, shift) = match t.as_bytes().last() {
        Some(b'K') => (&t[..t.len() - 1], 10),
        Some(b'M') => (&t[..t.len() - 1], 20),
        Some(b'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1 << shift).ok_or_else(bad)
}

/// A `numa_node` file: `Some(node)`, or `None` for the firmware's "unknown" (-1).
pub fn numa_node(text: &str) -> Result<Option<NodeId>, ParseError> {
    let v = int(text)?;
    match v {
        -1 => Ok(None),
        0.. if v <= i64::from(MAX_NODE_ID) => Ok(Some(v as NodeId)),
        _ => Err(ParseError::new(1, text.trim(), "a node id or -1")),
    }
}

/// Total and free memory of a node, from `nodeN/meminfo`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeMeminfo {
    /// `MemTotal` in bytes.
    pub total_bytes: Option<u64>,
    /// `MemFree` in bytes.
    pub free_bytes: Option<u64>,
}

/// Parses `nodeN/meminfo` (`Node 0 MemTotal:  16747124 kB`) or `/proc/meminfo`
/// (`MemTotal:  16747124 kB`). Only MemTotal and MemFree are kept; blank lines are allowed
/// (some old kernels start the file with one).
pub fn meminfo(text: &str) -> Result<NodeMeminfo, ParseError> {
    let mut out = NodeMeminfo::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // Strip the `Node N ` prefix of per-node files.
        let rest = match line.strip_prefix("Node ") {
            Some(r) => r.split_once(' ').map_or(r, |(_, r)| r).trim_start(),
            None => line,
        };
        let Some((key, value)) = rest.split_once(':') else {
            return Err(ParseError::new(i + 1, line, "`Key: value kB`"));
        };
        let slot = match key {
            "MemTotal" => &mut out.total_bytes,
            "MemFree" => &mut out.free_bytes,
            _ => continue,
        };
        let mut words = value.split_whitespace();
        let n: u64 = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| ParseError::new(i + 1, line, "a size in kB"))?;
        let bytes = match words.next() {
            Some("kB") => n.checked_mul(1024),
            None => Some(n),
            Some(_) => None,
        }
        .ok_or_else(|| ParseError::new(i + 1, line, "a size in kB"))?;
        *slot = Some(bytes);
    }
    Ok(out)
}

/// A `nodeN/distance` row: SLIT distances separated by spaces.
pub fn distance_row(text: &str) -> Result<Vec<u32>, ParseError> {
    text.split_whitespace()
        .map(|w| w.parse().map_err(|_| ParseError::new(1, w, "a distance (decimal integer)")))
        .collect()
}

/// A weighted-interleave weight (`weighted_interleave/nodeN`): 1 to 255.
pub fn interleave_weight(text: &str) -> Result<u8, ParseError> {
    let w = text.trim();
    match w.parse::<u8>() {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(ParseError::new(1, w, "a weight from 1 to 255")),
    }
}

/// The counters of `nodeN/numastat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NumaStat {
    pub numa_hit: u64,
    pub numa_miss: u64,
    pub numa_foreign: u64,
    pub interleave_hit: u64,
    pub local_node: u64,
    pub other_node: u64,
}

/// Parses `nodeN/numastat` (`numa_hit 123` per line). Unknown counters are ignored so newer
/// kernels still parse.
pub fn numastat(text: &str) -> Result<NumaStat, ParseError> {
    let mut s = NumaStat::default();
    for (key, v) in counters(text)? {
        match key {
            "numa_hit" => s.numa_hit = v,
            "numa_miss" => s.numa_miss = v,
            "numa_foreign" => s.numa_foreign = v,
            "interleave_hit" => s.interleave_hit = v,
            "local_node" => s.local_node = v,
            "other_node" => s.other_node = v,
            _ => {}
        }
    }
    Ok(s)
}

/// Parses a file of `name value` lines with decimal values (`/proc/vmstat`, `nodeN/numastat`),
/// in file order.
pub fn counters(text: &str) -> Result<Vec<(&str, u64)>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| ParseError::new(i + 1, line, "`counter value`"))?;
        let v: u64 = value
            .trim()
            .parse()
            .map_err(|_| ParseError::new(i + 1, line, "`counter value` with a decimal value"))?;
        out.push((key, v));
    }
    Ok(out)
}

/// The fields of `/proc/PID/stat` (or `/proc/PID/task/TID/stat`) that pinctl reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3: `R`, `S`, `D`, `Z`, ...
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 22: start time in clock ticks since boot (with the PID, a process's identity).
    pub start_time: u64,
    /// Field 39: the CPU the task last ran on.
    pub processor: u32,
}

/// Parses `/proc/PID/stat`. The command name (field 2) is in parentheses and may itself hold
/// spaces and parentheses, so fields are counted from the last `)`.
pub fn proc_stat(text: &str) -> Result<ProcStat, ParseError> {
    let line = text.trim_end();
    let close =
        line.rfind(')').ok_or_else(|| ParseError::new(1, line, "`pid (comm) state ...`"))?;
    // Field 3 is the first after `)`; field N is at index N - 3.
    let f: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let field = |n: usize, what: &'static str| {
        f.get(n - 3).copied().ok_or_else(|| ParseError::new(1, line, what))
    };
    let number = |n: usize, what: &'static str| -> Result<u64, ParseError> {
        let w = field(n, what)?;
        w.parse().map_err(|_| ParseError::new(1, w, what))
    };
    let state = field(3, "a task state after the command name")?;
    let mut chars = state.chars();
    let (Some(state), None) = (chars.next(), chars.next()) else {
        return Err(ParseError::new(1, state, "a one-letter task state"));
    };
    let small = |v: u64, w: &'static str| {
        u32::try_from(v).map_err(|_| ParseError::new(1, &v.to_string(), w))
    };
    Ok(ProcStat {
        state,
        ppid: small(number(4, "a parent pid (field 4)")?, "a parent pid (field 4)")?,
        start_time: number(22, "a start time in clock ticks (field 22)")?,
        processor: small(number(39, "the last CPU (field 39)")?, "the last CPU (field 39)")?,
    })
}

/// One line of `/proc/PID/maps`: an address range of the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsEntry {
    /// First byte of the range.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// `rw-p`, `r-xp`, ...
    pub perms: String,
    /// The file, `[heap]`, `[stack]`, ... or empty for anonymous memory.
    pub path: String,
}

/// Parses `/proc/PID/maps` (`start-end perms offset dev inode [path]` per line).
pub fn proc_maps(text: &str) -> Result<Vec<MapsEntry>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |what| ParseError::new(i + 1, line, what);
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            return Err(bad("`start-end perms offset dev inode [path]`"));
        };
        let (start, end) = range.split_once('-').ok_or_else(|| bad("a `start-end` range"))?;
        let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad("hexadecimal addresses"));
        let (start, end) = (hex(start)?, hex(end)?);
        if end < start {
            return Err(bad("a range whose end is not before its start"));
        }
        // offset, dev, inode, then the path (which may contain spaces).
        let path = f.nth(3).map_or(String::new(), |first| {
            let at = line.find(first).unwrap_or(line.len());
            line[at..].to_string()
        });
        out.push(MapsEntry { start, end, perms: perms.to_string(), path });
    }
    Ok(out)
}

/// The CPUs and nodes a process may use, from `/proc/PID/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedSets {
    /// `Cpus_allowed_list`.
    pub cpus: Option<CpuSet>,
    /// `Mems_allowed_list`.
    pub nodes: Option<NodeSet>,
}

/// Parses the `Cpus_allowed_list` and `Mems_allowed_list` lines of `/proc/PID/status`.
pub fn status_allowed(text: &str) -> Result<AllowedSets, ParseError> {
    let mut out = AllowedSets::default();
    for (i, line) in text.lines().enumerate() {
        let at_line = |e| ParseError { line: i + 1, ..e };
        if let Some(v) = line.strip_prefix("Cpus_allowed_list:") {
            out.cpus = Some(id_list(v).map_err(at_line)?);
        } else if let Some(v) = line.strip_prefix("Mems_allowed_list:") {
            out.nodes = Some(id_list(v).map_err(at_line)?);
        }
    }
    Ok(out)
}

/// The user ids of a process, from the `Uid:` line of `/proc/PID/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessUids {
    pub real: u32,
    pub effective: u32,
    pub saved: u32,
    pub filesystem: u32,
}

/// Parses the `Uid:` line of `/proc/PID/status` (real, effective, saved, filesystem).
pub fn status_uids(text: &str) -> Result<ProcessUids, ParseError> {
    let expected = "`Uid:` and four user ids";
    let (i, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.starts_with("Uid:"))
        .ok_or_else(|| ParseError::new(1, text.lines().next().unwrap_or(""), expected))?;
    let ids: Vec<u32> = line["Uid:".len()..]
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| ParseError::new(i + 1, line, expected))?;
    match ids[..] {
        [real, effective, saved, filesystem] => {
            Ok(ProcessUids { real, effective, saved, filesystem })
        }
        _ => Err(ParseError::new(i + 1, line, expected)),
    }
}

/// What a process has used so far: its CPU time and resident memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// User plus system time in clock ticks (`sysconf(_SC_CLK_TCK)`): of every thread of the
    /// process (fields 14-15 of `/proc/PID/stat`) and of the children it has waited for
    /// (16-17), so a server that forks workers counts them once they are reaped.
    pub cpu_ticks: u64,
    /// `VmRSS` of `/proc/PID/status` in bytes; `None` where the kernel shows none (a zombie).
    pub rss_bytes: Option<u64>,
}

/// The CPU ticks of `/proc/PID/stat`: fields 14 to 17 (utime, stime, cutime, cstime),
/// counted after the command name, which may hold spaces and parentheses.
pub fn stat_cpu_ticks(text: &str) -> Result<u64, ParseError> {
    let bad =
        || ParseError::new(1, text.trim(), "`/proc/PID/stat`: PID (comm) state and 49 more fields");
    let after = &text[text.rfind(')').ok_or_else(bad)? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state): fields 14-17 are at 11..15.
    let ticks = fields.get(11..15).ok_or_else(bad)?;
    ticks.iter().try_fold(0u64, |sum, f| {
        let t: i64 = f.parse().map_err(|_| bad())?;
        Ok(sum + t.max(0) as u64)
    })
}

/// The `VmRSS` line of `/proc/PID/status` in bytes (`None` when the process has none).
pub fn status_rss(text: &str) -> Result<Option<u64>, ParseError> {
    for (i, line) in text.lines().enumerate() {
        if let Some(v) = line.strip_prefix("VmRSS:") {
            let kib = v.trim().strip_suffix("kB").map(str::trim);
            let kib: u64 = kib
                .and_then(|k| k.parse().ok())
                .ok_or_else(|| ParseError::new(i + 1, line, "`VmRSS:` and a size in kB"))?;
            return Ok(Some(kib * 1024));
        }
    }
    Ok(None)
}

/// One mapping of `/proc/PID/numa_maps`.
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

/// Parses `/proc/PID/numa_maps`: one mapping per line. A mapping without `N<node>=` fields
/// holds no resident pages (not an error).
pub fn numa_maps(text: &str) -> Result<Vec<NumaMapsEntry>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(numa_maps_line(line).map_err(|e| ParseError { line: i + 1, ..e })?);
    }
    Ok(out)
}

/// Parses one line of `/proc/PID/numa_maps` (the error's line number is 1).
pub fn numa_maps_line(line: &str) -> Result<NumaMapsEntry, ParseError> {
    let line = line.trim();
    let (addr, rest) =
        line.split_once(' ').ok_or_else(|| ParseError::new(1, line, "`<address> <policy> ...`"))?;
    let address = u64::from_str_radix(addr, 16)
        .map_err(|_| ParseError::new(1, addr, "a hexadecimal address"))?;
    let (policy, attrs) = numa_maps_policy(rest);
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
fn numa_maps_policy(rest: &str) -> (&str, &str) {
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

/// One line of a cgroup v2 `memory.numa_stat`: a counter and its bytes per node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaStatLine {
    /// `anon`, `file`, `kernel_stack`, ...
    pub counter: String,
    /// Bytes per node, ascending by node.
    pub bytes: Vec<(NodeId, u64)>,
}

/// Parses a cgroup v2 `memory.numa_stat` (`anon N0=1234 N1=0` per line).
pub fn memory_numa_stat(text: &str) -> Result<Vec<NumaStatLine>, ParseError> {
    memory_numa_stat_of(text, &[])
}

/// [`memory_numa_stat`], only the lines of the counters in `wanted` (every line when it is
/// empty; a name ending in `=` stands for every counter that starts with it, as the hugetlb
/// files' `total=<bytes>`). A watcher reads the file every cycle for three of its 27 counters
/// per node: the others are neither parsed nor kept, and do not fail the file.
pub fn memory_numa_stat_of(text: &str, wanted: &[&str]) -> Result<Vec<NumaStatLine>, ParseError> {
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

/// A mount of `/proc/mounts` or `/proc/self/mounts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount<'a> {
    pub source: &'a str,
    pub target: String,
    pub fstype: &'a str,
    pub options: &'a str,
}

/// Parses `/proc/mounts`; octal escapes (`\040` for a space) in the mount point are decoded.
pub fn mounts(text: &str) -> Result<Vec<Mount<'_>>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut f = line.split_whitespace();
        let (Some(source), Some(target), Some(fstype), Some(options)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(ParseError::new(i + 1, line, "`source target fstype options ...`"));
        };
        out.push(Mount { source, target: unescape_octal(target), fstype, options });
    }
    Ok(out)
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup of a process for one hierarchy, from `/proc/PID/cgroup`
/// (`5:cpuset:/machine.slice` for v1, `0::/user.slice` for v2).
pub fn cgroup_path<'a>(text: &'a str, controller: Option<&str>) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_id, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        let hit = match controller {
            None => ctrls.is_empty(),
            Some(c) => ctrls.split(',').any(|x| x == c),
        };
        hit.then_some(path)
    })
}

/// Routes with destination `0.0.0.0/0` in `/proc/net/route`, as interface names.
pub fn default_routes_v4(text: &str) -> Result<Vec<String>, ParseError> {
    const RTF_UP: u32 = 0x1;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 8 {
            return Err(ParseError::new(i + 1, line, "`Iface Destination Gateway Flags ...`"));
        }
        let flags = u32::from_str_radix(f[3], 16)
            .map_err(|_| ParseError::new(i + 1, f[3], "hexadecimal route flags"))?;
        if f[1] == "00000000" && f[7] == "00000000" && flags & RTF_UP != 0 {
            out.push(f[0].to_string());
        }
    }
    Ok(out)
}

/// Routes with destination `::/0` in `/proc/net/ipv6_route`, as interface names. The kernel's
/// unreachable default routes on `lo` are left out.
pub fn default_routes_v6(text: &str) -> Result<Vec<String>, ParseError> {
    const RTF_UP: u32 = 0x1;
    const RTF_REJECT: u32 = 0x200;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 10 {
            return Err(ParseError::new(i + 1, line, "10 fields of an ipv6_route line"));
        }
        let flags = u32::from_str_radix(f[8], 16)
            .map_err(|_| ParseError::new(i + 1, f[8], "hexadecimal route flags"))?;
        let default = f[0].bytes().all(|c| c == b'0') && f[1] == "00";
        if default && flags & RTF_UP != 0 && flags & RTF_REJECT == 0 && f[9] != "lo" {
            out.push(f[9].to_string());
        }
    }
    Ok(out)
}

/// Major and minor numbers of a Linux `dev_t` (glibc's `gnu_dev_major`/`gnu_dev_minor`).
pub fn dev_major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// The `major:minor` of a `/proc/self/mountinfo` line and its mount source, with its mount point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    pub major: u32,
    pub minor: u32,
    pub mount_point: String,
    pub source: String,
}

/// Parses `/proc/PID/mountinfo`.
pub fn mountinfo(text: &str) -> Result<Vec<MountInfo>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || ParseError::new(i + 1, line, "a mountinfo line");
        let f: Vec<&str> = line.split(' ').collect();
        let sep = f.iter().position(|&x| x == "-").ok_or_else(bad)?;
        if f.len() < 5 || f.len() < sep + 3 {
            return Err(bad());
        }
        let (ma, mi) = f[2].split_once(':').ok_or_else(bad)?;
        out.push(MountInfo {
            major: ma.parse().map_err(|_| bad())?,
            minor: mi.parse().map_err(|_| bad())?,
            mount_point: unescape_octal(f[4]),
            source: unescape_octal(f[sep + 2]),
        });
    }
    Ok(out)
}

/// Whether `name` is a PCI function address such as `0000:00:02.0` (domains may be longer).
pub fn is_pci_address(name: &str) -> bool {
    let mut parts = name.split(':');
    let (Some(dom), Some(bus), Some(devfn), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_hexdigit());
    let Some((dev, func)) = devfn.split_once('.') else { return false };
    dom.len() >= 4
        && hex(dom)
        && bus.len() == 2
        && hex(bus)
        && dev.len() == 2
        && hex(dev)
        && func.len() == 1
        && func.bytes().all(|c| (b'0'..=b'7').contains(&c))
}

/// Displays a list of `(node, count)` pairs as `N0=12 N1=3`.
#[derive(Debug)]
pub struct PerNode<'a>(pub &'a [(NodeId, u64)]);

impl fmt::Display for PerNode<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (n, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "N{n}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn uids_of_a_process() {
        let text = "Name:\tredis\nUmask:\t0022\nUid:\t999\t998\t997\t996\nGid:\t1\t1\t1\t1\n";
        let u = super::status_uids(text).unwrap();
        assert_eq!((u.real, u.effective, u.saved, u.filesystem), (999, 998, 997, 996));
        assert!(super::status_uids("Name:\tx\n").is_err());
        assert!(super::status_uids("Uid:\t1\t2\n").is_err());
        assert!(super::status_uids("Uid:\t1\tx\t2\t3\n").is_err());
    }

    use super::*;

    #[test]
    fn cache_types_and_sizes() {
        assert_eq!(cache_type("Unified\n").unwrap(), CacheType::Unified);
        assert_eq!(cache_type("Instruction").unwrap(), CacheType::Instruction);
        assert!(cache_type("unified").is_err());
        assert_eq!(cache_size("32768K\n").unwrap(), 32 << 20);
        assert_eq!(cache_size("8M").unwrap(), 8 << 20);
        assert_eq!(cache_size("4096").unwrap(), 4096);
        for bad in ["", "K", "12KB", "-1K", "1.5M", "99999999999999999999G"] {
            assert!(cache_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn interleave_weights_are_1_to_255() {
        assert_eq!(interleave_weight("1\n").unwrap(), 1);
        assert_eq!(interleave_weight("255").unwrap(), 255);
        for bad in ["0", "256", "", "-1", "x"] {
            let e = interleave_weight(bad).unwrap_err().to_string();
            assert!(e.contains("a weight from 1 to 255"), "{bad}: {e}");
        }
    }

    #[test]
    fn lists_and_masks() {
        assert_eq!(id_list::<CpuKind>("0-5,48-53\n").unwrap().to_string(), "0-5,48-53");
        assert_eq!(
            id_mask::<CpuKind>("00000000,003f0000,0000003f\n").unwrap().to_string(),
            "0-5,48-53"
        );
        assert_eq!(id_mask::<CpuKind>("0000,00000000,00000003").unwrap().to_string(), "0-1");
        let e = id_list::<CpuKind>("0-x").unwrap_err();
        assert_eq!(e.value, "0-x");
        assert!(e.to_string().contains("`0-x`"), "{e}");
    }

    #[test]
    fn numa_node_values() {
        assert_eq!(numa_node("1\n").unwrap(), Some(1));
        assert_eq!(numa_node("-1\n").unwrap(), None);
        assert!(numa_node("-2").is_err());
        assert!(numa_node("4096").is_err(), "beyond MAX_NODE_ID");
        assert!(node_list("0-1048576").is_err());
        let e = id_list::<CpuKind>(&"x".repeat(1 << 20)).unwrap_err();
        assert!(e.to_string().len() < 300, "a long value gives a short error");
        assert!(numa_node("one").is_err());
    }

    #[test]
    fn node_meminfo() {
        let text = "\nNode 0 MemTotal:       16747124 kB\nNode 0 MemFree:        15794148 kB\n\
                    Node 0 MemUsed:          952976 kB\nNode 0 HugePages_Total:     0\n";
        let m = meminfo(text).unwrap();
        assert_eq!(m.total_bytes, Some(16747124 * 1024));
        assert_eq!(m.free_bytes, Some(15794148 * 1024));
        let m = meminfo("MemTotal:  1000 kB\nMemFree: 10 kB\nBuffers: 1 kB\n").unwrap();
        assert_eq!(m.total_bytes, Some(1024000));
        let e = meminfo("Node 0 MemTotal: lots kB\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert_eq!(meminfo("").unwrap(), NodeMeminfo::default());
        let m = meminfo("Node 12 MemTotal: 0 kB\n").unwrap();
        assert_eq!(m.total_bytes, Some(0));
    }

    #[test]
    fn distances() {
        assert_eq!(distance_row("10 16 32 33\n").unwrap(), vec![10, 16, 32, 33]);
        assert!(distance_row("10 x").is_err());
        assert_eq!(distance_row("\n").unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn numastat_counters() {
        let s = numastat(
            "numa_hit 6451\nnuma_miss 0\nnuma_foreign 0\ninterleave_hit 1\nlocal_node 6400\n\
             other_node 51\nnew_counter 5\n",
        )
        .unwrap();
        assert_eq!(s.numa_hit, 6451);
        assert_eq!(s.other_node, 51);
        assert_eq!(s.interleave_hit, 1);
        assert!(numastat("numa_hit lots\n").is_err());
    }

    #[test]
    fn vmstat_counters() {
        let c = counters("nr_free_pages 12\nnuma_pages_migrated 7\n\n").unwrap();
        assert_eq!(c, vec![("nr_free_pages", 12), ("numa_pages_migrated", 7)]);
        assert_eq!(counters("x y\n").unwrap_err().line, 1);
        assert_eq!(counters("a 1\nlonely\n").unwrap_err().line, 2);
    }

    #[test]
    fn stat_fields_after_a_tricky_command_name() {
        let text = "3560 (a) (b c) R 3558 3558 29067 0 -1 4194304 102 0 0 0 0 0 0 0 20 0 1 0 \
                    98576 3133440 412 18446744073709551615 1 2 3 0 0 0 0 0 0 0 0 0 17 5 0 0 0 0 0\n";
        let s = proc_stat(text).unwrap();
        assert_eq!(s, ProcStat { state: 'R', ppid: 3558, start_time: 98576, processor: 5 });
        assert!(proc_stat("3560 (cat) R 1 2 3\n").is_err());
        assert!(proc_stat("3560 cat R").is_err());
        assert!(proc_stat("1 (x) RR 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1").is_err());
        let live = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(proc_stat(&live).unwrap().start_time > 0);
    }

    #[test]
    fn maps_ranges_and_paths() {
        let m = proc_maps(
            "559ba4af5000-559ba4af7000 r--p 00000000 fe:00 247282    /usr/bin/my head\n\
             7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n",
        )
        .unwrap();
        assert_eq!((m[0].start, m[0].end), (0x559ba4af5000, 0x559ba4af7000));
        assert_eq!(m[0].path, "/usr/bin/my head");
        assert_eq!((m[1].perms.as_str(), m[1].path.as_str()), ("rw-p", ""));
        assert!(proc_maps("zz-10 rw-p\n").is_err());
        assert!(proc_maps("20-10 rw-p 0 0:0 0\n").is_err());
        assert!(proc_maps("20\n").is_err());
    }

    #[test]
    fn status_lists() {
        let text = "Name:\tcat\nCpus_allowed:\tff\nCpus_allowed_list:\t0-7\n\
                    Mems_allowed:\t00000000,00000003\nMems_allowed_list:\t0-1\n";
        let a = status_allowed(text).unwrap();
        assert_eq!(a.cpus.unwrap().to_string(), "0-7");
        assert_eq!(a.nodes.unwrap().to_string(), "0-1");
        assert_eq!(status_allowed("Name:\tx\n").unwrap(), AllowedSets::default());
        let e = status_allowed("Name:\tx\nCpus_allowed_list:\t7-3\n").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn cpu_ticks_and_rss() {
        // utime 7, stime 3, cutime 20, cstime 1 (fields 14-17); the name has `) (` in it.
        let stat = "4242 (my) (db) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 3 20 1 20 0 4 0 \
                    987654 1000 200 18446744073709551615";
        assert_eq!(stat_cpu_ticks(stat), Ok(31));
        assert!(stat_cpu_ticks("4242 (db) S 1 2").is_err(), "too few fields");
        assert!(stat_cpu_ticks("4242 (db) S 1 4242 4242 0 -1 1 2 3 4 5 x 3 0 0 20").is_err());
        let status = "Name:\tdb\nVmHWM:\t  9000 kB\nVmRSS:\t  8192 kB\nThreads:\t4\n";
        assert_eq!(status_rss(status), Ok(Some(8192 * 1024)));
        assert_eq!(status_rss("Name:\tzombie\nState:\tZ (zombie)\n"), Ok(None));
        assert_eq!(status_rss("Name:\tx\nVmRSS:\tlots\n").unwrap_err().line, 2);
    }

    #[test]
    fn numa_maps_lines() {
        let e = numa_maps_line(
            "7f0e1c000000 bind:0-1 anon=512 dirty=512 active=0 N0=256 N1=256 kernelpagesize_kB=4",
        )
        .unwrap();
        assert_eq!(e.address, 0x7f0e1c000000);
        assert_eq!(e.policy, "bind:0-1");
        assert_eq!(e.pages, vec![(0, 256), (1, 256)]);
        assert_eq!(e.total_pages(), 512);
        assert_eq!(e.page_size_kb, Some(4));
        let e = numa_maps_line("55d1 prefer (many):0-1 file=/bin/cat mapped=3 N1=3").unwrap();
        assert_eq!(e.policy, "prefer (many):0-1");
        assert_eq!(e.file.as_deref(), Some("/bin/cat"));
        let e = numa_maps_line("7ffd default stack").unwrap();
        assert!(e.pages.is_empty());
        let e = numa_maps_line("7ffd weighted interleave:0-3 heap anon=1 N2=1").unwrap();
        assert_eq!(e.policy, "weighted interleave:0-3");
        assert!(numa_maps_line("zzzz default").is_err());
        assert!(numa_maps_line("7ffd default N0=x").is_err());
        let err = numa_maps("1000 default N0=1\n2000 default N0=q\n").unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn numa_maps_policies_with_spaces_flags_and_nodes() {
        // mpol_to_str's forms: name, `=flags`, `:nodes`; two names hold a space.
        for (line, policy) in [
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
            let e = numa_maps_line(line).unwrap();
            assert_eq!(e.policy, policy, "{line}");
        }
        let e = numa_maps_line("7ffd weighted interleave:0-3 anon=4 N0=1 N1=1 N2=1 N3=1").unwrap();
        assert_eq!(e.pages, vec![(0, 1), (1, 1), (2, 1), (3, 1)]);
        let e = numa_maps_line("7ffd prefer:2 file=/usr/lib/with=eq.so mapped=1 N2=1").unwrap();
        assert_eq!(e.file.as_deref(), Some("/usr/lib/with=eq.so"));
        assert_eq!(e.total_pages(), 1);
        // `interleaved` is not `interleave` followed by something.
        assert_eq!(numa_maps_line("7ffd interleaved N0=1").unwrap().policy, "interleaved");
    }

    #[test]
    fn cgroup_numa_stat() {
        let s = memory_numa_stat("anon N0=4096 N1=0\nfile N1=8192 N0=12\n").unwrap();
        assert_eq!(s[0].counter, "anon");
        assert_eq!(s[0].bytes, vec![(0, 4096), (1, 0)]);
        assert_eq!(s[1].bytes, vec![(0, 12), (1, 8192)]);
        assert_eq!(PerNode(&s[1].bytes).to_string(), "N0=12 N1=8192");
        let e = memory_numa_stat("anon N0=1\nfile M0=1\n").unwrap_err();
        assert_eq!((e.line, e.value.as_str()), (2, "M0=1"));
        // Only the wanted counters: the others are skipped, even when they would not parse.
        let text = "anon N0=1\nanon_thp N0=2\nkernel_stack N0=?\nshmem N0=3\n";
        let s = memory_numa_stat_of(text, &["anon", "shmem"]).unwrap();
        let names: Vec<&str> = s.iter().map(|l| l.counter.as_str()).collect();
        assert_eq!(names, ["anon", "shmem"]);
        assert_eq!(memory_numa_stat_of("anon N0=?\n", &["anon"]).unwrap_err().line, 1);
        let huge = "total=4 N0=4\nhierarchical_total=8 N0=8\n";
        let s = memory_numa_stat_of(huge, &["total="]).unwrap();
        assert_eq!((s.len(), s[0].counter.as_str()), (1, "total=4"));
    }

    #[test]
    fn cgroups_and_mounts() {
        let cg = "11:freezer:/\n9:cpuset,cpu:/dummy\n0::/user.slice/x.scope\n";
        assert_eq!(cgroup_path(cg, Some("cpuset")), Some("/dummy"));
        assert_eq!(cgroup_path(cg, None), Some("/user.slice/x.scope"));
        assert_eq!(cgroup_path(cg, Some("memory")), None);
        let m =
            mounts("none /dev/cpuset cpuset rw 0 0\n/dev/sda1 /mnt/a\\040b ext4 rw 0 0\n").unwrap();
        assert_eq!(m[0].fstype, "cpuset");
        assert_eq!(m[1].target, "/mnt/a b");
        assert!(mounts("broken\n").is_err());
    }

    #[test]
    fn routes() {
        let v4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\t\
                  Window\tIRTT\n\
                  eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
                  eth0\t0000A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(default_routes_v4(v4).unwrap(), vec!["eth0"]);
        let v6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  fe800000000000000000000000000001 00000400 00000001 00000000 00000003 bond0\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n\
                  fe800000000000000000000000000000 40 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth1\n";
        assert_eq!(default_routes_v6(v6).unwrap(), vec!["bond0"]);
        assert!(default_routes_v6("short line\n").is_err());
    }

    #[test]
    fn mountinfo_and_dev() {
        let mi = "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw\n\
                  37 35 0:52 / /var/lib\\040x rw shared:2 - btrfs /dev/nvme0n1p2 rw\n";
        let m = mountinfo(mi).unwrap();
        assert_eq!((m[0].major, m[0].minor, m[0].source.as_str()), (98, 0, "/dev/root"));
        assert_eq!(m[1].mount_point, "/var/lib x");
        assert_eq!(dev_major_minor(0x10301), (259, 1));
        assert_eq!(dev_major_minor((8 << 8) | 17), (8, 17));
    }

    #[test]
    fn pci_addresses() {
        assert!(is_pci_address("0000:00:02.0"));
        assert!(is_pci_address("0214:90:00.0"));
        assert!(is_pci_address("10000:e1:00.7"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("0000:00:02"));
        assert!(!is_pci_address("4:0:0:0"));
        assert!(!is_pci_address("0000:00:02.8"));
    }
}
