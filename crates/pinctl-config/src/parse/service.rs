//! The keys of a `[service.NAME]` table (and `[defaults]`), one reader each, and how a
//! service's merged keys become its instances.

use super::*;

impl Walker {
    /// Checks each value of a `[service.NAME]` or `[defaults]` table on its own.
    pub(super) fn service_table(&mut self, table: &DeTable<'_>) -> RawService {
        let mut raw = RawService::default();
        self.read_table(table, SERVICE_READERS, &mut raw);
        raw
    }

    pub(super) fn read_instances(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        raw.instances = self
            .integer(key.get_ref(), value, 1, u64::from(MAX_INSTANCES))
            .map(|n| (n as u32, value.span()));
    }

    /// `nodes` or `cpus`: an instance is sized by one of them.
    pub(super) fn read_size(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let k = key.get_ref().as_ref();
        if let Some((other, other_span)) = &raw.size_key {
            let at = self.location_text(other_span);
            let d = self.error(
                &key.span(),
                "`nodes` and `cpus` are both set: an instance is sized by one of them",
            );
            d.notes.push(format!("`{other}` is set at {at}"));
            d.help = Some("`nodes = N` gives each instance N whole nodes; `cpus = N` gives it N CPUs packed inside a node".into());
        }
        raw.size_key = Some((if k == "nodes" { "nodes" } else { "cpus" }, key.span()));
        let n = self.integer(k, value, 1, u64::from(MAX_ID)).map(|n| (n as u32, value.span()));
        if k == "nodes" {
            raw.nodes = n;
        } else {
            raw.cpus = n;
        }
    }

    pub(super) fn read_memory(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let span = value.span();
        if let Some(n) = self.size(key.get_ref(), value) {
            if n == 0 {
                self.error(&span, "`memory` is zero").help =
                    Some("leave `memory` out when the instance's memory need is unknown".into());
            } else {
                raw.memory = Some((n, span));
            }
        }
    }

    pub(super) fn read_memory_policy(
        &mut self,
        raw: &mut RawService,
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let span = value.span();
        let Some(s) = self.string(key.get_ref(), value, "a memory policy name") else { return };
        match s.parse::<MemoryPolicy>() {
            Ok(p) => raw.memory_policy = Some((p, span)),
            Err(e) => {
                let names: Vec<&str> = MemoryPolicy::ALL.iter().map(|p| p.name()).collect();
                let d = self.error(&span, e.to_string());
                if let Some(c) = values::closest(s, &names) {
                    d.help = Some(format!("did you mean `{c}`?"));
                }
            }
        }
    }

    pub(super) fn read_near(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let k = key.get_ref().as_ref();
        let items: Vec<&Val<'_>> = match value.get_ref() {
            // A lone string is a one-element list: unambiguous and common.
            DeValue::String(_) => vec![value],
            DeValue::Array(a) => a.iter().collect(),
            _ => {
                self.wrong_type(k, value, "an array of devices or paths");
                return;
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

    pub(super) fn read_only_nodes(&mut self, raw: &mut RawService, _: &Key<'_>, value: &Val<'_>) {
        raw.only_nodes = self.only_nodes(value);
    }

    pub(super) fn read_unit(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let span = value.span();
        let Some(s) = self.non_empty_string(key.get_ref(), value) else { return };
        if !values::is_service_unit_name(&substitute(s, 0)) {
            self.error(&span, format!("`{s}` is not a systemd service unit name"))
                .help = Some("expected a name such as `tikv@{instance}.service`: letters, digits, `:-_.\\@`, ending in `.service`".into());
            return;
        }
        raw.unit = Some((s.to_string(), span));
    }

    pub(super) fn read_command(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let k = key.get_ref().as_ref();
        let span = value.span();
        raw.command_written = true;
        let Some(items) =
            self.array(k, value, "an array of strings, e.g. [\"/usr/bin/server\", \"--flag\"]")
        else {
            return;
        };
        if items.is_empty() {
            self.error(&span, "`command` is empty").help = Some(
                "give the program and its arguments, e.g. `command = [\"/usr/bin/tikv-server\"]`"
                    .into(),
            );
            return;
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

    /// `user` or `group`: a name or a numeric id.
    pub(super) fn read_account(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let k = key.get_ref().as_ref();
        let span = value.span();
        let Some(s) = self.non_empty_string(k, value) else { return };
        if !values::is_account_name(s) {
            self.error(&span, format!("`{s}` is not a valid {k} name or id"));
            return;
        }
        let v = Some((s.to_string(), span));
        if k == "user" {
            raw.user = v;
        } else {
            raw.group = v;
        }
    }

    pub(super) fn read_working_dir(
        &mut self,
        raw: &mut RawService,
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let span = value.span();
        let Some(s) = self.non_empty_string(key.get_ref(), value) else { return };
        if !substitute(s, 0).starts_with('/') {
            self.error(&span, format!("`working-dir` must be an absolute path, not `{s}`"));
            return;
        }
        raw.working_dir = Some((s.to_string(), span));
    }

    pub(super) fn read_env(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let Some(t) = self.table(key.get_ref(), value) else { return };
        for (name, v) in entries(t) {
            let n = name.get_ref().as_ref();
            if n.is_empty() || n.contains('=') || n.contains('\0') {
                self.error(&name.span(), format!("`{n}` is not a valid environment variable name"));
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

    pub(super) fn read_restart(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let policies = [RestartPolicy::Always, RestartPolicy::OnFailure, RestartPolicy::Never];
        let policy =
            self.one_of(key.get_ref(), value, "restart policy", &policies, RestartPolicy::name);
        raw.restart = policy.map(|p| (p, value.span()));
    }

    pub(super) fn read_stop_signal(
        &mut self,
        raw: &mut RawService,
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let span = value.span();
        let Some(s) = self.string(key.get_ref(), value, "a signal name such as \"TERM\"") else {
            return;
        };
        match values::parse_signal(s) {
            Ok(sig) => raw.stop_signal = Some((sig, span)),
            Err(e) => {
                self.error(&span, e);
            }
        }
    }

    pub(super) fn read_stop_timeout(
        &mut self,
        raw: &mut RawService,
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let k = key.get_ref().as_ref();
        let span = value.span();
        match value.get_ref() {
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
        }
    }

    pub(super) fn read_limits(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let Some(t) = self.table(key.get_ref(), value) else { return };
        self.limits(t, &mut raw.limits);
    }

    /// `restart-delay` or `restart-max-delay`.
    pub(super) fn read_restart_delay(
        &mut self,
        raw: &mut RawService,
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let k = key.get_ref().as_ref();
        let Some(d) = self.duration(k, value, false) else { return };
        if k == "restart-delay" {
            raw.restart_delay = Some((d, value.span()));
        } else {
            raw.restart_max_delay = Some((d, value.span()));
        }
    }

    pub(super) fn read_start_limit(
        &mut self,
        raw: &mut RawService,
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let span = value.span();
        let Some(s) = self.string(key.get_ref(), value, "a limit such as \"5/10s\", or \"off\"")
        else {
            return;
        };
        if s.trim() == "off" {
            raw.start_limit = Some((None, span));
            return;
        }
        match values::parse_start_limit(s) {
            Ok((burst, interval)) => {
                raw.start_limit = Some((Some(StartLimit { burst, interval }), span));
            }
            Err(e) => {
                self.error(&span, format!("invalid `start-limit` `{s}`: {e}")).help = Some(
                    "write at most N starts within a duration as `N/DURATION`, e.g. \
                     `start-limit = \"5/10s\"`, or `start-limit = \"off\"` for no limit"
                        .into(),
                );
            }
        }
    }

    pub(super) fn read_enforce(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let span = value.span();
        let Some(s) = self.string(key.get_ref(), value, "\"cgroup\"") else { return };
        if s != "cgroup" {
            self.error(&span, format!("unknown `enforce` value `{s}`, expected `cgroup`")).help =
                Some(
                    "leave `enforce` out to rely on the affinity and memory policy set at start"
                        .into(),
                );
            return;
        }
        raw.enforce = Some((Enforce::Cgroup, span));
    }

    pub(super) fn read_interrupts(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let span = value.span();
        let Some(s) = self.string(key.get_ref(), value, "\"quiet\" or \"nic-queues\"") else {
            return;
        };
        match ServiceInterrupts::from_name(s) {
            Some(mode) => raw.interrupts = Some((mode, span)),
            None => {
                let d = self.error(
                    &span,
                    format!("unknown `interrupts` value `{s}`, expected `quiet` or `nic-queues`"),
                );
                d.help = Some(match values::closest(s, &ServiceInterrupts::NAMES) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => "`quiet` keeps movable interrupts off the service's CPUs; \
                             `nic-queues` spreads the queues of its `near` NICs over them"
                        .into(),
                });
            }
        }
    }

    pub(super) fn read_output(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let Some(s) = self.absolute_path(key.get_ref(), value) else { return };
        raw.output = Some((s.to_string(), value.span()));
    }

    /// Whether the service's instances may share nodes: `share-nodes` as written, or the
    /// default of its size (`when-needed` without a size, `never` with `nodes = N`). Sharing is
    /// for one-node instances: a service's own `share-nodes` other than `never` beside
    /// `nodes = 2` or `cpus = N` is an error, and a `[defaults]` value does not apply to them.
    pub(super) fn share_nodes(
        &mut self,
        name: &str,
        size: InstanceSize,
        merged: &RawService,
        own: &RawService,
    ) -> ShareNodes {
        let one_node = size == InstanceSize::Nodes(1);
        let written = merged.share_nodes.as_ref().filter(|_| one_node || own.share_nodes.is_some());
        let mode = match written {
            Some((mode, span)) if mode.shares() && !one_node => {
                let why = match size {
                    InstanceSize::Cpus(_) => {
                        "`cpus = N` instances already share nodes, each with CPUs of its own"
                            .to_string()
                    }
                    InstanceSize::Nodes(n) => format!("its instances take `nodes = {n}` each"),
                };
                self.error(
                    span,
                    format!(
                        "`share-nodes = \"{}\"` is for instances of one node; {why}",
                        mode.name()
                    ),
                )
                .help = Some(match size {
                    InstanceSize::Cpus(_) => {
                        "to let `cpus = N` instances share CPUs, set `cpu-overcommit` in `[host]`"
                            .into()
                    }
                    InstanceSize::Nodes(_) => {
                        "remove `share-nodes`, or size the service `nodes = 1`".into()
                    }
                });
                ShareNodes::Never
            }
            Some((mode, _)) => *mode,
            None if merged.size_key.is_none() => ShareNodes::WhenNeeded,
            None => ShareNodes::Never,
        };
        if let (Some((_, span)), false) = (&own.share_weight, mode.shares()) {
            self.warning(
                span,
                format!("`share-weight` has no effect: the instances of `{name}` do not share nodes"),
            )
            .help = Some("`share-weight` weighs instances of `share-nodes = \"when-needed\"` or `\"always\"`".into());
        }
        mode
    }

    pub(super) fn read_share_nodes(
        &mut self,
        raw: &mut RawService,
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        let modes = [ShareNodes::Never, ShareNodes::WhenNeeded, ShareNodes::Always];
        let mode =
            self.one_of(key.get_ref(), value, "`share-nodes` value", &modes, ShareNodes::name);
        raw.share_nodes = mode.map(|m| (m, value.span()));
    }

    pub(super) fn read_share_weight(
        &mut self,
        raw: &mut RawService,
        key: &Key<'_>,
        value: &Val<'_>,
    ) {
        raw.share_weight = self
            .integer(key.get_ref(), value, 1, u64::from(MAX_SHARE_WEIGHT))
            .map(|n| (n as u32, value.span()));
    }

    /// The first and the longest restart delay, each at least [`MIN_RESTART_DELAY`] (a
    /// shorter one is raised, with a warning at the value); the longest may not be the
    /// shorter.
    pub(super) fn restart_delays(&mut self, merged: &RawService) -> (Duration, Duration) {
        let mut floored = |key: &str, given: &Sp<Duration>, default: Duration| match given {
            Some((d, span)) if *d < MIN_RESTART_DELAY => {
                self.warning(
                    span,
                    format!(
                        "`{key}` of {d:?} is below the {MIN_RESTART_DELAY:?} floor and is raised \
                         to {MIN_RESTART_DELAY:?}"
                    ),
                )
                .help = Some(
                    "a shorter delay only makes a crashing instance restart faster; \
                     `start-limit` decides how many restarts are tried"
                        .into(),
                );
                MIN_RESTART_DELAY
            }
            Some((d, _)) => *d,
            None => default,
        };
        let first = floored("restart-delay", &merged.restart_delay, DEFAULT_RESTART_DELAY);
        let max =
            floored("restart-max-delay", &merged.restart_max_delay, DEFAULT_RESTART_MAX_DELAY);
        if max < first {
            let span = merged.restart_max_delay.as_ref().or(merged.restart_delay.as_ref());
            if let Some((_, span)) = span {
                self.error(
                    span,
                    format!(
                        "`restart-max-delay` ({max:?}) is shorter than `restart-delay` ({first:?})"
                    ),
                )
                .help =
                    Some("the delay grows from `restart-delay` up to `restart-max-delay`".into());
            }
        }
        (first, max)
    }

    /// A drift key of a service or `[defaults]` table (parse/drift.rs reads them all).
    pub(super) fn read_drift(&mut self, raw: &mut RawService, key: &Key<'_>, value: &Val<'_>) {
        let known = self.drift_key(key.get_ref(), value, &mut raw.drift);
        debug_assert!(known, "SERVICE_READERS lists a drift key drift_key does not read");
    }

    pub(super) fn only_nodes(&mut self, value: &Val<'_>) -> Option<Vec<(NodeId, Span)>> {
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

    pub(super) fn limits(
        &mut self,
        table: &DeTable<'_>,
        out: &mut BTreeMap<&'static str, (u64, Span)>,
    ) {
        for (key, value) in entries(table) {
            let Some(&(name, rule)) =
                LIMIT_RULES.iter().find(|(k, _)| *k == key.get_ref().as_ref())
            else {
                self.unknown_key(key, &LIMIT_KEYS);
                continue;
            };
            let field = format!("limits.{name}");
            let is_bytes = rule.bytes;
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
            if n == 0 && rule.nonzero {
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
    pub(super) fn service(
        &mut self,
        name: &str,
        name_span: &Span,
        merged: &RawService,
        own: &RawService,
        expand: bool,
    ) -> Option<(Service, ServiceSpans)> {
        let Some((command, command_span)) = merged.command.clone() else {
            if !own.command_written {
                self.error(name_span, format!("service `{name}` has no `command`"))
                    .help = Some("add e.g. `command = [\"/usr/bin/server\", \"--config\", \"/etc/server-{instance}.toml\"]`".into());
            }
            return None;
        };
        let count = merged.instance_count();
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
        if expand && count > 1 && !per_instance_strings.clone().any(|s| s.contains(PLACEHOLDER)) {
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
        let instances = (0..if expand { count } else { 0 })
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
                output: merged.output.as_ref().map(|(o, _)| PathBuf::from(substitute(o, index))),
            })
            .collect();
        let limit = |k: &str| merged.limits.get(k).map(|(n, _)| *n);
        let (restart_delay, restart_max_delay) = self.restart_delays(merged);
        let share_nodes = self.share_nodes(name, size, merged, own);
        let service = Service {
            name: name.to_string(),
            size,
            memory: merged.memory.as_ref().map(|(n, _)| *n),
            memory_policy: merged.memory_policy.as_ref().map_or(DEFAULT_MEMORY_POLICY, |(p, _)| *p),
            only_nodes: merged
                .only_nodes
                .as_ref()
                .map(|v| v.iter().map(|(n, _)| *n).collect::<NodeSet>()),
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
            restart_delay,
            restart_max_delay,
            start_limit: merged.start_limit.as_ref().map_or(Some(DEFAULT_START_LIMIT), |(l, _)| *l),
            enforce: merged.enforce.as_ref().map(|(e, _)| *e),
            share_nodes,
            share_weight: merged.share_weight.as_ref().map_or(1, |(w, _)| *w),
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
            user: merged.user.as_ref().map(|(_, s)| s.clone()),
            group: merged.group.as_ref().map(|(_, s)| s.clone()),
        };
        Some((service, spans))
    }
}
