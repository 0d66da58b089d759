//! Every `$ pinctl ...` example in docs/planning.md is the real output of the binary: each
//! command in a code block is run from the repository root and its stdout and stderr must
//! match the lines that follow it, up to the next command or the end of the block.

use crate::support::{pinctl, root};

#[test]
fn planning_doc_examples_are_current() {
    let doc = std::fs::read_to_string(root().join("docs/planning.md")).unwrap();
    let mut examples = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            match block.take() {
                Some(lines) => examples.extend(split_commands(&lines)),
                None => block = Some(Vec::new()),
            }
        } else if let Some(lines) = block.as_mut() {
            lines.push(line);
        }
    }
    assert!(examples.len() >= 10, "found only {} examples", examples.len());
    for (command, expected) in examples {
        let args: Vec<&str> = command.split_whitespace().collect();
        let out = pinctl().args(&args).output().unwrap();
        let actual = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            actual.trim_end(),
            expected.trim_end(),
            "`pinctl {command}` no longer prints what docs/planning.md shows"
        );
    }
}

/// (arguments, expected output) for each `$ pinctl` line of a block; the block's common
/// indentation is removed first.
fn split_commands(lines: &[&str]) -> Vec<(String, String)> {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out: Vec<(String, String)> = Vec::new();
    for line in lines {
        let line = line.get(indent..).unwrap_or("");
        if let Some(command) = line.strip_prefix("$ pinctl ") {
            out.push((command.to_string(), String::new()));
        } else if let Some((_, expected)) = out.last_mut() {
            expected.push_str(line);
            expected.push('\n');
        }
    }
    out
}
