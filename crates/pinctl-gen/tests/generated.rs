//! The committed man pages and completions are what the command line generates today, and
//! every page renders with `man -l` (man-db, which scripts/test installs).

use std::path::{Path, PathBuf};
use std::process::Command;

use pinctl_gen::{COMPLETIONS_DIR, Generated, MAN_DIR, OWNED_DIRS, SCHEMA_DIR, generate};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const REGENERATE: &str = "run `cargo run -p pinctl-gen -- .` in the repository root and commit";

#[test]
fn committed_copies_are_current() {
    let root = repo_root();
    let files = generate().unwrap();
    let mut stale = Vec::new();
    for Generated { path, contents } in &files {
        match std::fs::read(root.join(path)) {
            Ok(committed) if committed == *contents => {}
            Ok(_) => stale.push(format!("`{}` differs", path.display())),
            Err(e) => stale.push(format!("`{}` cannot be read: {e}", path.display())),
        }
    }
    for dir in OWNED_DIRS {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(&root).unwrap();
            if !files.iter().any(|f| f.path == rel) {
                stale.push(format!("`{}` is not generated any more", rel.display()));
            }
        }
    }
    assert!(stale.is_empty(), "{}: {REGENERATE}", stale.join(", "));
}

#[test]
fn there_is_a_page_per_command_and_a_completion_per_shell() {
    let names: Vec<String> =
        generate().unwrap().iter().map(|f| f.path.display().to_string()).collect();
    for command in ["topology", "check", "plan", "exec", "probe"] {
        assert!(names.contains(&format!("{MAN_DIR}/pinctl-{command}.1")), "{names:?}");
    }
    assert!(names.contains(&format!("{MAN_DIR}/pinctl.1")), "{names:?}");
    for file in ["pinctl.bash", "_pinctl", "pinctl.fish"] {
        assert!(names.contains(&format!("{COMPLETIONS_DIR}/{file}")), "{names:?}");
    }
    for file in ["topology.schema.json", "plan.schema.json", "probe.schema.json"] {
        assert!(names.contains(&format!("{SCHEMA_DIR}/{file}")), "{names:?}");
    }
}

/// The schemas state the contract's points: a version, closed objects, device nodes as arrays.
#[test]
fn schemas_pin_the_version_and_the_shape_of_node_sets() {
    for f in generate().unwrap().iter().filter(|f| f.path.starts_with(SCHEMA_DIR)) {
        let schema: serde_json::Value = serde_json::from_slice(&f.contents).unwrap();
        let name = f.path.display();
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema", "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}");
        assert!(schema["required"].as_array().unwrap().contains(&"schema_version".into()));
        let version = schema["properties"]["schema_version"]["$ref"].as_str().unwrap();
        let version = &schema["$defs"][version.trim_start_matches("#/$defs/")];
        // The plan's document is at version 2 (issue 26: sharing groups named once).
        let want =
            if f.path.ends_with("plan.schema.json") { pinctl_plan::PLAN_SCHEMA_VERSION } else { 1 };
        assert_eq!(version["const"], want, "{name}");
    }
    let topology =
        generate().unwrap().into_iter().find(|f| f.path.ends_with("topology.schema.json"));
    let topology: serde_json::Value = serde_json::from_slice(&topology.unwrap().contents).unwrap();
    assert_eq!(topology["$defs"]["Device"]["properties"]["nodes"]["type"], "array");
}

#[test]
fn completions_know_every_subcommand_and_option() {
    for f in generate().unwrap().iter().filter(|f| f.path.starts_with(COMPLETIONS_DIR)) {
        let text = String::from_utf8(f.contents.clone()).unwrap();
        for word in ["topology", "check", "plan", "exec", "--json", "--topology"] {
            assert!(text.contains(word), "`{}` lacks `{word}`", f.path.display());
        }
    }
}

#[test]
fn man_renders_every_page_without_warnings() {
    let root = repo_root();
    for f in generate().unwrap().iter().filter(|f| f.path.starts_with(MAN_DIR)) {
        let page = root.join(&f.path);
        let out = Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l"])
            .arg(&page)
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run `man` ({e}): install man-db (scripts/test does)")
            });
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "man -l {}: {}\n{stderr}", page.display(), out.status);
        assert!(stderr.trim().is_empty(), "man -l {} warns:\n{stderr}", page.display());
        let name = f.path.file_stem().unwrap().to_string_lossy().into_owned();
        assert!(stdout.contains("NAME") && stdout.contains("SYNOPSIS"), "{stdout}");
        assert!(stdout.contains(&name), "the page of `{name}` does not name it:\n{stdout}");
    }
}
