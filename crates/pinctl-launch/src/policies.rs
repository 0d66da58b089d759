//! What the running kernel's `set_mempolicy` accepts, for `pinctl topology` and for the
//! warnings `check`, `plan` and `run` give on the live machine when a service asks for a policy
//! the kernel lacks (`exec` and `run` would refuse to start it).

use pinctl_config::{Config, Diagnostic, Severity};
use pinctl_sys::{Kernel, probe_support};
use pinctl_sysfs::{Host, LoadedTopology};
use pinctl_topology::PolicySupport;

/// On the live machine, probes which newer policies the kernel accepts (by trying each on this
/// thread and restoring its policy) and reads the weighted-interleave weights, into
/// `loaded.topology.host.memory_policies`. A probe the kernel refuses (a seccomp filter) leaves
/// it `None` with a warning. Other sources are left alone: their kernel is not this one.
pub fn probe_memory_policies<K: Kernel + ?Sized>(kernel: &K, loaded: &mut LoadedTopology) {
    if !loaded.is_live {
        return;
    }
    let probed = kernel.node_mask_bits().and_then(|bits| probe_support(kernel, bits));
    let support = match probed {
        Ok(s) => s,
        Err(e) => {
            loaded.topology.warnings.push(format!(
                "the kernel's memory policies could not be probed ({e}): which of \
                 preferred-many, weighted-interleave and the NUMA-balancing flag it has is unknown"
            ));
            return;
        }
    };
    let root = loaded.fs_root.clone().unwrap_or_else(|| "/".into());
    let interleave_weights = Host::at(&root).interleave_weights().unwrap_or_else(|e| {
        loaded.topology.warnings.push(format!("weighted-interleave weights not read: {e}"));
        Vec::new()
    });
    loaded.topology.host.memory_policies = Some(PolicySupport {
        preferred_many: support.preferred_many,
        weighted_interleave: support.weighted_interleave,
        numa_balancing_flag: support.numa_balancing,
        interleave_weights,
    });
}

/// One warning per service whose `memory-policy` the probed kernel does not accept, at the
/// key's place in the file. Nothing when the kernel was not probed.
pub(crate) fn unsupported_policies(
    config: &Config,
    loaded: &LoadedTopology,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let Some(support) = &loaded.topology.host.memory_policies else { return };
    let kernel = loaded.topology.host.kernel.as_deref().unwrap_or("unknown");
    for service in &config.services {
        let policy = service.memory_policy;
        if support.supports(policy) {
            continue;
        }
        let span = config.service_spans(&service.name).and_then(|s| s.memory_policy.as_ref());
        diagnostics.push(config.diagnostic_at(
            span,
            Severity::Warning,
            format!(
                "{}: memory-policy `{policy}` is not supported by this kernel ({kernel}; probed): \
                 `pinctl exec` and `pinctl run` refuse to start it (exit 242)",
                service.name
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn loaded_with(support: Option<PolicySupport>) -> LoadedTopology {
        let mut loaded = LoadedTopology::live().unwrap();
        loaded.topology.host.kernel = Some("5.10.0-32-cloud-amd64".into());
        loaded.topology.host.memory_policies = support;
        loaded
    }

    const FILE: &str = "[service.db]\ncommand = [\"db\"]\ncpus = 1\nmemory-policy = \"weighted-interleave\"\n\n[service.web]\ncommand = [\"web\"]\ncpus = 1\nmemory-policy = \"preferred\"\n";

    #[test]
    fn a_policy_the_probed_kernel_lacks_is_a_located_warning() {
        let config = pinctl_config::parse(Path::new("pinctl.toml"), FILE).unwrap();
        let old = old_support();
        let mut diagnostics = Vec::new();
        unsupported_policies(&config, &loaded_with(Some(old)), &mut diagnostics);
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        let text = pinctl_config::render_all(&diagnostics, Some(Path::new("pinctl.toml")), false);
        assert!(text.contains("db: memory-policy `weighted-interleave` is not supported by this kernel (5.10.0-32-cloud-amd64; probed)"), "{text}");
        assert!(text.contains("pinctl.toml:4:"), "{text}");
        // A kernel that has it, or one not probed (another machine's topology): nothing.
        for support in [Some(PolicySupport { weighted_interleave: true, ..old_support() }), None] {
            let mut diagnostics = Vec::new();
            unsupported_policies(&config, &loaded_with(support), &mut diagnostics);
            assert!(diagnostics.is_empty(), "{diagnostics:?}");
        }
    }

    fn old_support() -> PolicySupport {
        PolicySupport { preferred_many: true, ..PolicySupport::default() }
    }

    #[test]
    fn the_live_kernel_is_probed_and_other_sources_are_not() {
        let mut live = LoadedTopology::live().unwrap();
        probe_memory_policies(&pinctl_sys::LinuxKernel, &mut live);
        let support = live.topology.host.memory_policies.clone().expect("probed");
        // Every kernel that has weighted interleave has its weights folder, one file per node.
        if support.weighted_interleave {
            let nodes: Vec<u32> = support.interleave_weights.iter().map(|w| w.node).collect();
            assert_eq!(nodes, live.topology.node_ids().iter().collect::<Vec<_>>());
        }
        let mut elsewhere = LoadedTopology { is_live: false, ..LoadedTopology::live().unwrap() };
        probe_memory_policies(&pinctl_sys::LinuxKernel, &mut elsewhere);
        assert_eq!(elsewhere.topology.host.memory_policies, None);
    }
}
