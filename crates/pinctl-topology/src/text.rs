//! Showing text that came from input (a file, a command line, a device name) in a message or a
//! table: control characters escaped so input cannot move the cursor, colour the terminal or
//! forge a line, and long values shortened so a 10 MB list gives a short error.

use std::fmt::Write;

/// How many characters of an input value a message shows before shortening it.
pub const SHOWN_CHARS: usize = 80;

/// `s` with control characters (C0, DEL, C1) and the Unicode line and paragraph separators
/// escaped as Rust writes them (`\n`, `\u{1b}`), shortened to [`SHOWN_CHARS`] characters
/// followed by `...` and the full length when longer.
pub fn shown(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(SHOWN_CHARS + 32));
    for (n, c) in s.chars().enumerate() {
        if n == SHOWN_CHARS {
            let _ = write!(out, "... ({} bytes)", s.len());
            break;
        }
        push_escaped(&mut out, c);
    }
    out
}

/// `s` with control characters escaped as in [`shown`], never shortened (for names that must
/// stay whole, such as device names in `pinctl topology`).
pub fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        push_escaped(&mut out, c);
    }
    out
}

/// `s` with control characters escaped as in [`escaped`] but line breaks kept: for messages
/// whose own text spans lines (a planner's explanation), where the values from input inside
/// them are already [`shown`].
pub fn escaped_but_newlines(s: &str) -> String {
    s.split('\n').map(escaped).collect::<Vec<_>>().join("\n")
}

/// Whether `s` holds a character [`escaped`] would change.
pub fn has_control(s: &str) -> bool {
    s.chars().any(needs_escape)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

fn push_escaped(out: &mut String, c: char) {
    if needs_escape(c) {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_shortens() {
        assert_eq!(shown("eth0"), "eth0");
        assert_eq!(shown("\u{1b}[31m\nnode 9"), "\\u{1b}[31m\\nnode 9");
        let long = "1,".repeat(5_000_000);
        let s = shown(&long);
        assert!(s.len() < 120, "{s}");
        assert!(s.ends_with("... (10000000 bytes)"), "{s}");
        assert_eq!(escaped("a\tb"), "a\\tb");
        assert_eq!(escaped_but_newlines("a\n\u{1b}b"), "a\n\\u{1b}b");
        assert!(has_control("x\u{85}") && !has_control("nvme0n1"));
    }
}
