//! From TOML text to a validated [`Config`].
//!
//! The file is read with `toml`'s span-keeping document parser (`DeTable::parse_recoverable`)
//! and walked by hand instead of through serde derives: serde stops at the first error and
//! loses the position of values that fail custom validation, while this walk keeps going and
//! records every problem with the span of the key or value at fault.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pinctl_topology::{CpuSet, MAX_ID, MemoryPolicy, NodeId, NodeSet};
use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use crate::diagnostic::{ConfigError, Diagnostic, Severity, SourceFile, Span};
use crate::interrupts::{InterruptsConfig, ServiceInterrupts};
use crate::model::{
    Config, ConfigSpans, Enforce, HostConfig, HostSpans, Instance, InstanceSize, KeepFree, Limits,
    Overcommit, RestartPolicy, Service, ServiceSpans, ShareNodes, StartLimit,
};
use crate::values;
use crate::watch::WatchConfig;

mod bounds;
mod drift;
mod service;

pub use bounds::MAX_EXPANDED_BYTES;

// Every table of the file is read through a table of (key, reader) pairs: the reader is the
// only code that reads the key, and the list of valid keys in "unknown field ..., expected
// one of ..." errors and their "did you mean" hints is made from the same table, so the two
// cannot drift apart.
//
// To add a key to `[service.NAME]` (and so to `[defaults]`): add its field to `RawService`
// and to `merge`, write a `Walker::read_*` method with the `Reader` signature that checks the
// value and stores it, add one `("the-key", Walker::read_*)` entry to `SERVICE_READERS`
// where it should appear in the list of expected keys, and carry the value into `Service`
// in `Walker::service`. A `[host]` key is the same with `HOST_READERS`, `HostConfig` and
// `HostSpans`. The public `*_KEYS` lists follow by themselves.

/// Reads the value of one key into the table's state `S`, recording every problem.
type Reader<S> = fn(&mut Walker, &mut S, &Key<'_>, &Val<'_>);

/// Top-level tables.
const TOP_READERS: &[(&str, Reader<RawDocument>)] = &[
    ("host", Walker::read_host),
    ("defaults", Walker::read_defaults),
    ("service", Walker::read_services),
];
/// Keys of `[host]`.
const HOST_READERS: &[(&str, Reader<(HostConfig, HostSpans)>)] = &[
    ("keep-free", Walker::read_keep_free),
    ("reserve-cpus", Walker::read_reserve_cpus),
    ("memory-reserve", Walker::read_memory_reserve),
    ("cpu-overcommit", Walker::read_cpu_overcommit),
    ("name", Walker::read_supervisor_name),
    ("socket", Walker::read_supervisor_path),
    ("state-file", Walker::read_supervisor_path),
    ("watch-interval", Walker::read_watch),
    ("metrics-listen", Walker::read_watch),
    ("node-free-watermark", Walker::read_watch),
    ("steer-interrupts", Walker::read_steer_interrupts),
];
/// Keys of `[service.NAME]` and `[defaults]`.
const SERVICE_READERS: &[(&str, Reader<RawService>)] = &[
    ("command", Walker::read_command),
    ("instances", Walker::read_instances),
    ("nodes", Walker::read_size),
    ("cpus", Walker::read_size),
    ("memory", Walker::read_memory),
    ("memory-policy", Walker::read_memory_policy),
    ("near", Walker::read_near),
    ("only-nodes", Walker::read_only_nodes),
    ("share-nodes", Walker::read_share_nodes),
    ("share-weight", Walker::read_share_weight),
    ("unit", Walker::read_unit),
    ("user", Walker::read_account),
    ("group", Walker::read_account),
    ("working-dir", Walker::read_working_dir),
    ("env", Walker::read_env),
    ("restart", Walker::read_restart),
    ("stop-signal", Walker::read_stop_signal),
    ("stop-timeout", Walker::read_stop_timeout),
    ("limits", Walker::read_limits),
    ("restart-delay", Walker::read_restart_delay),
    ("restart-max-delay", Walker::read_restart_delay),
    ("start-limit", Walker::read_start_limit),
    ("enforce", Walker::read_enforce),
    ("output", Walker::read_output),
    ("interrupts", Walker::read_interrupts),
    ("on-drift", Walker::read_drift),
    ("drift-hold", Walker::read_drift),
    ("min-locality", Walker::read_drift),
    ("min-memory", Walker::read_drift),
    ("alert-command", Walker::read_drift),
    ("alert-cooldown", Walker::read_drift),
    ("rebalance-rate", Walker::read_drift),
    ("rebalance-stall", Walker::read_drift),
    ("rebalance-cooldown", Walker::read_drift),
    ("pid-file", Walker::read_drift),
];

/// How a `limits` key is written and checked.
#[derive(Clone, Copy)]
struct LimitRule {
    /// A byte size (`"64MiB"`) is accepted besides a plain integer.
    bytes: bool,
    /// Zero is refused: a process cannot even start without a file descriptor table or a
    /// stack.
    nonzero: bool,
}

/// Keys of `limits`. A new limit is one entry here and a field of `Limits` (filled in
/// `Walker::service`).
const LIMIT_RULES: &[(&str, LimitRule)] = &[
    ("nofile", LimitRule { bytes: false, nonzero: true }),
    ("nproc", LimitRule { bytes: false, nonzero: false }),
    ("memlock", LimitRule { bytes: true, nonzero: false }),
    ("core", LimitRule { bytes: true, nonzero: false }),
    ("stack", LimitRule { bytes: true, nonzero: true }),
];

/// Top-level tables.
pub const TOP_KEYS: [&str; TOP_READERS.len()] = key_names(TOP_READERS);
/// Keys of `[host]`.
pub const HOST_KEYS: [&str; HOST_READERS.len()] = key_names(HOST_READERS);
/// Keys of `[service.NAME]` and `[defaults]`.
pub const SERVICE_KEYS: [&str; SERVICE_READERS.len()] = key_names(SERVICE_READERS);
/// Keys of `limits`.
pub const LIMIT_KEYS: [&str; LIMIT_RULES.len()] = key_names(LIMIT_RULES);

/// The first column of a key table, as the public array of key names.
const fn key_names<T, const N: usize>(table: &[(&'static str, T)]) -> [&'static str; N] {
    assert!(table.len() == N);
    let mut names = [""; N];
    let mut i = 0;
    while i < N {
        names[i] = table[i].0;
        i += 1;
    }
    names
}

/// The first restart delay when the file gives none.
pub const DEFAULT_RESTART_DELAY: Duration = Duration::from_millis(100);
/// The longest restart delay when the file gives none.
pub const DEFAULT_RESTART_MAX_DELAY: Duration = Duration::from_secs(10);
/// The shortest `restart-delay` and `restart-max-delay`: systemd's default `RestartSec=`. A
/// shorter value is raised to it, with a warning: restarting a database sooner gains nothing,
/// and with `start-limit = "off"` the floor is all that keeps a crashing instance to 10 starts
/// a second (each with its fork, exec and state-file writes) instead of hundreds.
pub const MIN_RESTART_DELAY: Duration = Duration::from_millis(100);
/// The start limit when the file gives none: systemd's `StartLimitBurst=5` within
/// `StartLimitIntervalSec=10s`. `start-limit = "off"` removes it.
pub const DEFAULT_START_LIMIT: StartLimit =
    StartLimit { burst: 5, interval: Duration::from_secs(10) };

/// More instances than this cannot be placed: each needs a CPU of its own and Linux builds
/// top out at 8192 CPUs (NR_CPUS). It bounds one service's `instances` and, checked before any
/// service is expanded, all the services of a file together, so no file allocates millions.
pub const MAX_INSTANCES: u32 = 8192;

/// The largest `share-weight`: a sharing instance counts for at most this many of a node's
/// CPUs when sharing instances are spread.
pub const MAX_SHARE_WEIGHT: u32 = 1024;

/// The stop timeout when the file gives none.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// The memory policy when the file gives none: `bind` keeps memory local and fails loudly
/// when the node is full, which is what pinning is for (and what `pinctl exec --nodes` does).
pub const DEFAULT_MEMORY_POLICY: MemoryPolicy = MemoryPolicy::Bind;
/// The stop signal when the file gives none.
pub const DEFAULT_STOP_SIGNAL: &str = "TERM";

/// The placeholder substituted in per-instance strings.
const PLACEHOLDER: &str = "{instance}";

type Val<'i> = Spanned<DeValue<'i>>;
type Key<'i> = Spanned<Cow<'i, str>>;
type Sp<T> = Option<(T, Span)>;

/// One `[service.NAME]` or `[defaults]` table after checking each value on its own.
#[derive(Default, Clone)]
struct RawService {
    instances: Sp<u32>,
    nodes: Sp<u32>,
    cpus: Sp<u32>,
    /// Which of `nodes` or `cpus` was written (the last one) and where, even with a bad value.
    size_key: Option<(&'static str, Span)>,
    memory: Sp<u64>,
    memory_policy: Sp<MemoryPolicy>,
    near: Option<Vec<(String, Span)>>,
    only_nodes: Option<Vec<(NodeId, Span)>>,
    unit: Sp<String>,
    command: Sp<Vec<String>>,
    command_written: bool,
    user: Sp<String>,
    group: Sp<String>,
    working_dir: Sp<String>,
    env: BTreeMap<String, (String, Span)>,
    restart: Sp<RestartPolicy>,
    stop_signal: Sp<&'static str>,
    stop_timeout: Sp<Duration>,
    limits: BTreeMap<&'static str, (u64, Span)>,
    restart_delay: Sp<Duration>,
    restart_max_delay: Sp<Duration>,
    /// `None` inside: `start-limit = "off"`.
    start_limit: Sp<Option<StartLimit>>,
    enforce: Sp<Enforce>,
    output: Sp<String>,
    interrupts: Sp<ServiceInterrupts>,
    drift: drift::RawDrift,
    share_nodes: Sp<ShareNodes>,
    share_weight: Sp<u32>,
}

/// The top-level tables as read, before the services are built.
#[derive(Default)]
struct RawDocument {
    host: Option<(HostConfig, HostSpans)>,
    defaults: RawService,
    services: Vec<(String, Span, RawService)>,
    /// Whether a `[service]` table was written at all, even a broken one.
    service_table_seen: bool,
}

/// Which service each instance name, and which instance each unit name, was first given to.
#[derive(Default)]
struct NameOwners {
    instances: BTreeMap<String, (String, Span)>,
    units: BTreeMap<String, String>,
}

struct Walker {
    file: Arc<SourceFile>,
    diagnostics: Vec<Diagnostic>,
    /// The watch keys of `[host]` and each service's drift keys.
    watch: WatchConfig,
    /// `[host] steer-interrupts` and each service's `interrupts`.
    interrupts: InterruptsConfig,
}

/// Parses and validates a service file. `path` is only used in messages.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let file = Arc::new(SourceFile::new(path, text));
    let mut walker = Walker {
        file: file.clone(),
        diagnostics: Vec::new(),
        watch: WatchConfig::default(),
        interrupts: InterruptsConfig::default(),
    };
    let (document, syntax_errors) = DeTable::parse_recoverable(text);
    if !syntax_errors.is_empty() {
        // The recovered tree misses whatever failed to parse; checking it would add errors
        // that are only echoes of the syntax errors (a "missing" command on a broken line).
        //
        // The parser's recovery also echoes: a second error on a line is almost always the
        // first one seen again, and after an unterminated string everything that follows is
        // read as the string's continuation. Both are left out so the first error stands out.
        let mut last_line = None;
        let mut syntax_errors = syntax_errors;
        syntax_errors.sort_by_key(|e| e.span().map_or(usize::MAX, |s| s.start));
        for e in syntax_errors {
            let span = e.span().unwrap_or(text.len()..text.len());
            let line = file.locate(&span).line();
            if last_line == Some(line) {
                continue;
            }
            last_line = Some(line);
            let message = lowercase_first(e.message());
            let unterminated = message.starts_with("invalid basic string")
                || message.starts_with("invalid literal string");
            let d = walker.error(&span, format!("invalid TOML: {message}"));
            if unterminated {
                d.notes.push("the rest of the file is checked once this string is closed".into());
                break;
            }
        }
        return Err(walker.finish_error(path));
    }
    let config = walker.document(path, document.get_ref());
    let has_errors = walker.diagnostics.iter().any(Diagnostic::is_error);
    match config {
        Some(mut config) if !has_errors => {
            config.warnings = walker.sorted();
            Ok(config)
        }
        _ => Err(walker.finish_error(path)),
    }
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Entries of a table in file order (the parsed table is sorted by key).
fn entries<'a, 'i>(table: &'a DeTable<'i>) -> Vec<(&'a Key<'i>, &'a Val<'i>)> {
    let mut v: Vec<_> = table.iter().collect();
    v.sort_by_key(|(k, _)| k.span().start);
    v
}

fn substitute(s: &str, index: u32) -> String {
    s.replace(PLACEHOLDER, &index.to_string())
}

/// `template` for instance `index`: the template itself, shared, when it has no
/// `{instance}`.
fn instantiate(template: &Arc<str>, index: u32) -> Arc<str> {
    if template.contains(PLACEHOLDER) {
        Arc::from(substitute(template, index))
    } else {
        Arc::clone(template)
    }
}

/// `{word}` placeholders other than `{instance}`: almost certainly a misspelling. `${VAR}`
/// (shell syntax inside a `sh -c` command) is left alone.
fn unknown_placeholders(s: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let bytes = s.as_bytes();
    let mut i = 0;
    while let Some(open) = s[i..].find('{').map(|o| o + i) {
        let close = s[open..].find('}').map(|c| c + open);
        let Some(close) = close else { break };
        let word = &s[open + 1..close];
        let preceded_by_dollar = open > 0 && bytes[open - 1] == b'$';
        if !preceded_by_dollar
            && !word.is_empty()
            && word != "instance"
            && word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'-')
        {
            found.push(&s[open..=close]);
        }
        i = open + 1;
    }
    found
}

impl Walker {
    fn error(&mut self, span: &Span, message: impl Into<String>) -> &mut Diagnostic {
        self.push(Diagnostic::at(&self.file, span, Severity::Error, message))
    }

    fn warning(&mut self, span: &Span, message: impl Into<String>) -> &mut Diagnostic {
        self.push(Diagnostic::at(&self.file, span, Severity::Warning, message))
    }

    fn push(&mut self, d: Diagnostic) -> &mut Diagnostic {
        self.diagnostics.push(d);
        self.diagnostics.last_mut().expect("just pushed")
    }

    /// Diagnostics in file order (a stable sort: several at one place keep their order).
    fn sorted(&mut self) -> Vec<Diagnostic> {
        let mut d = std::mem::take(&mut self.diagnostics);
        d.sort_by_key(|d| d.location.as_ref().map(|l| (l.line(), l.column())));
        d
    }

    fn finish_error(&mut self, path: &Path) -> ConfigError {
        ConfigError::from_diagnostics(path, self.sorted())
    }

    fn location_text(&self, span: &Span) -> String {
        let loc = self.file.locate(span);
        format!("{}:{}:{}", loc.path().display(), loc.line(), loc.column())
    }

    fn unknown_key(&mut self, key: &Key<'_>, expected: &[&str]) {
        let list = expected.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        let name = key.get_ref().as_ref();
        let d = self.error(&key.span(), format!("unknown field `{name}`, expected one of {list}"));
        if let Some(close) = values::closest(name, expected) {
            d.help = Some(format!("did you mean `{close}`?"));
        }
    }

    /// A string that must name one of `choices` (`name` gives each one's name in the file):
    /// the one it names, or `None` once the problem is said (`unknown {what} `x`, expected one
    /// of ...`, with the closest name as help).
    fn one_of<T: Copy>(
        &mut self,
        key: &str,
        value: &Val<'_>,
        what: &str,
        choices: &[T],
        name: fn(T) -> &'static str,
    ) -> Option<T> {
        let names: Vec<&str> = choices.iter().map(|&c| name(c)).collect();
        let quoted = |q: char| names.iter().map(|n| format!("{q}{n}{q}")).collect::<Vec<_>>();
        let s = self.string(key, value, &format!("one of {}", quoted('"').join(", ")))?;
        if let Some(&c) = choices.iter().find(|&&c| name(c) == s) {
            return Some(c);
        }
        let list = quoted('`').join(", ");
        let d = self.error(&value.span(), format!("unknown {what} `{s}`, expected one of {list}"));
        if let Some(c) = values::closest(s, &names) {
            d.help = Some(format!("did you mean `{c}`?"));
        }
        None
    }

    fn wrong_type(&mut self, key: &str, value: &Val<'_>, expected: &str) -> &mut Diagnostic {
        let found = type_name(value.get_ref());
        self.error(
            &value.span(),
            format!("invalid type for `{key}`: expected {expected}, found {found}"),
        )
    }

    fn table<'a, 'i>(&mut self, key: &str, value: &'a Val<'i>) -> Option<&'a DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(t) => Some(t),
            _ => {
                self.wrong_type(key, value, "a table");
                None
            }
        }
    }

    fn string<'a>(&mut self, key: &str, value: &'a Val<'_>, expected: &str) -> Option<&'a str> {
        match value.get_ref() {
            DeValue::String(s) => Some(s.as_ref()),
            _ => {
                self.wrong_type(key, value, expected);
                None
            }
        }
    }

    /// A string that must not be empty.
    fn non_empty_string<'a>(&mut self, key: &str, value: &'a Val<'_>) -> Option<&'a str> {
        let s = self.string(key, value, "a string")?;
        if s.trim().is_empty() {
            self.error(&value.span(), format!("`{key}` is empty"));
            return None;
        }
        self.check_placeholders(s, &value.span());
        Some(s)
    }

    fn check_placeholders(&mut self, s: &str, span: &Span) {
        for p in unknown_placeholders(s) {
            self.warning(span, format!("`{p}` is not a placeholder and is left as written")).help =
                Some("the only placeholder is `{instance}`, the instance's index".into());
        }
    }

    /// An integer in `min..=max`.
    fn integer(&mut self, key: &str, value: &Val<'_>, min: u64, max: u64) -> Option<u64> {
        let expected = if min > 0 { "a positive integer" } else { "an integer" };
        let DeValue::Integer(i) = value.get_ref() else {
            let d = self.wrong_type(key, value, expected);
            if let DeValue::String(s) = value.get_ref() {
                if s.trim().parse::<u64>().is_ok() {
                    d.help = Some(format!("remove the quotes around `{}`", s.trim()));
                }
            }
            return None;
        };
        let n = i128::from_str_radix(i.as_str(), i.radix()).unwrap_or(i128::MAX);
        if n < i128::from(min) {
            let message = if min == 0 {
                format!("`{key}` cannot be negative, not `{n}`")
            } else {
                format!("`{key}` must be at least {min}, not `{n}`")
            };
            self.error(&value.span(), message);
            return None;
        }
        if n > i128::from(max) {
            self.error(&value.span(), format!("`{key}` is too large: at most {max}, not `{n}`"));
            return None;
        }
        Some(n as u64)
    }

    /// A byte size: a plain integer (bytes) or a string with a unit.
    fn size(&mut self, key: &str, value: &Val<'_>) -> Option<u64> {
        match value.get_ref() {
            DeValue::Integer(_) => self.integer(key, value, 0, u64::MAX),
            DeValue::String(s) => match values::parse_size(s) {
                Ok(n) => Some(n),
                Err(e) => {
                    self.error(&value.span(), format!("invalid `{key}`: {e}"));
                    None
                }
            },
            DeValue::Float(f) => {
                self.wrong_type(key, value, "a byte size such as \"48GiB\"").help =
                    Some(format!("write the size with a unit: `{key} = \"{f}GiB\"`"));
                None
            }
            _ => {
                self.wrong_type(key, value, "a byte size such as \"48GiB\"");
                None
            }
        }
    }

    fn array<'a, 'i>(
        &mut self,
        key: &str,
        value: &'a Val<'i>,
        expected: &str,
    ) -> Option<&'a DeArray<'i>> {
        match value.get_ref() {
            DeValue::Array(a) => Some(a),
            _ => {
                self.wrong_type(key, value, expected);
                None
            }
        }
    }

    /// Reads each entry of `table` with its reader from `readers` into `state`; a key with
    /// no reader is an unknown field, and the list of expected keys is the readers' keys.
    fn read_table<S>(&mut self, table: &DeTable<'_>, readers: &[(&str, Reader<S>)], state: &mut S) {
        for (key, value) in entries(table) {
            match readers.iter().find(|(name, _)| *name == key.get_ref().as_ref()) {
                Some((_, read)) => read(self, state, key, value),
                None => {
                    let names: Vec<&str> = readers.iter().map(|(name, _)| *name).collect();
                    self.unknown_key(key, &names);
                }
            }
        }
    }

    fn document(&mut self, path: &Path, root: &DeTable<'_>) -> Option<Config> {
        let mut raw = RawDocument::default();
        self.read_table(root, TOP_READERS, &mut raw);
        let (host, host_spans) = raw.host.unwrap_or_default();
        if raw.services.is_empty() {
            let message = format!("`{}` defines no services", path.display());
            let d = Diagnostic::for_file(path, Severity::Error, message)
                .with_help("add a `[service.NAME]` table with at least a `command`");
            if !raw.service_table_seen || !self.diagnostics.iter().any(Diagnostic::is_error) {
                self.push(d);
            }
            return None;
        }
        let merged: Vec<RawService> =
            raw.services.iter().map(|(_, _, own)| merge(&raw.defaults, own)).collect();
        let listed: Vec<(&str, &Span, &RawService)> = raw
            .services
            .iter()
            .zip(&merged)
            .map(|((name, span, _), m)| (name.as_str(), span, m))
            .collect();
        // Over a bound, each service is still checked, but none is expanded.
        let expand = self.within_bounds(&listed);
        let mut built = Vec::with_capacity(raw.services.len());
        let mut built_spans = Vec::with_capacity(raw.services.len());
        let mut owners = NameOwners::default();
        for ((name, name_span, own), merged) in raw.services.iter().zip(&merged) {
            let Some((service, spans)) = self.service(name, name_span, merged, own, expand) else {
                continue;
            };
            self.watch.services.insert(name.clone(), merged.drift.settings());
            if let Some((mode, _)) = merged.interrupts {
                self.interrupts.services.insert(name.clone(), mode);
            }
            if let Some((pid_file, _)) = &merged.drift.pid_file {
                for instance in &service.instances {
                    let path = PathBuf::from(substitute(pid_file, instance.index));
                    self.watch.pid_files.insert(instance.name.clone(), path);
                }
            }
            self.check_unique_names(&mut owners, &service, name_span, merged);
            built.push(service);
            built_spans.push(spans);
        }
        // `[host]` may come after the services: whether a service's interrupts are judged
        // as drift is known once the whole file is read.
        for (name, settings) in self.watch.services.iter_mut() {
            settings.quiet_interrupts = self.interrupts.keeps_quiet(name);
        }
        let spans =
            ConfigSpans { file: Some(self.file.clone()), host: host_spans, services: built_spans };
        Some(Config {
            path: path.to_path_buf(),
            host,
            services: built,
            warnings: Vec::new(),
            spans,
            watch: std::mem::take(&mut self.watch),
            interrupts: std::mem::take(&mut self.interrupts),
        })
    }

    /// Records the instance and unit names of `service` in `owners`, and reports those that
    /// an earlier service already uses.
    fn check_unique_names(
        &mut self,
        owners: &mut NameOwners,
        service: &Service,
        name_span: &Span,
        merged: &RawService,
    ) {
        let name = &service.name;
        for instance in &service.instances {
            match owners.instances.entry(instance.name.clone()) {
                Entry::Vacant(v) => {
                    v.insert((service.name.clone(), name_span.clone()));
                }
                Entry::Occupied(o) => {
                    let (other, other_span) = o.get().clone();
                    let at = self.location_text(&other_span);
                    self.error(
                        name_span,
                        format!("instance name `{}` of service `{name}` is also an instance of service `{other}`", instance.name),
                    )
                    .notes
                    .push(format!("service `{other}` is defined at {at}"));
                }
            }
            if let (Some(unit), Some((_, unit_span))) = (&instance.unit, &merged.unit) {
                match owners.units.entry(unit.clone()) {
                    Entry::Vacant(v) => {
                        v.insert(instance.name.clone());
                    }
                    Entry::Occupied(o) => {
                        let d = self.error(
                            unit_span,
                            format!(
                                "unit `{unit}` is given to both `{}` and `{}`",
                                o.get(),
                                instance.name
                            ),
                        );
                        if service.instances.len() > 1
                            && !merged.unit.as_ref().is_some_and(|(u, _)| u.contains(PLACEHOLDER))
                        {
                            d.help = Some(format!(
                                "put `{PLACEHOLDER}` in the unit name, e.g. `{}@{PLACEHOLDER}.service`",
                                service.name
                            ));
                        }
                        break;
                    }
                }
            }
        }
    }

    fn read_host(&mut self, doc: &mut RawDocument, _: &Key<'_>, value: &Val<'_>) {
        if let Some(t) = self.table("host", value) {
            let mut host: (HostConfig, HostSpans) = Default::default();
            self.read_table(t, HOST_READERS, &mut host);
            // Where each key is written, for what is said across files (two files of one
            // host that disagree on a host-wide setting are refused naming both lines).
            for (key, value) in entries(t) {
                let span = key.span().start..value.span().end.max(key.span().end);
                host.1.keys.insert(key.get_ref().to_string(), span);
            }
            doc.host = Some(host);
        }
    }

    fn read_defaults(&mut self, doc: &mut RawDocument, _: &Key<'_>, value: &Val<'_>) {
        if let Some(t) = self.table("defaults", value) {
            doc.defaults = self.service_table(t);
        }
    }

    fn read_services(&mut self, doc: &mut RawDocument, _: &Key<'_>, value: &Val<'_>) {
        doc.service_table_seen = true;
        let Some(t) = self.table("service", value) else { return };
        for (name, body) in entries(t) {
            let name_str = name.get_ref().as_ref();
            let valid_name = values::is_service_name(name_str);
            if !valid_name {
                self.error(
                    &name.span(),
                    format!("invalid service name `{}`", pinctl_topology::text::shown(name_str)),
                )
                .help = Some(format!(
                    "service names are lowercase letters, digits, `-` and `_`, starting with a letter or digit, at most {} bytes",
                    values::MAX_SERVICE_NAME
                ));
            }
            let DeValue::Table(body_table) = body.get_ref() else {
                self.wrong_type(&format!("service.{name_str}"), body, "a table `[service.NAME]`");
                continue;
            };
            let raw = self.service_table(body_table);
            // The body is checked either way; a service whose name is refused is not expanded
            // into instances (each would hold the bad name).
            if valid_name {
                doc.services.push((name_str.to_string(), name.span(), raw));
            }
        }
    }

    fn read_keep_free(
        &mut self,
        (host, spans): &mut (HostConfig, HostSpans),
        _: &Key<'_>,
        value: &Val<'_>,
    ) {
        let expected = "an array of NIC names and node ids, e.g. [\"eth0\", 3]";
        let Some(items) = self.array("keep-free", value, expected) else { return };
        let mut list = Vec::new();
        for item in items.iter() {
            let entry = match item.get_ref() {
                DeValue::String(s) => {
                    if !values::is_interface_name(s) {
                        self.error(&item.span(), format!("`{s}` is not a network interface name"))
                            .help = Some("keep-free takes NIC names (at most 15 characters, no `/`, `:` or blanks) and node ids".into());
                        continue;
                    }
                    KeepFree::Nic(s.to_string())
                }
                DeValue::Integer(_) => {
                    let Some(n) = self.integer("keep-free", item, 0, u64::from(MAX_ID)) else {
                        continue;
                    };
                    KeepFree::Node(n as NodeId)
                }
                _ => {
                    self.wrong_type("keep-free", item, "a NIC name or a node id");
                    continue;
                }
            };
            if let Some(i) = list.iter().position(|e| *e == entry) {
                let at = self.location_text(&spans.keep_free[i]);
                self.error(&item.span(), "`keep-free` lists this entry twice")
                    .notes
                    .push(format!("first listed at {at}"));
                continue;
            }
            list.push(entry);
            spans.keep_free.push(item.span());
        }
        host.keep_free = Some(list);
    }

    fn read_reserve_cpus(
        &mut self,
        (host, spans): &mut (HostConfig, HostSpans),
        _: &Key<'_>,
        value: &Val<'_>,
    ) {
        let Some(s) = self.string("reserve-cpus", value, "a CPU list such as \"0-1\"") else {
            return;
        };
        match CpuSet::parse_list(s) {
            Ok(set) => {
                host.reserve_cpus = set;
                spans.reserve_cpus = Some(value.span());
            }
            Err(e) => {
                self.error(&value.span(), format!("invalid `reserve-cpus` `{s}`: {e}"));
            }
        }
    }

    fn read_memory_reserve(
        &mut self,
        (host, spans): &mut (HostConfig, HostSpans),
        _: &Key<'_>,
        value: &Val<'_>,
    ) {
        if let Some(n) = self.size("memory-reserve", value) {
            host.memory_reserve = Some(n);
            spans.memory_reserve = Some(value.span());
        }
    }

    /// `name` of `[host]`: what the supervisor is called (its socket, state file and cgroup
    /// subtree are named after it).
    fn read_supervisor_name(
        &mut self,
        (host, _): &mut (HostConfig, HostSpans),
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let Some(name) = self.non_empty_string(key.get_ref(), value) else { return };
        if !values::is_service_name(name) {
            self.error(
                &value.span(),
                format!(
                    "invalid `name` `{}`: a supervisor's name is written like a service's",
                    name.escape_debug()
                ),
            )
            .help = Some(
                "lowercase letters, digits, `-` and `_`, starting with a letter or digit: \
                 `name = \"db\"`"
                    .into(),
            );
            return;
        }
        host.name = Some(name.to_string());
    }

    /// `socket` or `state-file` of `[host]`: where the supervisor listens and keeps its state.
    fn read_supervisor_path(
        &mut self,
        (host, _): &mut (HostConfig, HostSpans),
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let k = key.get_ref().as_ref();
        let Some(path) = self.absolute_path(k, value) else { return };
        if k == "socket" {
            host.socket = Some(path.into());
        } else {
            host.state_file = Some(path.into());
        }
    }

    /// `steer-interrupts` of `[host]`.
    fn read_steer_interrupts(
        &mut self,
        _: &mut (HostConfig, HostSpans),
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        match value.get_ref() {
            DeValue::Boolean(b) => self.interrupts.steer = *b,
            _ => {
                self.wrong_type(key.get_ref(), value, "true or false");
            }
        }
    }

    fn read_cpu_overcommit(
        &mut self,
        (host, _): &mut (HostConfig, HostSpans),
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let k = key.get_ref().as_ref();
        let span = value.span();
        let hundredths = match value.get_ref() {
            DeValue::Integer(_) => self
                .integer(k, value, 1, u64::from(Overcommit::MAX.hundredths() / 100))
                .map(|n| n as u32 * 100),
            DeValue::Float(f) => {
                let written = f.as_str();
                let x = written.parse::<f64>().ok().filter(|x| x.is_finite());
                let scaled = x.map(|x| x * 100.0);
                match scaled {
                    Some(h) if (0.0..=1e6).contains(&h) && (h - h.round()).abs() < 1e-6 => {
                        Some(h.round() as u32)
                    }
                    Some(h) if (0.0..=1e6).contains(&h) => {
                        self.error(
                            &span,
                            format!("`{k}` `{written}` has more than two decimals"),
                        )
                        .help = Some("write a ratio such as `2` or `1.5`".into());
                        None
                    }
                    _ => {
                        self.error(
                            &span,
                            format!(
                                "`{k}` must be from 1 (no overcommit) to {}, not `{written}`",
                                Overcommit::MAX
                            ),
                        );
                        None
                    }
                }
            }
            _ => {
                self.wrong_type(k, value, "a ratio such as 2 or 1.5");
                None
            }
        };
        let Some(hundredths) = hundredths else { return };
        match Overcommit::from_hundredths(hundredths) {
            Some(ratio) => host.cpu_overcommit = Some(ratio),
            None => {
                self.error(
                    &span,
                    format!(
                        "`{k}` must be from 1 (no overcommit) to {}, not `{}`",
                        Overcommit::MAX,
                        f64::from(hundredths) / 100.0
                    ),
                );
            }
        }
    }

    /// A watch key of `[host]` (parse/drift.rs reads them all).
    fn read_watch(&mut self, _: &mut (HostConfig, HostSpans), key: &Key<'_>, value: &Val<'_>) {
        let mut watch = std::mem::take(&mut self.watch);
        let known = self.watch_host_key(key.get_ref(), value, &mut watch);
        debug_assert!(known, "HOST_READERS lists a watch key watch_host_key does not read");
        self.watch = watch;
    }

    /// A non-empty absolute path (`{instance}` allowed).
    fn absolute_path<'a>(&mut self, key: &str, value: &'a Val<'_>) -> Option<&'a str> {
        let s = self.non_empty_string(key, value)?;
        if !substitute(s, 0).starts_with('/') {
            self.error(&value.span(), format!("`{key}` must be an absolute path, not `{s}`"));
            return None;
        }
        Some(s)
    }
}

/// A service table over `[defaults]`: each key the service writes replaces the default, except
/// `env` and `limits`, which merge per variable and per limit (the service wins). `nodes` and
/// `cpus` count as one key: a service that writes either ignores both defaults.
fn merge(defaults: &RawService, own: &RawService) -> RawService {
    fn pick<T: Clone>(own: &Sp<T>, default: &Sp<T>) -> Sp<T> {
        own.clone().or_else(|| default.clone())
    }
    let (nodes, cpus) = if own.size_key.is_some() {
        (own.nodes.clone(), own.cpus.clone())
    } else {
        (defaults.nodes.clone(), defaults.cpus.clone())
    };
    let mut env = defaults.env.clone();
    env.extend(own.env.clone());
    let mut limits = defaults.limits.clone();
    limits.extend(own.limits.clone());
    RawService {
        instances: pick(&own.instances, &defaults.instances),
        nodes,
        cpus,
        size_key: own.size_key.clone().or_else(|| defaults.size_key.clone()),
        memory: pick(&own.memory, &defaults.memory),
        memory_policy: pick(&own.memory_policy, &defaults.memory_policy),
        near: own.near.clone().or_else(|| defaults.near.clone()),
        only_nodes: own.only_nodes.clone().or_else(|| defaults.only_nodes.clone()),
        unit: pick(&own.unit, &defaults.unit),
        command: pick(&own.command, &defaults.command),
        command_written: own.command_written || defaults.command_written,
        user: pick(&own.user, &defaults.user),
        group: pick(&own.group, &defaults.group),
        working_dir: pick(&own.working_dir, &defaults.working_dir),
        env,
        restart: pick(&own.restart, &defaults.restart),
        stop_signal: pick(&own.stop_signal, &defaults.stop_signal),
        stop_timeout: pick(&own.stop_timeout, &defaults.stop_timeout),
        limits,
        restart_delay: pick(&own.restart_delay, &defaults.restart_delay),
        restart_max_delay: pick(&own.restart_max_delay, &defaults.restart_max_delay),
        start_limit: pick(&own.start_limit, &defaults.start_limit),
        enforce: pick(&own.enforce, &defaults.enforce),
        output: pick(&own.output, &defaults.output),
        interrupts: pick(&own.interrupts, &defaults.interrupts),
        drift: own.drift.over(&defaults.drift),
        share_nodes: pick(&own.share_nodes, &defaults.share_nodes),
        share_weight: pick(&own.share_weight, &defaults.share_weight),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_has_one_reader() {
        // A key listed twice would be read by its first entry only, the other dead code.
        for keys in [&TOP_KEYS[..], &HOST_KEYS, &SERVICE_KEYS, &LIMIT_KEYS] {
            let mut sorted = keys.to_vec();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), keys.len(), "a key is listed twice in {keys:?}");
        }
    }

    #[test]
    fn placeholders() {
        assert_eq!(substitute("/data{instance}/x{instance}", 3), "/data3/x3");
        assert_eq!(
            unknown_placeholders("a {instance} ${HOME} ${dir} {instnace} {} {A}"),
            vec!["{instnace}"]
        );
        assert_eq!(unknown_placeholders("{{instances}}"), vec!["{instances}"]);
        assert!(unknown_placeholders("{\"json\": 1}").is_empty());
    }
}
