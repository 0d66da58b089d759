//! The keys of `pinctl watch` and drift handling: `[host]` `watch-interval`, `metrics-listen`,
//! `node-free-watermark`, and per service `on-drift`, `drift-hold`, `min-locality`, ... (see
//! docs/config.md, "Drift keys").

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What the watcher does when an instance drifts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDrift {
    /// Record it in metrics only.
    Ignore,
    /// Log it and run `alert-command` (the default).
    #[default]
    Alert,
    /// Alert, and move threads and memory back.
    Rebalance,
}

impl OnDrift {
    /// Its name in the file.
    pub fn name(self) -> &'static str {
        match self {
            OnDrift::Ignore => "ignore",
            OnDrift::Alert => "alert",
            OnDrift::Rebalance => "rebalance",
        }
    }
}

/// One service's drift settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DriftSettings {
    pub on_drift: OnDrift,
    /// How long a drift condition must hold before it counts.
    pub drift_hold: Duration,
    /// Fraction of memory that must be on the planned nodes.
    pub min_locality: f64,
    /// Instances with less resident memory are not judged on locality.
    pub min_memory: u64,
    /// Run at each drift start (argv, no shell); `None` logs only.
    pub alert_command: Option<Vec<String>>,
    /// Least time between two alert commands for one instance and kind of drift.
    pub alert_cooldown: Duration,
    /// Bytes per second a rebalance moves at most.
    pub rebalance_rate: u64,
    /// Longest a single `move_pages` batch may stall the instance.
    pub rebalance_stall: Duration,
    /// Least time between two rebalances of one instance.
    pub rebalance_cooldown: Duration,
    /// Whether interrupts firing on the instance's CPUs are drift: `[host] steer-interrupts`
    /// is on and the service's `interrupts` is `quiet` (docs/irq.md).
    pub quiet_interrupts: bool,
}

impl DriftSettings {
    pub const DEFAULT_HOLD: Duration = Duration::from_secs(30);
    pub const DEFAULT_MIN_LOCALITY: f64 = 0.9;
    pub const DEFAULT_MIN_MEMORY: u64 = 64 << 20;
    pub const DEFAULT_ALERT_COOLDOWN: Duration = Duration::from_secs(600);
    pub const DEFAULT_REBALANCE_RATE: u64 = 256 << 20;
    pub const DEFAULT_REBALANCE_STALL: Duration = Duration::from_millis(20);
    pub const DEFAULT_REBALANCE_COOLDOWN: Duration = Duration::from_secs(300);
}

impl Default for DriftSettings {
    fn default() -> Self {
        DriftSettings {
            on_drift: OnDrift::default(),
            drift_hold: Self::DEFAULT_HOLD,
            min_locality: Self::DEFAULT_MIN_LOCALITY,
            min_memory: Self::DEFAULT_MIN_MEMORY,
            alert_command: None,
            alert_cooldown: Self::DEFAULT_ALERT_COOLDOWN,
            rebalance_rate: Self::DEFAULT_REBALANCE_RATE,
            rebalance_stall: Self::DEFAULT_REBALANCE_STALL,
            rebalance_cooldown: Self::DEFAULT_REBALANCE_COOLDOWN,
            quiet_interrupts: false,
        }
    }
}

/// Everything the watcher reads from the file besides the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchConfig {
    /// Time between two samples (`[host] watch-interval`).
    pub interval: Duration,
    /// Where Prometheus metrics are served; `None`: not served.
    pub metrics_listen: Option<SocketAddr>,
    /// Free bytes under which a planned node is under pressure; `None`: the memory reserve
    /// (`memory-reserve`, or 2% of the node).
    pub node_free_watermark: Option<u64>,
    /// Drift settings per service name.
    pub services: BTreeMap<String, DriftSettings>,
    /// The `pid-file` of each instance that has one, `{instance}` substituted.
    pub pid_files: BTreeMap<String, PathBuf>,
}

impl WatchConfig {
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

    /// A service's settings (the defaults for a service the file does not name).
    pub fn drift(&self, service: &str) -> DriftSettings {
        self.services.get(service).cloned().unwrap_or_default()
    }
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            interval: Self::DEFAULT_INTERVAL,
            metrics_listen: None,
            node_free_watermark: None,
            services: BTreeMap::new(),
            pid_files: BTreeMap::new(),
        }
    }
}
