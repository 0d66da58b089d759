//! From TOML text to a validated [`Config`].
//!
//! The file is read with `toml`'s span-keeping document parser (`DeTable::parse_recoverable`)
//! and walked by hand instead of through serde derives: serde stops at the first error and
//! loses the position of values that fail custom validation, while this walk keeps going and
//! records every problem with the span of the key or value at fault.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pinctl_topology::{CpuSet, IdSet, MAX_ID, MemoryPolicy, NodeId, NodeSet};
use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use crate::diagnostic::{ConfigError, Diagnostic, Severity, SourceFile, Span};
use crate::model::{
    Config, ConfigSpans, HostConfig, HostSpans, Instance, InstanceSize, KeepFree, Limits,
    RestartPolicy, Service, ServiceSpans,
};
use crate::values;

/// Keys of `[host]`.
pub const HOST_KEYS: [&str; 3] = ["keep-free", "reserve-cpus", "memory-reserve"];
/// Keys of `[service.NAME]` and `[defaults]`.
pub const SERVICE_KEYS: [&str; 17] = [
    "command",
    "instances",
    "nodes",
    "cpus",
    "memory",
    "memory-policy",
    "near",
    "only-nodes",
    "unit",
    "user",
    "group",
    "working-dir",
    "env",
    "restart",
    "stop-signal",
    "stop-timeout",
    "limits",
];
/// Top-level tables.
pub const TOP_KEYS: [&str; 3] = ["host", "defaults", "service"];
/// Keys of `limits`.
pub const LIMIT_KEYS: [&str; 5] = ["nofile", "nproc", "memlock", "core", "stack"];
const RESTART_NAMES: [&str; 3] = ["always", "on-failure", "never"];

/// More instances than this cannot be placed: each needs a CPU of its own and Linux builds
/// top out at 8192 CPUs (NR_CPUS). The bound also keeps a typo from allocating millions.
pub const MAX_INSTANCES: u32 = 8192;

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
type Sp<T> = Option<(T, Span)>;

/// One `[service.NAME]` or `[defaults]` table after checking each value on its own.
#[derive(Default, Clone)]
struct RawService {
    instances: Sp<u32>,
    nodes: Sp<u32>,
    cpus: Sp<u32>,
    /// Whether `nodes` or `cpus` was written, even with a bad value.
    size_written: bool,
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
}

struct Walker {
    file: Arc<SourceFile>,
    diagnostics: Vec<Diagnostic>,
}

/// Parses and validates a service file. `path` is only used in messages.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let file = Arc::new(SourceFile::new(path, text));
    let mut walker = Walker { file: file.clone(), diagnostics: Vec::new() };
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
fn entries<'a, 'i>(
    table: &'a DeTable<'i>,
) -> Vec<(&'a Spanned<std::borrow::Cow<'i, str>>, &'a Val<'i>)> {
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

    fn unknown_key(&mut self, key: &Spanned<std::borrow::Cow<'_, str>>, expected: &[&str]) {
        let list = expected.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
        let name = key.get_ref().as_ref();
        let d = self.error(&key.span(), format!("unknown field `{name}`, expected one of {list}"));
        if let Some(close) = values::closest(name, expected) {
            d.help = Some(format!("did you mean `{close}`?"));
        }
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

    fn document(&mut self, path: &Path, root: &DeTable<'_>) -> Option<Config> {
        let mut host = None;
        let mut defaults = RawService::default();
        let mut services: Vec<(String, Span, RawService)> = Vec::new();
        let mut service_table_seen = false;
        for (key, value) in entries(root) {
            match key.get_ref().as_ref() {
                "host" => {
                    if let Some(t) = self.table("host", value) {
                        host = Some(self.host(t));
                    }
                }
                "defaults" => {
                    if let Some(t) = self.table("defaults", value) {
                        defaults = self.service_table(t);
                    }
                }
                "service" => {
                    service_table_seen = true;
                    let Some(t) = self.table("service", value) else { continue };
                    for (name, body) in entries(t) {
                        let name_str = name.get_ref().as_ref();
                        let valid_name = values::is_service_name(name_str);
                        if !valid_name {
                            self.error(
                                &name.span(),
                                format!(
                                    "invalid service name `{}`",
                                    pinctl_topology::text::shown(name_str)
                                ),
                            )
                            .help = Some(format!(
                                "service names are lowercase letters, digits, `-` and `_`, starting with a letter or digit, at most {} bytes",
                                values::MAX_SERVICE_NAME
                            ));
                        }
                        let DeValue::Table(body_table) = body.get_ref() else {
                            self.wrong_type(
                                &format!("service.{name_str}"),
                                body,
                                "a table `[service.NAME]`",
                            );
                            continue;
                        };
                        let raw = self.service_table(body_table);
                        // The body is checked either way; a service whose name is refused is
                        // not expanded into instances (each would hold the bad name).
                        if valid_name {
                            services.push((name_str.to_string(), name.span(), raw));
                        }
                    }
                }
                _ => self.unknown_key(key, &TOP_KEYS),
            }
        }
        let (host, host_spans) = host.unwrap_or_default();
        if services.is_empty() {
            let message = format!("`{}` defines no services", path.display());
            let d = Diagnostic::for_file(path, Severity::Error, message)
                .with_help("add a `[service.NAME]` table with at least a `command`");
            if !service_table_seen || !self.diagnostics.iter().any(Diagnostic::is_error) {
                self.push(d);
            }
            return None;
        }
        let mut built = Vec::with_capacity(services.len());
        let mut built_spans = Vec::with_capacity(services.len());
        let mut instance_owner: BTreeMap<String, (String, Span)> = BTreeMap::new();
        let mut unit_owner: BTreeMap<String, String> = BTreeMap::new();
        for (name, name_span, raw) in &services {
            let merged = merge(&defaults, raw);
            let Some((service, spans)) = self.service(name, name_span, &merged, raw) else {
                continue;
            };
            for instance in &service.instances {
                match instance_owner.entry(instance.name.clone()) {
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
                    match unit_owner.entry(unit.clone()) {
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
                                && !merged
                                    .unit
                                    .as_ref()
                                    .is_some_and(|(u, _)| u.contains(PLACEHOLDER))
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
            built.push(service);
            built_spans.push(spans);
        }
        let spans =
            ConfigSpans { file: Some(self.file.clone()), host: host_spans, services: built_spans };
        Some(Config {
            path: path.to_path_buf(),
            host,
            services: built,
            warnings: Vec::new(),
            spans,
        })
    }

    fn host(&mut self, table: &DeTable<'_>) -> (HostConfig, HostSpans) {
        let mut host = HostConfig::default();
        let mut spans = HostSpans::default();
        for (key, value) in entries(table) {
            match key.get_ref().as_ref() {
                "keep-free" => {
                    let expected = "an array of NIC names and node ids, e.g. [\"eth0\", 3]";
                    let Some(items) = self.array("keep-free", value, expected) else { continue };
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
                                let Some(n) = self.integer("keep-free", item, 0, u64::from(MAX_ID))
                                else {
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
                "reserve-cpus" => {
                    let Some(s) = self.string("reserve-cpus", value, "a CPU list such as \"0-1\"")
                    else {
                        continue;
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
                "memory-reserve" => {
                    if let Some(n) = self.size("memory-reserve", value) {
                        host.memory_reserve = Some(n);
                        spans.memory_reserve = Some(value.span());
                    }
                }
                _ => self.unknown_key(key, &HOST_KEYS),
            }
        }
        (host, spans)
    }

    /// Checks each value of a `[service.NAME]` or `[defaults]` table on its own.
    fn service_table(&mut self, table: &DeTable<'_>) -> RawService {
        let mut raw = RawService::default();
        let mut size_key: Option<(&str, Span)> = None;
        for (key, value) in entries(table) {
            let k = key.get_ref().as_ref();
            let span = value.span();
            match k {
                "instances" => {
                    raw.instances = self
                        .integer(k, value, 1, u64::from(MAX_INSTANCES))
                        .map(|n| (n as u32, span));
                }
                "nodes" | "cpus" => {
                    if let Some((other, other_span)) = &size_key {
                        let at = self.location_text(other_span);
                        let d = self.error(
                            &key.span(),
                            "`nodes` and `cpus` are both set: an instance is sized by one of them",
                        );
                        d.notes.push(format!("`{other}` is set at {at}"));
                        d.help = Some("`nodes = N` gives each instance N whole nodes; `cpus = N` gives it N CPUs packed inside a node".into());
                    }
                    size_key = Some((if k == "nodes" { "nodes" } else { "cpus" }, key.span()));
                    raw.size_written = true;
                    let n = self.integer(k, value, 1, u64::from(MAX_ID)).map(|n| (n as u32, span));
                    if k == "nodes" {
                        raw.nodes = n;
                    } else {
                        raw.cpus = n;
                    }
                }
                "memory" => {
                    if let Some(n) = self.size(k, value) {
                        if n == 0 {
                            self.error(&span, "`memory` is zero").help = Some(
                                "leave `memory` out when the instance's memory need is unknown"
                                    .into(),
                            );
                        } else {
                            raw.memory = Some((n, span));
                        }
                    }
                }
                "memory-policy" => {
                    let Some(s) = self.string(k, value, "a memory policy name") else { continue };
                    match s.parse::<MemoryPolicy>() {
                        Ok(p) => raw.memory_policy = Some((p, span)),
                        Err(e) => {
                            let names: Vec<&str> =
                                MemoryPolicy::ALL.iter().map(|p| p.name()).collect();
                            let d = self.error(&span, e.to_string());
                            if let Some(c) = values::closest(s, &names) {
                                d.help = Some(format!("did you mean `{c}`?"));
                            }
                        }
                    }
                }
                "near" => {
                    let items: Vec<&Val<'_>> = match value.get_ref() {
                        // A lone string is a one-element list: unambiguous and common.
                        DeValue::String(_) => vec![value],
                        DeValue::Array(a) => a.iter().collect(),
                        _ => {
                            self.wrong_type(k, value, "an array of devices or paths");
                            continue;
                        }
                    };
                    let mut near = Vec::new();
                    for item in items {
                        let Some(s) = self.string(k, item, "a device or a path") else { continue };
                        if s.trim().is_empty() {
                            self.error(&item.span(), "empty device or path in `near`");
                            continue;
                        }
                        self.check_placeholders(s, &item.span());
                        near.push((s.to_string(), item.span()));
                    }
                    raw.near = Some(near);
                }
                "only-nodes" => {
                    raw.only_nodes = self.only_nodes(value);
                }
                "unit" => {
                    let Some(s) = self.non_empty_string(k, value) else { continue };
                    if !values::is_service_unit_name(&substitute(s, 0)) {
                        self.error(&span, format!("`{s}` is not a systemd service unit name"))
                            .help = Some("expected a name such as `tikv@{instance}.service`: letters, digits, `:-_.\\@`, ending in `.service`".into());
                        continue;
                    }
                    raw.unit = Some((s.to_string(), span));
                }
                "command" => {
                    raw.command_written = true;
                    let Some(items) = self.array(
                        k,
                        value,
                        "an array of strings, e.g. [\"/usr/bin/server\", \"--flag\"]",
                    ) else {
                        continue;
                    };
                    if items.is_empty() {
                        self.error(&span, "`command` is empty").help =
                            Some("give the program and its arguments, e.g. `command = [\"/usr/bin/tikv-server\"]`".into());
                        continue;
                    }
                    let mut command = Vec::new();
                    let mut ok = true;
                    for (i, item) in items.iter().enumerate() {
                        let Some(s) = self.string(k, item, "a string") else {
                            ok = false;
                            continue;
                        };
                        if i == 0 && s.trim().is_empty() {
                            self.error(&item.span(), "the program in `command` is empty");
                            ok = false;
                        }
                        if s.contains('\0') {
                            self.error(&item.span(), "`command` contains a NUL byte");
                            ok = false;
                        }
                        self.check_placeholders(s, &item.span());
                        command.push(s.to_string());
                    }
                    if ok {
                        raw.command = Some((command, span));
                    }
                }
                "user" | "group" => {
                    let Some(s) = self.non_empty_string(k, value) else { continue };
                    if !values::is_account_name(s) {
                        self.error(&span, format!("`{s}` is not a valid {k} name or id"));
                        continue;
                    }
                    let v = Some((s.to_string(), span));
                    if k == "user" {
                        raw.user = v;
                    } else {
                        raw.group = v;
                    }
                }
                "working-dir" => {
                    let Some(s) = self.non_empty_string(k, value) else { continue };
                    if !substitute(s, 0).starts_with('/') {
                        self.error(
                            &span,
                            format!("`working-dir` must be an absolute path, not `{s}`"),
                        );
                        continue;
                    }
                    raw.working_dir = Some((s.to_string(), span));
                }
                "env" => {
                    let Some(t) = self.table(k, value) else { continue };
                    for (name, v) in entries(t) {
                        let n = name.get_ref().as_ref();
                        if n.is_empty() || n.contains('=') || n.contains('\0') {
                            self.error(
                                &name.span(),
                                format!("`{n}` is not a valid environment variable name"),
                            );
                            continue;
                        }
                        let Some(s) = self.string(&format!("env.{n}"), v, "a string") else {
                            continue;
                        };
                        if s.contains('\0') {
                            self.error(&v.span(), format!("`env.{n}` contains a NUL byte"));
                            continue;
                        }
                        self.check_placeholders(s, &v.span());
                        raw.env.insert(n.to_string(), (s.to_string(), v.span()));
                    }
                }
                "restart" => {
                    let Some(s) =
                        self.string(k, value, "one of \"always\", \"on-failure\", \"never\"")
                    else {
                        continue;
                    };
                    let policy = match s {
                        "always" => RestartPolicy::Always,
                        "on-failure" => RestartPolicy::OnFailure,
                        "never" => RestartPolicy::Never,
                        _ => {
                            let d = self.error(&span, format!("unknown restart policy `{s}`, expected one of `always`, `on-failure`, `never`"));
                            if let Some(c) = values::closest(s, &RESTART_NAMES) {
                                d.help = Some(format!("did you mean `{c}`?"));
                            }
                            continue;
                        }
                    };
                    raw.restart = Some((policy, span));
                }
                "stop-signal" => {
                    let Some(s) = self.string(k, value, "a signal name such as \"TERM\"") else {
                        continue;
                    };
                    match values::parse_signal(s) {
                        Ok(sig) => raw.stop_signal = Some((sig, span)),
                        Err(e) => {
                            self.error(&span, e);
                        }
                    }
                }
                "stop-timeout" => match value.get_ref() {
                    DeValue::Integer(_) => {
                        if let Some(n) = self.integer(k, value, 1, u64::from(u32::MAX)) {
                            raw.stop_timeout = Some((Duration::from_secs(n), span));
                        }
                    }
                    DeValue::String(s) => match values::parse_duration(s) {
                        Ok(d) if d.is_zero() => {
                            self.error(&span, "`stop-timeout` must be longer than zero");
                        }
                        Ok(d) => raw.stop_timeout = Some((d, span)),
                        Err(e) => {
                            self.error(&span, format!("invalid `stop-timeout`: {e}"));
                        }
                    },
                    _ => {
                        self.wrong_type(k, value, "a duration such as \"30s\" or \"1m30s\"");
                    }
                },
                "limits" => {
                    let Some(t) = self.table(k, value) else { continue };
                    self.limits(t, &mut raw.limits);
                }
                _ => self.unknown_key(key, &SERVICE_KEYS),
            }
        }
        raw
    }

    fn only_nodes(&mut self, value: &Val<'_>) -> Option<Vec<(NodeId, Span)>> {
        let key = "only-nodes";
        let mut nodes: Vec<(NodeId, Span)> = Vec::new();
        match value.get_ref() {
            DeValue::String(s) => match NodeSet::parse_list(s) {
                Ok(set) => nodes.extend(set.iter().map(|n| (n, value.span()))),
                Err(e) => {
                    self.error(&value.span(), format!("invalid `only-nodes` `{s}`: {e}"));
                    return None;
                }
            },
            DeValue::Array(items) => {
                let mut ok = true;
                for item in items.iter() {
                    let Some(n) = self.integer(key, item, 0, u64::from(MAX_ID)) else {
                        ok = false;
                        continue;
                    };
                    let n = n as NodeId;
                    if let Some((_, first)) = nodes.iter().find(|(m, _)| *m == n) {
                        let at = self.location_text(first);
                        self.error(
                            &item.span(),
                            format!("node {n} is listed twice in `only-nodes`"),
                        )
                        .notes
                        .push(format!("first listed at {at}"));
                        ok = false;
                        continue;
                    }
                    nodes.push((n, item.span()));
                }
                if !ok {
                    return None;
                }
            }
            _ => {
                self.wrong_type(
                    key,
                    value,
                    "an array of node ids such as [0, 1] or a node list such as \"0-3\"",
                );
                return None;
            }
        }
        if nodes.is_empty() {
            self.error(&value.span(), "`only-nodes` is empty: no node could run this service");
            return None;
        }
        Some(nodes)
    }

    fn limits(&mut self, table: &DeTable<'_>, out: &mut BTreeMap<&'static str, (u64, Span)>) {
        for (key, value) in entries(table) {
            let Some(&name) = LIMIT_KEYS.iter().find(|k| **k == key.get_ref().as_ref()) else {
                self.unknown_key(key, &LIMIT_KEYS);
                continue;
            };
            let field = format!("limits.{name}");
            let is_bytes = matches!(name, "memlock" | "core" | "stack");
            let n = match value.get_ref() {
                DeValue::String(s) if matches!(s.trim(), "infinity" | "unlimited") => {
                    Some(u64::MAX)
                }
                DeValue::String(s) if is_bytes => match values::parse_size(s) {
                    Ok(n) => Some(n),
                    Err(e) => {
                        self.error(&value.span(), format!("invalid `{field}`: {e}"))
                            .help = Some("expected a byte size such as \"64MiB\", a number of bytes, or \"infinity\"".into());
                        None
                    }
                },
                DeValue::Integer(_) => self.integer(&field, value, 0, u64::MAX),
                DeValue::String(s) => {
                    self.error(
                        &value.span(),
                        format!("invalid `{field}` `{s}`: expected an integer or \"infinity\""),
                    );
                    None
                }
                _ => {
                    self.wrong_type(&field, value, "an integer or \"infinity\"");
                    None
                }
            };
            let Some(n) = n else { continue };
            // A process cannot even start without a file descriptor table or a stack.
            if n == 0 && matches!(name, "nofile" | "stack") {
                self.error(
                    &value.span(),
                    format!("`{field}` is zero: the service could not start"),
                );
                continue;
            }
            out.insert(name, (n, value.span()));
        }
    }

    /// Builds one service from its table merged over `[defaults]`, and checks what involves
    /// several keys.
    fn service(
        &mut self,
        name: &str,
        name_span: &Span,
        merged: &RawService,
        own: &RawService,
    ) -> Option<(Service, ServiceSpans)> {
        let Some((command, command_span)) = merged.command.clone() else {
            if !own.command_written {
                self.error(name_span, format!("service `{name}` has no `command`"))
                    .help = Some("add e.g. `command = [\"/usr/bin/server\", \"--config\", \"/etc/server-{instance}.toml\"]`".into());
            }
            return None;
        };
        let count = merged.instances.as_ref().map_or(1, |(n, _)| *n);
        let (size, size_span) = match (&merged.nodes, &merged.cpus) {
            (Some((n, s)), _) => (InstanceSize::Nodes(*n), Some(s.clone())),
            (None, Some((n, s))) => (InstanceSize::Cpus(*n), Some(s.clone())),
            (None, None) => (InstanceSize::Nodes(1), None),
        };
        let per_instance_strings = command
            .iter()
            .chain(merged.unit.iter().map(|(u, _)| u))
            .chain(merged.working_dir.iter().map(|(w, _)| w))
            .chain(merged.env.values().map(|(v, _)| v));
        if count > 1 && !per_instance_strings.clone().any(|s| s.contains(PLACEHOLDER)) {
            self.warning(
                &command_span,
                format!(
                    "all {count} instances of `{name}` run the same command with the same settings"
                ),
            )
            .help = Some(format!(
                "use `{PLACEHOLDER}` (0 to {}) in `command`, `working-dir` or `env` to give each instance its own data, config or port",
                count - 1
            ));
        }
        // What does not change per instance is allocated once and shared.
        let command: Vec<Arc<str>> = command.iter().map(|a| Arc::from(a.as_str())).collect();
        let instances = (0..count)
            .map(|index| Instance {
                name: if count == 1 { name.to_string() } else { format!("{name}-{index}") },
                index,
                command: command.iter().map(|a| instantiate(a, index)).collect(),
                near: merged.near.iter().flatten().map(|(n, _)| substitute(n, index)).collect(),
                unit: merged.unit.as_ref().map(|(u, _)| substitute(u, index)),
                working_dir: merged
                    .working_dir
                    .as_ref()
                    .map(|(w, _)| PathBuf::from(substitute(w, index))),
                env: merged
                    .env
                    .iter()
                    .map(|(k, (v, _))| (k.clone(), substitute(v, index)))
                    .collect(),
            })
            .collect();
        let limit = |k: &str| merged.limits.get(k).map(|(n, _)| *n);
        let service = Service {
            name: name.to_string(),
            size,
            memory: merged.memory.as_ref().map(|(n, _)| *n),
            memory_policy: merged.memory_policy.as_ref().map_or(DEFAULT_MEMORY_POLICY, |(p, _)| *p),
            only_nodes: merged
                .only_nodes
                .as_ref()
                .map(|v| v.iter().map(|(n, _)| *n).collect::<IdSet>()),
            instances,
            user: merged.user.as_ref().map(|(u, _)| u.clone()),
            group: merged.group.as_ref().map(|(g, _)| g.clone()),
            restart: merged.restart.as_ref().map_or_else(RestartPolicy::default, |(r, _)| *r),
            stop_signal: merged
                .stop_signal
                .as_ref()
                .map_or(DEFAULT_STOP_SIGNAL, |(s, _)| *s)
                .to_string(),
            stop_timeout: merged.stop_timeout.as_ref().map_or(DEFAULT_STOP_TIMEOUT, |(d, _)| *d),
            limits: Limits {
                nofile: limit("nofile"),
                nproc: limit("nproc"),
                memlock: limit("memlock"),
                core: limit("core"),
                stack: limit("stack"),
            },
        };
        let spans = ServiceSpans {
            name: name_span.clone(),
            size: size_span,
            instances: merged.instances.as_ref().map(|(_, s)| s.clone()),
            memory: merged.memory.as_ref().map(|(_, s)| s.clone()),
            memory_policy: merged.memory_policy.as_ref().map(|(_, s)| s.clone()),
            only_nodes: merged.only_nodes.clone().unwrap_or_default(),
            near: merged.near.iter().flatten().map(|(_, s)| s.clone()).collect(),
            command: Some(command_span),
            unit: merged.unit.as_ref().map(|(_, s)| s.clone()),
        };
        Some((service, spans))
    }
}

/// A service table over `[defaults]`: each key the service writes replaces the default, except
/// `env` and `limits`, which merge per variable and per limit (the service wins). `nodes` and
/// `cpus` count as one key: a service that writes either ignores both defaults.
fn merge(defaults: &RawService, own: &RawService) -> RawService {
    fn pick<T: Clone>(own: &Sp<T>, default: &Sp<T>) -> Sp<T> {
        own.clone().or_else(|| default.clone())
    }
    let (nodes, cpus) = if own.size_written {
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
        size_written: own.size_written || defaults.size_written,
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
