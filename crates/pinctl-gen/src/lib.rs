//! Generates pinctl's man pages (one per command, clap_mangen) and its bash, zsh and fish
//! completions (clap_complete) from the clap definition, [`pinctl::command`]. The outputs are
//! committed (`doc/man/`, `completions/`) so that packages and `cargo install` users get them
//! without running this; the tests regenerate them and fail when a committed copy is stale.
//!
//! This is a separate crate so that the generators are never linked into `pinctl` itself,
//! whose start-up time matters. It must not be a dependency of anything that ships.

use std::io;
use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// Where the man pages go, relative to the repository root.
pub const MAN_DIR: &str = "doc/man";
/// Where the completions go, relative to the repository root.
pub const COMPLETIONS_DIR: &str = "completions";

/// One generated file: its path relative to the repository root and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub path: PathBuf,
    pub contents: Vec<u8>,
}

/// Every file, in a fixed order: `doc/man/pinctl.1` and `doc/man/pinctl-<command>.1` for each
/// visible subcommand, then `completions/pinctl.bash`, `completions/_pinctl` (zsh) and
/// `completions/pinctl.fish`.
pub fn generate() -> io::Result<Vec<Generated>> {
    let mut cmd = pinctl::command().disable_help_subcommand(true);
    cmd.build();
    let mut files = Vec::new();
    man_pages(&cmd, &mut files)?;
    for (shell, name) in
        [(Shell::Bash, "pinctl.bash"), (Shell::Zsh, "_pinctl"), (Shell::Fish, "pinctl.fish")]
    {
        let mut contents = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), "pinctl", &mut contents);
        files.push(Generated { path: Path::new(COMPLETIONS_DIR).join(name), contents });
    }
    Ok(files)
}

/// The page of `cmd`, then those of its visible subcommands (clap names a built subcommand
/// `pinctl-topology`, which becomes the page's title and file name).
fn man_pages(cmd: &clap::Command, files: &mut Vec<Generated>) -> io::Result<()> {
    let version = cmd.get_version().unwrap_or_default();
    let man = clap_mangen::Man::new(cmd.clone()).source(format!("pinctl {version}"));
    let mut contents = Vec::new();
    man.render(&mut contents)?;
    files.push(Generated { path: Path::new(MAN_DIR).join(man.get_filename()), contents });
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        man_pages(sub, files)?;
    }
    Ok(())
}

/// Writes `files` under `root`, and removes any other file from the directories they go to
/// (a page of a command that no longer exists), since this tool owns those directories.
pub fn write(root: &Path, files: &[Generated]) -> io::Result<()> {
    for dir in [MAN_DIR, COMPLETIONS_DIR] {
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let rel = path.strip_prefix(root).unwrap_or(&path);
            if path.is_file() && !files.iter().any(|f| f.path == rel) {
                std::fs::remove_file(&path)?;
            }
        }
    }
    for f in files {
        std::fs::write(root.join(&f.path), &f.contents)?;
    }
    Ok(())
}
