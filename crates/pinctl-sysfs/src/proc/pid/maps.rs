//! `/proc/PID/maps`: the address ranges of a process.

use super::Pid;
use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::ParseError;

/// One line: an address range of the process.
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

/// Parses `maps` (`start-end perms offset dev inode [path]` per line).
pub fn parse(text: &str) -> Result<Vec<MapsEntry>, ParseError> {
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

/// The range of `maps` that holds `addr`, if any.
pub fn containing(maps: &[MapsEntry], addr: u64) -> Option<&MapsEntry> {
    maps.iter().find(|m| m.start <= addr && addr < m.end)
}

/// The `maps` of `pid` under the root of `files`, `None` when it is gone.
pub fn read(
    files: &mut dyn KernelFiles,
    pid: impl Into<Pid>,
) -> Result<Option<Vec<MapsEntry>>, DiscoveryError> {
    parsed(files, &pid.into().file("maps"), parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_paths() {
        let m = parse(
            "559ba4af5000-559ba4af7000 r--p 00000000 fe:00 247282    /usr/bin/my head\n\
             7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n",
        )
        .unwrap();
        assert_eq!((m[0].start, m[0].end), (0x559ba4af5000, 0x559ba4af7000));
        assert_eq!(m[0].path, "/usr/bin/my head");
        assert_eq!((m[1].perms.as_str(), m[1].path.as_str()), ("rw-p", ""));
        assert_eq!(containing(&m, 0x7f0000000010).unwrap().perms, "rw-p");
        assert!(containing(&m, 0x7f0000100000).is_none());
        assert!(parse("zz-10 rw-p\n").is_err());
        assert!(parse("20-10 rw-p 0 0:0 0\n").is_err());
        assert!(parse("20\n").is_err());
    }
}
