//! Generates pinctl's man pages (one per command, clap_mangen) and its bash, zsh and fish
//! completions (clap_complete) from the clap definition, [`pinctl::command`], and the JSON
//! Schemas of `pinctl topology --json`, `pinctl plan --json` and `pinctl probe --json`
//! (schemars) from the Rust types
//! they serialize. The outputs are committed (`doc/man/`, `completions/`, `docs/schema/`) so
//! that packages, `cargo install` users and consumers of the JSON get them without running
//! this; the tests regenerate them and fail when a committed copy is stale.
//!
//! This is a separate crate so that the generators are never linked into `pinctl` itself,
//! whose start-up time matters. It must not be a dependency of anything that ships.
#![forbid(unsafe_code)]

use std::io;
use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// Where the man pages go, relative to the repository root.
pub const MAN_DIR: &str = "doc/man";
/// Where the completions go, relative to the repository root.
pub const COMPLETIONS_DIR: &str = "completions";
/// Where the JSON Schemas go, relative to the repository root.
pub const SCHEMA_DIR: &str = "docs/schema";
/// Every directory this tool owns: it removes files there that it no longer generates.
pub const OWNED_DIRS: [&str; 3] = [MAN_DIR, COMPLETIONS_DIR, SCHEMA_DIR];

/// One generated file: its path relative to the repository root and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub path: PathBuf,
    pub contents: Vec<u8>,
}

/// Every file, in a fixed order: `doc/man/pinctl.1` and `doc/man/pinctl-<command>.1` for each
/// visible subcommand, then `completions/pinctl.bash`, `completions/_pinctl` (zsh) and
/// `completions/pinctl.fish`, then `docs/schema/topology.schema.json`,
/// `docs/schema/plan.schema.json` and `docs/schema/probe.schema.json`.
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
    // The schemas of what pinctl writes: a field it always writes is required, even where it
    // reads documents without it (`schema_version`, `host.memory_bytes` of older snapshots).
    let written = || schemars::generate::SchemaSettings::draft2020_12().for_serialize();
    let topology = written().into_generator().into_root_schema_for::<pinctl_topology::Topology>();
    files.push(schema_file("topology", "pinctl topology --json", topology)?);
    let plan = written().into_generator().into_root_schema_for::<pinctl_plan::PlanDocument>();
    files.push(schema_file("plan", "pinctl plan --json", plan)?);
    let probe = written().into_generator().into_root_schema_for::<pinctl_probe::ProbeDocument>();
    files.push(schema_file("probe", "pinctl probe --json", probe)?);
    Ok(files)
}

/// `docs/schema/NAME.schema.json`: the schema of the types, titled by the command that writes
/// documents of it (a `--topology` snapshot is a topology document too).
fn schema_file(name: &str, command: &str, mut schema: schemars::Schema) -> io::Result<Generated> {
    schema.insert("title".into(), format!("`{command}`").into());
    let mut contents = serde_json::to_vec_pretty(&schema).map_err(io::Error::other)?;
    contents.push(b'\n');
    Ok(Generated { path: Path::new(SCHEMA_DIR).join(format!("{name}.schema.json")), contents })
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
    for dir in OWNED_DIRS {
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
