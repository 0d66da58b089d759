//! The interrupt keys: `[host] steer-interrupts` and each service's `interrupts`
//! (docs/config.md, docs/irq.md).

use std::collections::BTreeMap;

/// What a service wants of the interrupts on its CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServiceInterrupts {
    /// No movable interrupt on its CPUs (the default).
    #[default]
    Quiet,
    /// Its CPUs take the queue interrupts of the NICs its `near` names, spread over them
    /// (perftune's `mq` mode, where receive flow steering puts each flow's queue on the CPU
    /// that reads it); other interrupts are not kept off them.
    NicQueues,
}

impl ServiceInterrupts {
    /// The names the file uses, in order.
    pub const NAMES: [&'static str; 2] = ["quiet", "nic-queues"];

    /// Its name in the file.
    pub fn name(self) -> &'static str {
        match self {
            ServiceInterrupts::Quiet => "quiet",
            ServiceInterrupts::NicQueues => "nic-queues",
        }
    }

    /// The value named `name`.
    pub fn from_name(name: &str) -> Option<ServiceInterrupts> {
        match name {
            "quiet" => Some(ServiceInterrupts::Quiet),
            "nic-queues" => Some(ServiceInterrupts::NicQueues),
            _ => None,
        }
    }
}

/// Everything the file says about interrupts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterruptsConfig {
    /// `[host] steer-interrupts`: `pinctl run` and `pinctl irq apply` move interrupts as the
    /// plan says (off by default).
    pub steer: bool,
    /// Each service's `interrupts`, by service name (a service the file does not name is
    /// `quiet`).
    pub services: BTreeMap<String, ServiceInterrupts>,
}

impl InterruptsConfig {
    /// A service's `interrupts`.
    pub fn of(&self, service: &str) -> ServiceInterrupts {
        self.services.get(service).copied().unwrap_or_default()
    }

    /// Whether pinctl keeps movable interrupts off `service`'s CPUs: steering is on and the
    /// service is `quiet`.
    pub fn keeps_quiet(&self, service: &str) -> bool {
        self.steer && self.of(service) == ServiceInterrupts::Quiet
    }
}
