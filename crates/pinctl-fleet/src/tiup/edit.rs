//! Writing `numa_node`/`numa_cores` into a TiUP topology's text, line by line: a value already
//! written is replaced in its quoting with what follows it (a comment) kept; a missing one is
//! inserted right after the instance's `host` line at its indent; a `numa_cores` the plan no
//! longer wants is removed. Every other byte stays as it was, and the result is read back to
//! prove it.

use std::collections::BTreeMap;

use super::read::{Field, Instance, Style};

/// What one instance's NUMA keys should say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaFields {
    /// `numa_node`: the nodes, as numactl's `--cpunodebind` reads them (`0`, `0,1`).
    pub node: String,
    /// `numa_cores`: the CPUs when the instance has fewer than its nodes hold; `None` removes
    /// the key.
    pub cores: Option<String>,
}

/// Why the text could not be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct EditError {
    pub line: usize,
    pub message: String,
}

/// What happens to one line.
#[derive(Debug, Default)]
struct LineEdit {
    replace: Option<String>,
    delete: bool,
    insert_after: Vec<String>,
}

/// `text` with each instance's NUMA keys set as `wanted` says (instances not in it are left
/// alone).
pub fn apply(text: &str, wanted: &[(&Instance, NumaFields)]) -> Result<String, EditError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut edits: BTreeMap<usize, LineEdit> = BTreeMap::new();
    for (instance, numa) in wanted {
        if let Some(why) = &instance.not_editable {
            return Err(EditError {
                line: instance.host.line,
                message: format!("cannot edit this instance: {why}"),
            });
        }
        let indent = " ".repeat(instance.host.key_column);
        let mut inserted = Vec::new();
        for (key, value) in [("numa_node", Some(&numa.node)), ("numa_cores", numa.cores.as_ref())] {
            match (instance.get(key), value) {
                (Some(old), Some(new)) if old.value == *new => {}
                (Some(old), Some(new)) => {
                    let line = line_of(&lines, old.line)?;
                    let edit = edits.entry(old.line).or_default();
                    edit.replace = Some(replaced(line, old, new)?);
                }
                (Some(old), None) => edits.entry(old.line).or_default().delete = true,
                (None, Some(new)) => inserted.push(format!("{indent}{key}: \"{new}\"")),
                (None, None) => {}
            }
        }
        edits.entry(instance.host.line).or_default().insert_after.extend(inserted);
    }
    Ok(rebuild(&lines, &edits))
}

fn line_of<'a>(lines: &[&'a str], line: usize) -> Result<&'a str, EditError> {
    lines
        .get(line.wrapping_sub(1))
        .copied()
        .ok_or(EditError { line, message: "past the end of the file".into() })
}

/// `line` with the scalar `old` replaced by `new` in the same quoting.
fn replaced(line: &str, old: &Field, new: &str) -> Result<String, EditError> {
    let fail = |message: &str| EditError { line: old.line, message: message.to_string() };
    let start = line
        .char_indices()
        .nth(old.column)
        .map(|(b, _)| b)
        .ok_or_else(|| fail("the value is not where the parser said"))?;
    let rest = &line[start..];
    let (written, end) = match old.style {
        Style::Double => (format!("\"{new}\""), quoted_end(rest, '"')),
        Style::Single => (format!("'{new}'"), quoted_end(rest, '\'')),
        Style::Plain => (new.to_string(), Some(plain_end(rest))),
        Style::Block => return Err(fail("a block scalar (`|`, `>`) is not edited")),
    };
    let end = end.ok_or_else(|| fail("the quoted value does not end on its line"))?;
    Ok(format!("{}{written}{}", &line[..start], &rest[end..]))
}

/// The byte just past the closing quote of the quoted scalar that `s` starts with.
fn quoted_end(s: &str, quote: char) -> Option<usize> {
    let mut chars = s.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if quote == '"' => {
                chars.next();
            }
            c if c == quote => {
                // `''` inside single quotes is a quote.
                if quote == '\'' && chars.peek().is_some_and(|&(_, n)| n == '\'') {
                    chars.next();
                    continue;
                }
                return Some(i + 1);
            }
            _ => {}
        }
    }
    None
}

/// The end of the plain scalar that `s` starts with: before a ` #` comment, the line's end,
/// or trailing blanks.
fn plain_end(s: &str) -> usize {
    let body = s.trim_end_matches(['\n', '\r']);
    let cut = body.find(" #").or_else(|| body.find("\t#")).unwrap_or(body.len());
    body[..cut].trim_end().len()
}

/// The lines with their edits, each keeping its own line ending; inserted lines take the
/// ending of the line they follow.
fn rebuild(lines: &[&str], edits: &BTreeMap<usize, LineEdit>) -> String {
    let mut out =
        String::with_capacity(lines.iter().map(|l| l.len()).sum::<usize>() + edits.len() * 32);
    for (k, line) in lines.iter().enumerate() {
        let Some(edit) = edits.get(&(k + 1)) else {
            out.push_str(line);
            continue;
        };
        let ending = if line.ends_with("\r\n") { "\r\n" } else { "\n" };
        if !edit.delete {
            match &edit.replace {
                Some(new) => out.push_str(new),
                None => out.push_str(line),
            }
        }
        if !edit.insert_after.is_empty() && !out.ends_with('\n') {
            out.push_str(ending);
        }
        for new in &edit.insert_after {
            out.push_str(new);
            out.push_str(ending);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::tiup::read::read;

    fn fields(node: &str, cores: Option<&str>) -> NumaFields {
        NumaFields { node: node.into(), cores: cores.map(String::from) }
    }

    #[test]
    fn inserts_after_host_at_its_indent() {
        let text = "tikv_servers:\n  - host: a # first\n    port: 1\n  -   host: b\n";
        let t = read(Path::new("t"), text).unwrap();
        let wanted =
            [(&t.instances[0], fields("0", Some("0-3"))), (&t.instances[1], fields("1,2", None))];
        assert_eq!(
            apply(text, &wanted).unwrap(),
            "tikv_servers:\n  - host: a # first\n    numa_node: \"0\"\n    numa_cores: \"0-3\"\n    port: 1\n  -   host: b\n      numa_node: \"1,2\"\n"
        );
    }

    #[test]
    fn replaces_in_place_keeping_quotes_and_comments() {
        let text = "tikv_servers:\n  - host: a\n    numa_node: '0'   # by hand\n    numa_cores: \"1-2\"\n    port: 1\n  - host: b\n    numa_node: 3\n";
        let t = read(Path::new("t"), text).unwrap();
        let wanted = [(&t.instances[0], fields("1", None)), (&t.instances[1], fields("2", None))];
        assert_eq!(
            apply(text, &wanted).unwrap(),
            "tikv_servers:\n  - host: a\n    numa_node: '1'   # by hand\n    port: 1\n  - host: b\n    numa_node: 2\n"
        );
    }

    #[test]
    fn the_last_line_without_an_ending_and_crlf() {
        let text = "tikv_servers:\r\n  - host: a";
        let t = read(Path::new("t"), text).unwrap();
        assert_eq!(
            apply(text, &[(&t.instances[0], fields("0", None))]).unwrap(),
            "tikv_servers:\r\n  - host: a\n    numa_node: \"0\"\n"
        );
        let text = "tikv_servers:\r\n  - host: a\r\n";
        let t = read(Path::new("t"), text).unwrap();
        assert_eq!(
            apply(text, &[(&t.instances[0], fields("0", None))]).unwrap(),
            "tikv_servers:\r\n  - host: a\r\n    numa_node: \"0\"\r\n"
        );
    }

    #[test]
    fn quoted_values_end_where_yaml_says() {
        assert_eq!(quoted_end(r#""a\"b" # c"#, '"'), Some(6));
        assert_eq!(quoted_end("'it''s' x", '\''), Some(7));
        assert_eq!(quoted_end("'open", '\''), None);
        assert_eq!(plain_end("0,1   # note\n"), 3);
        assert_eq!(plain_end("0\n"), 1);
    }

    #[test]
    fn flow_instances_are_refused() {
        let text = "pd_servers:\n  - {host: a}\n";
        let t = read(Path::new("t"), text).unwrap();
        let err = apply(text, &[(&t.instances[0], fields("0", None))]).unwrap_err();
        assert!(err.to_string().contains("flow mapping"), "{err}");
    }
}
