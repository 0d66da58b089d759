//! Parsers of the sysfs and procfs value formats discovery reads (id lists and masks, numbers,
//! distances, mounts, routes) and the error they share with the per-file readers
//! ([`crate::proc`], [`crate::cgroup`], [`crate::node`]). Each takes the file's text and never
//! touches the file system, so every one is tested on literal strings.

#[cfg(test)]
use pinctl_topology::CpuKind;
use pinctl_topology::text::shown;
use pinctl_topology::{IdKind, IdSet, MAX_NODE_ID, NodeId, NodeSet, ParseIdSetError};

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

/// The digits `N` of a kernel folder named `{prefix}N` (`node4`, `cpu12`, `memory_tier22`) when
/// they are written as the kernel writes a number: decimal, no sign, no leading zero. Any other
/// spelling is not such a folder: `memory_tier04` or `node+4` beside `memory_tier4` and `node4`
/// would name one tier or node twice.
pub fn folder_number<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let digits = name.strip_prefix(prefix)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then_some(digits)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_numbers_are_spelled_as_the_kernel_spells_them() {
        assert_eq!(folder_number("node4", "node"), Some("4"));
        assert_eq!(folder_number("node0", "node"), Some("0"));
        assert_eq!(folder_number("node04", "node"), None);
        assert_eq!(folder_number("node+4", "node"), None);
        assert_eq!(folder_number("node", "node"), None);
        assert_eq!(folder_number("cpu4", "node"), None);
    }

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
    fn distances() {
        assert_eq!(distance_row("10 16 32 33\n").unwrap(), vec![10, 16, 32, 33]);
        assert!(distance_row("10 x").is_err());
        assert_eq!(distance_row("\n").unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn counters_in_file_order() {
        let c = counters("nr_free_pages 12\nnuma_pages_migrated 7\n\n").unwrap();
        assert_eq!(c, vec![("nr_free_pages", 12), ("numa_pages_migrated", 7)]);
        assert_eq!(counters("x y\n").unwrap_err().line, 1);
        assert_eq!(counters("a 1\nlonely\n").unwrap_err().line, 2);
    }

    #[test]
    fn mounts_with_escapes() {
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
