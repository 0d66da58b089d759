//! The files of one process (`/proc/PID/...`) or one of its threads
//! (`/proc/PID/task/TID/...`).

pub mod cgroup;
pub mod cmdline;
pub mod comm;
pub mod environ;
pub mod maps;
pub mod numa_maps;
pub mod smaps;
pub mod stat;
pub mod status;
pub mod task;

/// Which process (or thread) a reader looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pid {
    /// The reading process (`/proc/self`).
    Current,
    Id(u32),
    /// One thread of a process (`/proc/PID/task/TID`).
    Thread {
        pid: u32,
        tid: u32,
    },
}

impl From<u32> for Pid {
    fn from(pid: u32) -> Pid {
        Pid::Id(pid)
    }
}

impl Pid {
    /// The path of the process's file `name`, relative to the root.
    pub(crate) fn file(self, name: &str) -> String {
        match self {
            Pid::Current => format!("proc/self/{name}"),
            Pid::Id(p) => format!("proc/{p}/{name}"),
            Pid::Thread { pid, tid } => format!("proc/{pid}/task/{tid}/{name}"),
        }
    }
}

/// The fields of a file of NUL-terminated strings (`cmdline`, `environ`), empty ones left out.
pub(crate) fn nul_separated(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == 0).filter(|f| !f.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_processes_and_threads() {
        assert_eq!(Pid::Current.file("stat"), "proc/self/stat");
        assert_eq!(Pid::from(7).file("status"), "proc/7/status");
        assert_eq!(Pid::Thread { pid: 7, tid: 9 }.file("stat"), "proc/7/task/9/stat");
        let fields: Vec<&[u8]> = nul_separated(b"a\0\0b c\0").collect();
        assert_eq!(fields, [&b"a"[..], b"b c"]);
    }
}
