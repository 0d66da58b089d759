//! `/proc/PID/smaps`: per mapping, how its memory is backed. pinctl reads one mapping's
//! `AnonHugePages` (how much of it transparent huge pages back), for `pinctl probe`, whose
//! latency figures depend on it (a 4 KiB page costs a TLB walk per new page).

use super::Pid;
use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::ParseError;

/// The `AnonHugePages` of the mapping that starts at `start` in smaps `text`, bytes; `None`
/// when no mapping starts there (or it has no such line).
pub fn anon_huge_pages_at(text: &str, start: u64) -> Result<Option<u64>, ParseError> {
    let mut in_mapping = false;
    for (n, line) in text.lines().enumerate() {
        // A mapping's header is `START-END PERMS ...`; its fields are `Key:   value kB`.
        let first = line.split_ascii_whitespace().next().unwrap_or("");
        if let Some((from, _)) = first.split_once('-') {
            if !first.ends_with(':') {
                let from = u64::from_str_radix(from, 16)
                    .map_err(|_| ParseError::new(n + 1, line, "an smaps mapping header"))?;
                if in_mapping {
                    return Ok(None);
                }
                in_mapping = from == start;
                continue;
            }
        }
        if in_mapping {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                let kb = rest.trim().strip_suffix("kB").unwrap_or(rest).trim();
                let kb: u64 = kb
                    .parse()
                    .map_err(|_| ParseError::new(n + 1, line, "`AnonHugePages: N kB`"))?;
                return Ok(Some(kb.saturating_mul(1024)));
            }
        }
    }
    Ok(None)
}

/// The `AnonHugePages` of the mapping of process `pid` that starts at `start`, bytes, under
/// the root of `files`; `None` when no mapping starts there.
pub fn read_anon_huge_pages(
    files: &mut dyn KernelFiles,
    pid: impl Into<Pid>,
    start: u64,
) -> Result<Option<u64>, DiscoveryError> {
    let rel = pid.into().file("smaps");
    Ok(parsed(files, &rel, |text| anon_huge_pages_at(text, start))?.flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
AnonHugePages:         0 kB
7f0000000000-7f0010000000 rw-p 00000000 00:00 0 
Size:             262144 kB
Rss:              262144 kB
AnonHugePages:    260096 kB
ShmemPmdMapped:        0 kB
7f0010000000-7f0010200000 rw-p 00000000 00:00 0 
Size:               2048 kB
";

    #[test]
    fn finds_the_mapping_by_its_start() {
        assert_eq!(anon_huge_pages_at(SMAPS, 0x7f00_0000_0000), Ok(Some(260_096 * 1024)));
        assert_eq!(anon_huge_pages_at(SMAPS, 0x55d0_c000_0000), Ok(Some(0)));
        assert_eq!(anon_huge_pages_at(SMAPS, 0x7f00_1000_0000), Ok(None), "no such line");
        assert_eq!(anon_huge_pages_at(SMAPS, 0x1000), Ok(None), "no such mapping");
        assert!(anon_huge_pages_at("7f00-zz rw-p\nAnonHugePages: x kB\n", 0x7f00).is_err());
    }

    #[test]
    fn reads_the_live_process() {
        let heap = vec![1u8; 4 << 20];
        // Some mapping of this process starts at a page boundary at or below the heap; the
        // reader answers for any start it is given without failing.
        let start = (heap.as_ptr() as u64) & !0xfff;
        let mut fs = crate::FsRoot::new("/".as_ref());
        assert!(read_anon_huge_pages(&mut fs, Pid::Current, start).is_ok());
        drop(heap);
    }
}
