//! Every exit status pinctl itself uses, in one place (docs/exit-codes.md is the user's copy of
//! this table; a test in the binary keeps the two in step). A command that execs another
//! program exits with that program's status; these are pinctl's own failures, and the
//! statuses the supervisor gives an instance that failed before its program ran (systemd's
//! numbers for the same steps), with what follows from each: whether a restart can fix it.

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
    /// An instance's `working-dir` does not exist (systemd's `EXIT_CHDIR`).
    WorkingDir = 200,
    /// An instance could not be executed for another reason (systemd's `EXIT_EXEC`).
    Exec = 203,
    /// An instance's `output` file could not be opened as its user (systemd's `EXIT_STDOUT`).
    Output = 209,
    /// Setting or verifying the CPU affinity failed (systemd's `EXIT_CPU_AFFINITY`).
    CpuAffinity = 215,
    /// An instance's `group` is unknown or could not be set (systemd's `EXIT_GROUP`).
    Group = 216,
    /// An instance's `user` is unknown or could not be set (systemd's `EXIT_USER`).
    User = 217,
    /// Setting or verifying the memory policy failed (systemd's `EXIT_NUMA_POLICY`).
    MemoryPolicy = 242,
}

impl ExitStatus {
    /// Every status, in the order of docs/exit-codes.md.
    pub const ALL: [ExitStatus; 11] = [
        ExitStatus::Failure,
        ExitStatus::Usage,
        ExitStatus::NotExecutable,
        ExitStatus::NotFound,
        ExitStatus::WorkingDir,
        ExitStatus::Exec,
        ExitStatus::Output,
        ExitStatus::CpuAffinity,
        ExitStatus::Group,
        ExitStatus::User,
        ExitStatus::MemoryPolicy,
    ];

    /// The status whose number is `code`, when it is one of pinctl's.
    pub fn of_code(code: i32) -> Option<ExitStatus> {
        ExitStatus::ALL.into_iter().find(|s| i32::from(s.code()) == code)
    }

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
            ExitStatus::WorkingDir => "working folder",
            ExitStatus::Exec => "exec",
            ExitStatus::Output => "output",
            ExitStatus::CpuAffinity => "CPU affinity",
            ExitStatus::Group => "group",
            ExitStatus::User => "user",
            ExitStatus::MemoryPolicy => "memory policy",
        }
    }

    /// systemd's name for the step of a start that failed with this status, as its log says
    /// "Failed at step CHDIR"; `None` for the statuses of pinctl's own commands.
    pub fn start_step(self) -> Option<&'static str> {
        Some(match self {
            ExitStatus::Failure | ExitStatus::Usage => return None,
            ExitStatus::NotExecutable | ExitStatus::NotFound | ExitStatus::Exec => "EXEC",
            ExitStatus::WorkingDir => "CHDIR",
            ExitStatus::Output => "STDOUT",
            ExitStatus::CpuAffinity => "CPU_AFFINITY",
            ExitStatus::Group => "GROUP",
            ExitStatus::User => "USER",
            ExitStatus::MemoryPolicy => "NUMA_POLICY",
        })
    }

    /// Whether an instance that exited with `code` failed in a way a restart cannot fix: its
    /// placement was refused or its command cannot run. A supervisor does not restart these.
    pub fn is_permanent(code: i32) -> bool {
        ExitStatus::of_code(code).is_some_and(|s| {
            matches!(
                s,
                ExitStatus::NotExecutable
                    | ExitStatus::NotFound
                    | ExitStatus::CpuAffinity
                    | ExitStatus::MemoryPolicy
            )
        })
    }

    /// Whether a start that failed with `code` before its program ran would fail the same way
    /// if tried again: a permanent status, or a working folder, exec, output file, group or user
    /// that is wrong. A start short of resources (status 1: no process or descriptor for now)
    /// is tried again.
    pub fn fails_every_start(code: i32) -> bool {
        ExitStatus::is_permanent(code)
            || ExitStatus::of_code(code).is_some_and(|s| {
                matches!(
                    s,
                    ExitStatus::WorkingDir
                        | ExitStatus::Exec
                        | ExitStatus::Output
                        | ExitStatus::Group
                        | ExitStatus::User
                )
            })
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
        for code in [0, 1, 2, 137, 143, 200, 203, 209, 216, 217] {
            assert!(!ExitStatus::is_permanent(code), "{code}");
        }
        for code in [126, 127, 200, 203, 209, 215, 216, 217, 242] {
            assert!(ExitStatus::fails_every_start(code), "{code}");
        }
        for code in [0, 1, 2, 137] {
            assert!(!ExitStatus::fails_every_start(code), "{code}");
        }
        for s in ExitStatus::ALL {
            assert_eq!(ExitStatus::of_code(i32::from(s.code())), Some(s));
        }
    }
}
