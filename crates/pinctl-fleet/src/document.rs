//! One host's value in `pinctl fleet --json`: its plan as `pinctl plan --json` writes it and
//! the drop-ins `pinctl plan --emit systemd` would write, or why it has none: what an Ansible
//! play takes as the host's `pinctl` variable (docs/fleet.md, "Ansible").

use pinctl_launch::ServiceFile;
use pinctl_launch::emit::DropIn;
use pinctl_plan::Plan;

use crate::HostError;

/// A host's value under `hosts`.
#[derive(Debug, serde::Serialize)]
pub struct HostDocument {
    pub host: String,
    /// `null` when the host has no plan.
    pub plan: Option<pinctl_plan::PlanDocument>,
    /// Why the host has no plan; `null` when it has one.
    pub error: Option<String>,
    /// `unit`, `path` (`<unit>.d/50-pinctl.conf`, under the systemd folder) and `content` of
    /// each instance's drop-in; empty without a plan, or when systemd cannot apply it.
    pub systemd_drop_ins: Vec<DropIn>,
    /// Why systemd cannot apply the plan (a memory policy it has no `NUMAPolicy=` for, a unit
    /// name it refuses); `null` when it can or there is no plan.
    pub systemd_error: Option<String>,
}

impl HostDocument {
    /// The document of `host`'s outcome.
    pub fn of(host: &str, outcome: Result<(ServiceFile, Plan), HostError>) -> HostDocument {
        let mut document = HostDocument {
            host: host.to_string(),
            plan: None,
            error: None,
            systemd_drop_ins: Vec::new(),
            systemd_error: None,
        };
        let (file, plan) = match outcome {
            Ok(planned) => planned,
            Err(e) => {
                document.error = Some(e.to_string());
                return document;
            }
        };
        let config_warnings: Vec<String> = file.diagnostics.iter().map(|d| d.one_line()).collect();
        let mut plan_document = plan.document(&file.loaded.topology.warnings, &config_warnings);
        plan_document.interrupts_on_service_cpus = pinctl_irq::landing::of_plan(&file, &plan);
        // As `pinctl plan` names them: the file each instance is defined in, its supervisor.
        for p in &mut plan_document.services {
            p.file = Some(file.config.path.display().to_string());
            p.supervisor = Some(pinctl_launch::Host::supervisor_of(&file));
        }
        document.plan = Some(plan_document);
        match pinctl_launch::emit::drop_ins(&file.config, &plan, &file.config.path) {
            Ok(drop_ins) => document.systemd_drop_ins = drop_ins,
            Err(e) => {
                document.systemd_error =
                    Some(pinctl_topology::text::escaped_but_newlines(&e.to_string()))
            }
        }
        document
    }
}
