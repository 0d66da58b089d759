//! `/proc/PID/stat` (and a thread's `task/TID/stat`): state, parent, process group, start time,
//! CPU time and last CPU.

use super::Pid;
use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::ParseError;

/// The fields of `stat` that pinctl reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Field 3: `R`, `S`, `D`, `Z`, ...
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 5: the process group.
    pub pgrp: u32,
    /// Fields 14 and 15 (utime, stime): CPU time of every thread of the process, in clock
    /// ticks.
    pub cpu_ticks: u64,
    /// Fields 16 and 17 (cutime, cstime): of the children it has waited for, so that a server
    /// that forks workers counts them once they are reaped.
    pub waited_ticks: u64,
    /// Field 22: start time in clock ticks since boot (with the PID, a process's identity).
    pub start_time: u64,
    /// Field 39: the CPU the task last ran on.
    pub processor: u32,
}

/// Parses `stat`. The command name (field 2) is in parentheses and may itself hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse(text: &str) -> Result<Stat, ParseError> {
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
    let small = |n: usize, what: &'static str| {
        let v = number(n, what)?;
        u32::try_from(v).map_err(|_| ParseError::new(1, &v.to_string(), what))
    };
    let state = field(3, "a task state after the command name")?;
    let mut chars = state.chars();
    let (Some(state), None) = (chars.next(), chars.next()) else {
        return Err(ParseError::new(1, state, "a one-letter task state"));
    };
    // The children's times are signed (a kernel long); a negative one counts as none.
    let ticks = |n: usize| -> Result<u64, ParseError> {
        let w = field(n, "CPU times in clock ticks (fields 14 to 17)")?;
        let t: i64 = w.parse().map_err(|_| ParseError::new(1, w, "a CPU time in clock ticks"))?;
        Ok(t.max(0) as u64)
    };
    Ok(Stat {
        state,
        ppid: small(4, "a parent pid (field 4)")?,
        pgrp: small(5, "a process group (field 5)")?,
        cpu_ticks: ticks(14)? + ticks(15)?,
        waited_ticks: ticks(16)? + ticks(17)?,
        start_time: number(22, "a start time in clock ticks (field 22)")?,
        processor: small(39, "the last CPU (field 39)")?,
    })
}

/// The `stat` of `pid` under the root of `files`, `None` when it is gone.
pub fn read(
    files: &mut dyn KernelFiles,
    pid: impl Into<Pid>,
) -> Result<Option<Stat>, DiscoveryError> {
    parsed(files, &pid.into().file("stat"), parse)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A `stat` line of a sleeping task, fields 3 to 44: field 22 (start time) is 500, field 39
    /// the CPU, fields 14 to 17 the CPU ticks given.
    pub(crate) fn line(pid: u32, ppid: u32, cpu: u32, ticks: [i64; 4]) -> String {
        let mut f: Vec<String> = (3..=44).map(|_| "0".to_string()).collect();
        f[0] = "S".into();
        f[1] = ppid.to_string();
        f[2] = pid.to_string();
        for (k, t) in ticks.iter().enumerate() {
            f[14 - 3 + k] = t.to_string();
        }
        f[22 - 3] = "500".into();
        f[39 - 3] = cpu.to_string();
        format!("{pid} (my) (db) {}\n", f.join(" "))
    }

    #[test]
    fn fields_after_a_tricky_command_name() {
        let s = parse(&line(3560, 3558, 5, [7, 3, 20, 1])).unwrap();
        let want = Stat {
            state: 'S',
            ppid: 3558,
            pgrp: 3560,
            cpu_ticks: 10,
            waited_ticks: 21,
            start_time: 500,
            processor: 5,
        };
        assert_eq!(s, want);
        // A negative child time counts as none.
        assert_eq!(parse(&line(1, 0, 0, [7, 3, -20, 1])).unwrap().waited_ticks, 1);
        assert!(parse("3560 (cat) R 1 2 3\n").is_err());
        assert!(parse("3560 cat R").is_err());
        assert!(parse(&line(1, 0, 0, [7, 3, 20, 1]).replace(" S ", " RR ")).is_err());
        assert!(parse(&line(1, 0, 0, [7, 3, 20, 1]).replace("500", "x")).is_err());
        let live = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(parse(&live).unwrap().start_time > 0);
    }

    #[test]
    fn reads_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/7/task/8")).unwrap();
        std::fs::write(dir.path().join("proc/7/task/8/stat"), line(8, 1, 3, [0; 4])).unwrap();
        let mut fs = crate::FsRoot::new(dir.path());
        let s = read(&mut fs, Pid::Thread { pid: 7, tid: 8 }).unwrap().unwrap();
        assert_eq!(s.processor, 3);
        assert_eq!(read(&mut fs, 7).unwrap(), None);
        std::fs::write(dir.path().join("proc/7/stat"), "7 (x) S 1\n").unwrap();
        let e = read(&mut fs, 7).unwrap_err();
        assert!(e.to_string().ends_with("proc/7/stat`"), "{e}");
    }
}
