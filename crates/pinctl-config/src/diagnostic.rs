//! Diagnostics that point into the service file, rendered the way rustc, cargo, just and
//! nextest render them:
//!
//! ```text
//! error: unknown field `memory-polcy`, expected one of `command`, `instances`, ...
//!   --> pinctl.toml:12:1
//!    |
//! 12 | memory-polcy = "bind"
//!    | ^^^^^^^^^^^^
//!    = help: did you mean `memory-policy`?
//! ```
//!
//! The renderer is written here rather than taken from `annotate-snippets` (the crate rustc
//! and cargo use) because pinctl only needs single-line carets, and because the rendered text
//! is a tested contract (the snapshots in tests/bad/ are compared byte for byte): a renderer
//! of our own cannot change its spacing under us in a dependency update, and costs no
//! dependency.

use std::fmt;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pinctl_topology::text::escaped;

/// A byte range into the service file's text.
pub type Span = Range<usize>;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The file cannot be used as it is.
    Error,
    /// The file can be used, but probably does not say what was meant.
    Warning,
}

impl Severity {
    /// `error` or `warning`, as rendered.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The text of a service file with its line index, shared by every diagnostic and span of one
/// parse so that machine-dependent checks made later can still show the offending line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    path: PathBuf,
    text: Arc<str>,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// Indexes `text`, read from `path` (the path is only used in messages).
    pub fn new(path: &Path, text: &str) -> SourceFile {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceFile { path: path.to_path_buf(), text: Arc::from(text), line_starts }
    }

    /// The path as given to [`SourceFile::new`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text a span covers (empty when the span is out of range).
    pub fn slice(&self, span: &Span) -> &str {
        self.text.get(span.clone()).unwrap_or("")
    }

    /// The location of a span: 1-based line and column (columns count characters), the line's
    /// text and where the carets go. A long line is shown cut to 100 characters on each side
    /// of the span (and the span to 200), `...` marking each cut: every
    /// diagnostic holds its own copy of the line it shows, and thousands of them on one long
    /// line (an array of 30,000 arguments, each with a misspelt placeholder) held a copy of the
    /// whole line each, gigabytes for a file of 240 KB.
    pub fn locate(&self, span: &Span) -> Location {
        let start = floor_char_boundary(&self.text, span.start.min(self.text.len()));
        let end = floor_char_boundary(&self.text, span.end.clamp(start, self.text.len()));
        let line_index = self.line_starts.partition_point(|&s| s <= start) - 1;
        let line_start = self.line_starts[line_index];
        let line_end =
            self.line_starts.get(line_index + 1).map_or(self.text.len(), |&next| next - 1);
        let raw_line = &self.text[line_start..line_end];
        let raw_line = raw_line.strip_suffix('\r').unwrap_or(raw_line);
        let line_end = line_start + raw_line.len();
        let before = &self.text[line_start..start];
        let covered = &self.text[start..end.min(line_end).max(start)];
        let after = &self.text[(start + covered.len())..line_end];
        let (before_shown, cut_before) = last_chars(before, LINE_CONTEXT);
        let (covered_shown, cut_covered) = first_chars(covered, MAX_CARETS);
        let (after_shown, cut_after) = match cut_covered {
            true => ("", true),
            false => first_chars(after, LINE_CONTEXT),
        };
        let cut = |on: bool| if on { "..." } else { "" };
        let line_text = [cut(cut_before), before_shown, covered_shown, after_shown, cut(cut_after)]
            .concat()
            .replace('\t', "    ");
        // Tabs are shown as four spaces (as rustc does) so the carets line up on any terminal.
        let caret_start = cut(cut_before).len() + display_width(before_shown);
        let caret_len = display_width(covered_shown).max(1);
        Location {
            path: self.path.clone(),
            line: line_index + 1,
            column: before.chars().count() + 1,
            line_text,
            caret_start,
            caret_len,
        }
    }
}

/// Characters of the line shown on each side of a diagnostic's span; a longer line is cut.
const LINE_CONTEXT: usize = 100;

/// Carets shown under a span at most; a longer span is cut.
const MAX_CARETS: usize = 200;

/// The last `n` characters of `s`, and whether any were left out.
fn last_chars(s: &str, n: usize) -> (&str, bool) {
    match s.char_indices().rev().nth(n.saturating_sub(1)) {
        Some((i, _)) if n > 0 => (&s[i..], i > 0),
        _ if n == 0 => ("", !s.is_empty()),
        _ => (s, false),
    }
}

/// The first `n` characters of `s`, and whether any were left out.
fn first_chars(s: &str, n: usize) -> (&str, bool) {
    match s.char_indices().nth(n) {
        Some((i, _)) => (&s[..i], true),
        None => (s, false),
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn display_width(s: &str) -> usize {
    s.chars().map(|c| if c == '\t' { 4 } else { 1 }).sum()
}

/// Where in the file a diagnostic points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    path: PathBuf,
    line: usize,
    column: usize,
    line_text: String,
    caret_start: usize,
    caret_len: usize,
}

impl Location {
    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// 1-based line.
    pub fn line(&self) -> usize {
        self.line
    }
    /// 1-based column, in characters.
    pub fn column(&self) -> usize {
        self.column
    }
    /// The offending line, tabs expanded.
    pub fn line_text(&self) -> &str {
        &self.line_text
    }
}

/// One problem found in a service file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// One line, lowercase, user values in backticks.
    pub message: String,
    /// Where it is; `None` for problems of the whole file (it cannot be read, it is empty).
    pub location: Option<Location>,
    /// The path when there is no location, so the file is still named.
    pub path: Option<PathBuf>,
    /// Extra facts (`= note: ...`), in order.
    pub notes: Vec<String>,
    /// How to fix it (`= help: ...`).
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic pointing at `span` of `file`.
    pub fn at(
        file: &SourceFile,
        span: &Span,
        severity: Severity,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            message: message.into(),
            location: Some(file.locate(span)),
            path: Some(file.path.clone()),
            notes: Vec::new(),
            help: None,
        }
    }

    /// The diagnostic on one line: `FILE:LINE:COLUMN: message`, or `FILE: message` when it
    /// has no place (a plan's `config_warnings`, a fleet host's block).
    pub fn one_line(&self) -> String {
        match (&self.location, &self.path) {
            (Some(l), _) => {
                format!("{}:{}:{}: {}", l.path().display(), l.line(), l.column(), self.message)
            }
            (None, Some(path)) => format!("{}: {}", path.display(), self.message),
            (None, None) => self.message.clone(),
        }
    }

    /// A diagnostic about a whole file.
    pub fn for_file(path: &Path, severity: Severity, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity,
            message: message.into(),
            location: None,
            path: Some(path.to_path_buf()),
            notes: Vec::new(),
            help: None,
        }
    }

    /// A diagnostic with nowhere to point (a config built in code, not parsed).
    pub fn unlocated(severity: Severity, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity,
            message: message.into(),
            location: None,
            path: None,
            notes: Vec::new(),
            help: None,
        }
    }

    /// Adds a `= note:` line.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Sets the `= help:` line.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Whether this is an error (as opposed to a warning).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The rendered text, ending in a newline. `color` adds ANSI colours in rustc's scheme;
    /// without it the output is plain and byte-for-byte stable.
    pub fn render(&self, color: bool) -> String {
        let paint = Paint { on: color };
        let mut out = String::new();
        let level_style = match self.severity {
            Severity::Error => RED,
            Severity::Warning => YELLOW,
        };
        let _ = writeln!(
            out,
            "{}{}",
            paint.wrap(level_style, &format!("{}:", self.severity.name())),
            paint.wrap(BOLD, &format!(" {}", self.message))
        );
        let gutter = self.location.as_ref().map_or(1, |l| l.line.to_string().len());
        let pad = " ".repeat(gutter);
        match (&self.location, &self.path) {
            (Some(loc), _) => {
                let _ = writeln!(
                    out,
                    "{pad}{} {}:{}:{}",
                    paint.wrap(BLUE, "-->"),
                    escaped(&loc.path.display().to_string()),
                    loc.line,
                    loc.column
                );
                let bar = paint.wrap(BLUE, "|");
                let _ = writeln!(out, "{pad} {bar}");
                let _ = writeln!(
                    out,
                    "{} {bar}{}{}",
                    paint.wrap(BLUE, &loc.line.to_string()),
                    if loc.line_text.is_empty() { "" } else { " " },
                    loc.line_text
                );
                let _ = writeln!(
                    out,
                    "{pad} {bar} {}{}",
                    " ".repeat(loc.caret_start),
                    paint.wrap(level_style, &"^".repeat(loc.caret_len))
                );
            }
            (None, Some(path)) => {
                let shown = escaped(&path.display().to_string());
                let _ = writeln!(out, "{pad}{} {shown}", paint.wrap(BLUE, "-->"));
            }
            (None, None) => {}
        }
        for note in &self.notes {
            let _ = writeln!(out, "{pad} {} note: {note}", paint.wrap(BLUE, "="));
        }
        if let Some(help) = &self.help {
            let _ = writeln!(out, "{pad} {} help: {help}", paint.wrap(BLUE, "="));
        }
        out
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

const RED: &str = "\x1b[1;31m";
const YELLOW: &str = "\x1b[1;33m";
const BLUE: &str = "\x1b[1;34m";
const BOLD: &str = "\x1b[1m";

struct Paint {
    on: bool,
}

impl Paint {
    fn wrap(&self, style: &str, text: &str) -> String {
        if self.on { format!("{style}{text}\x1b[0m") } else { text.to_string() }
    }
}

/// Renders diagnostics one after another, separated by blank lines, followed by cargo's
/// summary line when there are errors.
pub fn render_all(diagnostics: &[Diagnostic], path: Option<&Path>, color: bool) -> String {
    let mut out = String::new();
    for (i, d) in diagnostics.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&d.render(color));
    }
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    if errors > 1 || (errors == 1 && warnings > 0) {
        let what = match path {
            Some(p) => format!("`{}`", escaped(&p.display().to_string())),
            None => "the service file".to_string(),
        };
        let mut summary =
            format!("{what} has {errors} error{}", if errors == 1 { "" } else { "s" });
        if warnings > 0 {
            let _ =
                write!(summary, " and {warnings} warning{}", if warnings == 1 { "" } else { "s" });
        }
        let _ = writeln!(
            out,
            "\n{}{}",
            Paint { on: color }.wrap(RED, "error:"),
            Paint { on: color }.wrap(BOLD, &format!(" {summary}"))
        );
    }
    out
}

/// A service file that cannot be used: every problem found in it, at once.
///
/// Its `Display` is the complete report (every diagnostic with its snippet), meant to be
/// printed as is, without an `error:` prefix of the caller's.
#[derive(Debug)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// Errors first found in file order, then any warnings found on the way.
    pub diagnostics: Vec<Diagnostic>,
    /// The I/O error when the file could not be read.
    io: Option<std::io::Error>,
}

impl ConfigError {
    pub(crate) fn from_diagnostics(path: &Path, diagnostics: Vec<Diagnostic>) -> ConfigError {
        ConfigError { path: path.to_path_buf(), diagnostics, io: None }
    }

    /// The file at `path` could not be read.
    pub fn io(path: &Path, error: std::io::Error) -> ConfigError {
        let diagnostic = Diagnostic::for_file(
            path,
            Severity::Error,
            format!("cannot read `{}`: {error}", path.display()),
        );
        ConfigError { path: path.to_path_buf(), diagnostics: vec![diagnostic], io: Some(error) }
    }

    /// The number of errors (not warnings).
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// The report, optionally coloured.
    pub fn render(&self, color: bool) -> String {
        render_all(&self.diagnostics, Some(&self.path), color)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.render(false).trim_end_matches('\n'))
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_rustc() {
        let text = "[service.a]\n\n\n\n\n\n\n\n\n\n\nmemory-polcy = \"bind\"\n";
        let file = SourceFile::new(Path::new("pinctl.toml"), text);
        let start = text.find("memory-polcy").unwrap();
        let d = Diagnostic::at(&file, &(start..start + 12), Severity::Error, "unknown field")
            .with_help("did you mean `memory-policy`?");
        assert_eq!(
            d.render(false),
            "error: unknown field\n  --> pinctl.toml:12:1\n   |\n12 | memory-polcy = \"bind\"\n   | ^^^^^^^^^^^^\n   = help: did you mean `memory-policy`?\n"
        );
    }

    #[test]
    fn columns_count_characters_and_tabs_expand() {
        let text = "a = \"é\"\tx = 1\r\nb = 2";
        let file = SourceFile::new(Path::new("f.toml"), text);
        let x = text.find('x').unwrap();
        let loc = file.locate(&(x..x + 1));
        assert_eq!((loc.line(), loc.column()), (1, 9));
        assert_eq!(loc.line_text(), "a = \"é\"    x = 1");
        assert_eq!(loc.caret_start, 11);
        let b = text.find('b').unwrap();
        let loc = file.locate(&(b..text.len()));
        assert_eq!((loc.line(), loc.column(), loc.caret_len), (2, 1, 5));
    }

    #[test]
    fn span_past_the_end_points_at_the_end() {
        let file = SourceFile::new(Path::new("f.toml"), "a = ");
        let loc = file.locate(&(4..9));
        assert_eq!((loc.line(), loc.column(), loc.caret_len), (1, 5, 1));
    }

    #[test]
    fn multi_line_span_underlines_its_first_line() {
        let text = "a = [\n  1,\n]\n";
        let file = SourceFile::new(Path::new("f.toml"), text);
        let loc = file.locate(&(4..text.len() - 1));
        assert_eq!((loc.line(), loc.caret_start, loc.caret_len), (1, 4, 1));
    }

    #[test]
    fn a_long_line_is_cut_around_the_span() {
        let args: Vec<String> = (0..2000).map(|i| format!("\"a{i}\"")).collect();
        let text = format!("command = [{}]\n", args.join(", "));
        let file = SourceFile::new(Path::new("f.toml"), &text);
        let at = text.find("\"a1000\"").unwrap();
        let loc = file.locate(&(at..at + 7));
        assert_eq!(loc.column(), at + 1, "the column still counts the whole line");
        let shown = loc.line_text();
        assert!(shown.starts_with("...") && shown.ends_with("..."), "{shown}");
        assert_eq!(shown.chars().count(), 3 + LINE_CONTEXT + 7 + LINE_CONTEXT + 3);
        assert_eq!(&shown[loc.caret_start..loc.caret_start + loc.caret_len], "\"a1000\"");
        // Near the start nothing is cut before; a span longer than the carets shown is cut.
        let loc = file.locate(&(0..text.len() - 1));
        assert_eq!((loc.caret_start, loc.caret_len), (0, MAX_CARETS));
        assert_eq!(loc.line_text(), format!("{}...", &text[..MAX_CARETS]));
        // A short line is shown whole.
        let file = SourceFile::new(Path::new("f.toml"), "cpus = 0\n");
        assert_eq!(file.locate(&(7..8)).line_text(), "cpus = 0");
    }

    #[test]
    fn colour_only_when_asked() {
        let d = Diagnostic::unlocated(Severity::Warning, "w");
        assert_eq!(d.render(false), "warning: w\n");
        assert!(d.render(true).contains("\x1b[1;33m"));
    }
}
