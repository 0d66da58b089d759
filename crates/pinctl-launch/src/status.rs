//! Every exit status pinctl itself uses, in one place (docs/exit-codes.md is the user's copy of
//! this table; a test in the binary keeps the two in step). A command that execs another
//! program exits with that program's status; these are pinctl's own failures.

use pinctl_sys::Stage;

/// pinctl's own exit statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ExitStatus {
    /// Bad input (config, topology source, placement), an infeasible plan, an I/O error.
    Failure = 1,
    /// Bad command line (clap uses 2 too).
    Usage = 2,
    /// The command was found but could not be executed (the POSIX shell's number).
    NotExecutable = 126,
    /// The command does not exist (the POSIX shell's number).
    NotFound = 127,
    /// Setting or verifying the CPU affinity failed (systemd's `EXIT_CPU_AFFINITY`).
    CpuAffinity = 215,
    /// Setting or verifying the memory policy failed (systemd's `EXIT_NUMA_POLICY`).
    MemoryPolicy = 242,
}

impl ExitStatus {
    /// Every status, in the order of docs/exit-codes.md.
    pub const ALL: [ExitStatus; 6] = [
        ExitStatus::Failure,
        ExitStatus::Usage,
        ExitStatus::NotExecutable,
        ExitStatus::NotFound,
        ExitStatus::CpuAffinity,
        ExitStatus::MemoryPolicy,
    ];

    /// The number the process exits with.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The name docs/exit-codes.md gives it.
    pub fn name(self) -> &'static str {
        match self {
            ExitStatus::Failure => "failure",
            ExitStatus::Usage => "usage",
            ExitStatus::NotExecutable => "not executable",
            ExitStatus::NotFound => "not found",
            ExitStatus::CpuAffinity => "CPU affinity",
            ExitStatus::MemoryPolicy => "memory policy",
        }
    }

    /// Whether an instance that exited with `code` failed in a way a restart cannot fix: its
    /// placement was refused or its command cannot run. A supervisor does not restart these.
    pub fn is_permanent(code: i32) -> bool {
        const PERMANENT: [ExitStatus; 4] = [
            ExitStatus::NotExecutable,
            ExitStatus::NotFound,
            ExitStatus::CpuAffinity,
            ExitStatus::MemoryPolicy,
        ];
        PERMANENT.iter().any(|s| i32::from(s.code()) == code)
    }
}

impl From<Stage> for ExitStatus {
    /// The CPU steps map to 215, the memory steps to 242, as systemd's exec does.
    fn from(stage: Stage) -> ExitStatus {
        match stage {
            Stage::SetAffinity | Stage::ReadAffinity | Stage::AffinityMismatch => {
                ExitStatus::CpuAffinity
            }
            Stage::SetMemoryPolicy | Stage::ReadMemoryPolicy | Stage::MemoryPolicyMismatch => {
                ExitStatus::MemoryPolicy
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_map_to_systemds_numbers() {
        // Every stage, so a stage added to pinctl-sys gets a number here (the match is
        // exhaustive) and a test.
        for stage in [Stage::SetAffinity, Stage::ReadAffinity, Stage::AffinityMismatch] {
            assert_eq!(ExitStatus::from(stage).code(), 215, "{stage:?}");
        }
        for stage in [Stage::SetMemoryPolicy, Stage::ReadMemoryPolicy, Stage::MemoryPolicyMismatch]
        {
            assert_eq!(ExitStatus::from(stage).code(), 242, "{stage:?}");
        }
        for code in [126, 127, 215, 242] {
            assert!(ExitStatus::is_permanent(code), "{code}");
        }
        for code in [0, 1, 2, 137, 143] {
            assert!(!ExitStatus::is_permanent(code), "{code}");
        }
    }
}
