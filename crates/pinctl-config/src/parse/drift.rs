//! The drift and watch keys (docs/config.md, "Drift keys"), read by the same walker as every
//! other key: each value is checked on its own, with its span, and problems are collected.

use std::time::Duration;

use toml::de::DeValue;

use super::{Sp, Val, Walker};
use crate::diagnostic::Span;
use crate::values;
use crate::watch::{DriftSettings, OnDrift, WatchConfig};

/// The drift keys of one table, each checked on its own.
#[derive(Default, Clone)]
pub(super) struct RawDrift {
    on_drift: Sp<OnDrift>,
    drift_hold: Sp<Duration>,
    min_locality: Sp<f64>,
    min_memory: Sp<u64>,
    alert_command: Sp<Vec<String>>,
    alert_cooldown: Sp<Duration>,
    rebalance_rate: Sp<u64>,
    rebalance_stall: Sp<Duration>,
    rebalance_cooldown: Sp<Duration>,
    pub(super) pid_file: Sp<String>,
}

impl RawDrift {
    /// This table's keys over `[defaults]`: each key the service writes wins.
    pub(super) fn over(&self, defaults: &RawDrift) -> RawDrift {
        fn pick<T: Clone>(own: &Sp<T>, default: &Sp<T>) -> Sp<T> {
            own.clone().or_else(|| default.clone())
        }
        RawDrift {
            on_drift: pick(&self.on_drift, &defaults.on_drift),
            drift_hold: pick(&self.drift_hold, &defaults.drift_hold),
            min_locality: pick(&self.min_locality, &defaults.min_locality),
            min_memory: pick(&self.min_memory, &defaults.min_memory),
            alert_command: pick(&self.alert_command, &defaults.alert_command),
            alert_cooldown: pick(&self.alert_cooldown, &defaults.alert_cooldown),
            rebalance_rate: pick(&self.rebalance_rate, &defaults.rebalance_rate),
            rebalance_stall: pick(&self.rebalance_stall, &defaults.rebalance_stall),
            rebalance_cooldown: pick(&self.rebalance_cooldown, &defaults.rebalance_cooldown),
            pid_file: pick(&self.pid_file, &defaults.pid_file),
        }
    }

    /// The settings, defaults filled in.
    pub(super) fn settings(&self) -> DriftSettings {
        let d = DriftSettings::default();
        fn get<T: Clone>(v: &Sp<T>, default: T) -> T {
            v.as_ref().map_or(default, |(v, _)| v.clone())
        }
        DriftSettings {
            on_drift: get(&self.on_drift, d.on_drift),
            drift_hold: get(&self.drift_hold, d.drift_hold),
            min_locality: get(&self.min_locality, d.min_locality),
            min_memory: get(&self.min_memory, d.min_memory),
            alert_command: self.alert_command.as_ref().map(|(c, _)| c.clone()),
            alert_cooldown: get(&self.alert_cooldown, d.alert_cooldown),
            rebalance_rate: get(&self.rebalance_rate, d.rebalance_rate),
            rebalance_stall: get(&self.rebalance_stall, d.rebalance_stall),
            rebalance_cooldown: get(&self.rebalance_cooldown, d.rebalance_cooldown),
            // Set once the whole file is read: it depends on `[host] steer-interrupts`.
            quiet_interrupts: d.quiet_interrupts,
        }
    }
}

fn with_span<T>(v: Option<T>, span: &Span) -> Sp<T> {
    v.map(|v| (v, span.clone()))
}

impl Walker {
    /// A duration: an integer of seconds or a string such as `"30s"`; zero is refused
    /// unless `zero_ok`.
    pub(super) fn duration(
        &mut self,
        key: &str,
        value: &Val<'_>,
        zero_ok: bool,
    ) -> Option<Duration> {
        let d = match value.get_ref() {
            DeValue::Integer(_) => {
                Duration::from_secs(self.integer(key, value, 0, u64::from(u32::MAX))?)
            }
            DeValue::String(s) => match values::parse_duration(s) {
                Ok(d) => d,
                Err(e) => {
                    self.error(&value.span(), format!("invalid `{key}`: {e}"));
                    return None;
                }
            },
            _ => {
                self.wrong_type(key, value, "a duration such as \"30s\" or \"1m30s\"");
                return None;
            }
        };
        if d.is_zero() && !zero_ok {
            self.error(&value.span(), format!("`{key}` must be longer than zero"));
            return None;
        }
        Some(d)
    }

    /// One drift key of a service or `[defaults]` table; `false` when `key` is not one.
    pub(super) fn drift_key(&mut self, key: &str, value: &Val<'_>, raw: &mut RawDrift) -> bool {
        let span = value.span();
        match key {
            "on-drift" => {
                let actions = [OnDrift::Ignore, OnDrift::Alert, OnDrift::Rebalance];
                let action = self.one_of(key, value, "`on-drift` action", &actions, OnDrift::name);
                raw.on_drift = with_span(action, &span);
            }
            "drift-hold" => raw.drift_hold = with_span(self.duration(key, value, true), &span),
            "alert-cooldown" => {
                raw.alert_cooldown = with_span(self.duration(key, value, true), &span);
            }
            "rebalance-stall" => {
                raw.rebalance_stall = with_span(self.duration(key, value, false), &span);
            }
            "rebalance-cooldown" => {
                raw.rebalance_cooldown = with_span(self.duration(key, value, true), &span);
            }
            "min-locality" => raw.min_locality = with_span(self.min_locality(key, value), &span),
            "min-memory" => raw.min_memory = with_span(self.size(key, value), &span),
            "rebalance-rate" => {
                let n = self.size(key, value);
                if n == Some(0) {
                    self.error(&span, "`rebalance-rate` is zero: nothing could be moved").help =
                        Some("use `on-drift = \"alert\"` to never move memory".into());
                    return true;
                }
                raw.rebalance_rate = with_span(n, &span);
            }
            "alert-command" => {
                raw.alert_command = with_span(self.alert_command(key, value), &span);
            }
            "pid-file" => {
                let Some(s) = self.non_empty_string(key, value) else { return true };
                if !super::substitute(s, 0).starts_with('/') {
                    self.error(&span, format!("`pid-file` must be an absolute path, not `{s}`"));
                    return true;
                }
                raw.pid_file = Some((s.to_string(), span));
            }
            _ => return false,
        }
        true
    }

    /// `min-locality`: a fraction from 0 to 1, or `None` once the problem is said.
    fn min_locality(&mut self, key: &str, value: &Val<'_>) -> Option<f64> {
        let f = match value.get_ref() {
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            DeValue::Integer(i) => i.as_str().parse::<f64>().ok(),
            _ => {
                self.wrong_type(key, value, "a fraction from 0 to 1 such as 0.9");
                return None;
            }
        };
        match f {
            Some(f) if (0.0..=1.0).contains(&f) => Some(f),
            _ => {
                let span = value.span();
                let shown = self.file.slice(&span).to_string();
                self.error(
                    &span,
                    format!("`min-locality` must be a fraction from 0 to 1, not `{shown}`"),
                )
                .help = Some("90% is written `min-locality = 0.9`".into());
                None
            }
        }
    }

    /// `alert-command`: the program and its arguments, or `None` once the problem is said.
    fn alert_command(&mut self, key: &str, value: &Val<'_>) -> Option<Vec<String>> {
        let expected = "an array of strings, e.g. [\"/usr/local/bin/page-oncall\"]";
        let items = self.array(key, value, expected)?;
        if items.is_empty() {
            self.error(&value.span(), "`alert-command` is empty").help =
                Some("leave `alert-command` out to only log drift".into());
            return None;
        }
        let mut argv = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let s = self.string(key, item, "a string")?;
            if (i == 0 && s.trim().is_empty()) || s.contains('\0') {
                self.error(
                    &item.span(),
                    "the program in `alert-command` is empty or has a NUL byte",
                );
                return None;
            }
            argv.push(s.to_string());
        }
        Some(argv)
    }

    /// One watch key of `[host]`; `false` when `key` is not one.
    pub(super) fn watch_host_key(
        &mut self,
        key: &str,
        value: &Val<'_>,
        watch: &mut WatchConfig,
    ) -> bool {
        match key {
            "watch-interval" => {
                if let Some(d) = self.duration(key, value, false) {
                    watch.interval = d;
                }
            }
            "metrics-listen" => {
                let Some(s) =
                    self.string(key, value, "an address and port such as \"127.0.0.1:9464\"")
                else {
                    return true;
                };
                match s.parse() {
                    Ok(a) => watch.metrics_listen = Some(a),
                    Err(_) => {
                        self.error(
                            &value.span(),
                            format!(
                                "invalid `metrics-listen` `{s}`: expected an IP address and a port"
                            ),
                        )
                        .help =
                            Some("e.g. `127.0.0.1:9464`, `0.0.0.0:9464` or `[::1]:9464`".into());
                    }
                }
            }
            "node-free-watermark" => {
                if let Some(n) = self.size(key, value) {
                    watch.node_free_watermark = Some(n);
                }
            }
            _ => return false,
        }
        true
    }
}
