# layouts: 4node
# Scenario 9: what pinctl exec refuses on a real kernel, and that a refused command never runs.
# Inside a cgroup v2 cpuset of CPUs 2-7 and nodes 1-3, a node or CPU outside it is refused with
# systemd's statuses (242 memory policy, 215 CPU affinity) naming what is allowed. A policy the
# kernel lacks (weighted interleave before Linux 6.9, preferred-many before 5.15, `--balancing`
# before 5.12) is refused with 242 naming it and the kernel, unless `--if-unsupported=ignore`,
# which runs the command without it; where the kernel has it, it reaches the kernel
# (numa_maps, MPOL_F_NUMA_BALANCING in get_mempolicy). A plan does not shrink to the affinity pinctl
# inherits (a unit's CPUAffinity=, taskset): under `taskset -c 2` in that cpuset, topology
# reports the cpuset's CPUs and `exec -c --service` runs the instance on its planned CPUs.
mkdir -p /sys/fs/cgroup
mounted /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/narrow9
echo 2-7 >/sys/fs/cgroup/narrow9/cpuset.cpus
echo 1-3 >/sys/fs/cgroup/narrow9/cpuset.mems
narrow() { sh -c 'echo $$ >/sys/fs/cgroup/narrow9/cgroup.procs && exec "$@"' narrow "$@"; }

# refused NAME PREFIX STATUS TEXT: exited STATUS, said TEXT on stderr, and the probe never ran.
refused() {
    check_eq "$1/status" "$3" "$(rc_of "$2")" "$2.err"
    if grep -q -- "$4" "$2.err"; then pass "$1/says-$4"; else
        fail "$1/says-$4" "stderr does not mention \`$4\`: $(head -c 300 "$2.err" | tr '\n' ' ')"; fi
    if grep -qx ready "$2.out" 2>/dev/null; then fail "$1/did-not-run" "the command ran anyway"; else
        pass "$1/did-not-run"; fi
}

run_to node-outside narrow "$PINCTL" exec --nodes 0 -- "$PROBE" --mib 1
refused node-outside node-outside 242 "1-3"
run_to cpu-outside narrow "$PINCTL" exec --cpus 0 --nodes 1 -- "$PROBE" --mib 1
refused cpu-outside cpu-outside 215 "2-7"

run_to inside narrow "$PINCTL" exec --nodes 1-3 -- "$PROBE" --mib 4
check_ran inside/ran inside
check_eq inside/mems-allowed "1-3" "$(kv inside mems_allowed_list)"
check_eq inside/policy "bind:1-3" "$(kv inside policy)"

run_to affinity-topology narrow taskset -c 2 "$PINCTL" topology --json
check_eq affinity/topology-allowed-cpus "2-7" \
    "$(jq -r .host.allowed_cpus affinity-topology.out 2>&1)" affinity-topology.err
printf '[host]\nkeep-free = []\n\n[service.db]\ncommand = ["true"]\n' >affinity.toml
run_to affinity-plan narrow "$PINCTL" plan -c affinity.toml --json
planned=$(jq -r '.services[0].cpus' affinity-plan.out 2>&1)
check_list affinity/plan-inside-cpuset "2-3" "$planned" affinity-plan.out affinity-plan.err
run_to affinity-exec narrow taskset -c 2 "$PINCTL" exec -c affinity.toml --service db -- \
    "$PROBE" --mib 1
check_ran affinity-exec/ran affinity-exec
check_list affinity-exec/runs-on-planned-cpus "$planned" "$(kv affinity-exec cpus_allowed_list)" \
    affinity-exec.out

ALL=$(list_compress "$(node_ids)")
if kernel_has weighted-interleave; then
    # The probe's `policy` key stops at the first space ("weighted"): read the whole numa_maps
    # line from outside while the probe holds.
    for x in weighted weighted-ignored; do
        flag=""
        [ $x = weighted-ignored ] && flag=--if-unsupported=ignore
        start_held $x "$PINCTL" exec --nodes "$ALL" --mem weighted-interleave $flag -- "$PROBE" --mib 4 --hold
        check_ran $x/ran $x
        check_eq $x/policy "weighted interleave:$ALL" "$(numa_maps_line_policy "$(outside_numa_maps_line $x)")" $x.out
        stop_held $x
    done
else
    run_to weighted "$PINCTL" exec --nodes "$ALL" --mem weighted-interleave -- "$PROBE" --mib 4
    run_to weighted-ignored "$PINCTL" exec --nodes "$ALL" --mem weighted-interleave --if-unsupported=ignore -- "$PROBE" --mib 4
    expect_refused weighted-unsupported weighted "weighted-interleave"
    check_ran weighted-ignored/ran weighted-ignored
    check_eq weighted-ignored/policy-left-default "default" "$(kv weighted-ignored policy)"
    check_list weighted-ignored/cpus-still-applied "$(all_cpus)" "$(kv weighted-ignored cpus_allowed_list)"
fi

# `check` on the live machine says so ahead of time, at the key, from the probed kernel.
printf '[host]\nkeep-free = []\n\n[service.wi]\ncommand = ["true"]\nnodes = 2\nmemory-policy = "weighted-interleave"\n' >wi.toml
run_to wi-check "$PINCTL" check -c wi.toml
check_eq weighted/check-exits-0 0 "$(rc_of wi-check)" wi-check.out wi-check.err
if kernel_has weighted-interleave; then warned=0; else warned=1; fi
check_eq weighted/check-warns-when-unsupported "$warned" \
    "$(cat wi-check.out wi-check.err | grep -c 'memory-policy `weighted-interleave` is not supported by this kernel')" \
    wi-check.out wi-check.err

# preferred-many (5.15) the same way: applied where the kernel has it, refused where it does not.
run_to preferred-many "$PINCTL" exec --nodes 1-2 --mem preferred-many -- "$PROBE" --mib 4
if kernel_has preferred-many; then
    check_ran preferred-many/ran preferred-many
    check_eq preferred-many/policy "prefer (many):1-2" "$(kv preferred-many policy)" preferred-many.out
    check_pages_on preferred-many/pages-on-1-2 preferred-many 1-2
else
    expect_refused preferred-many-unsupported preferred-many "preferred-many"
fi

run_to balancing "$PINCTL" exec --balancing --nodes 2 -- "$PROBE" --mib 4
if kernel_has balancing; then
    check_ran balancing/ran balancing
    check_eq balancing/get-mempolicy "bind:2=balancing" "$(kv balancing get_mempolicy)" balancing.out
    check_pages_on balancing/pages-on-node-2 balancing 2
else
    expect_refused balancing-unsupported balancing "NUMA_BALANCING"
fi
