# layouts: 4node
# Scenario 2: `pinctl exec --nodes 2` runs a command on node 2's CPUs with its memory bound to
# node 2. Asserted on the kernel's view: every resident page of the probe's allocation in
# /proc/PID/numa_maps is on node 2, Cpus_allowed_list is node 2's CPUs, the policy reads
# `bind:2`, and so does get_mempolicy(2). numactl's run of the same placement shows the test
# bed itself measures right.
N=2
CPUS=$(node_cpus $N)

bind_checks() { # LABEL PREFIX
    check_ran "$1/ran" "$2"
    check_pages_on "$1/pages-on-node-$N" "$2" "$N"
    check_list "$1/cpus-allowed" "$CPUS" "$(kv "$2" cpus_allowed_list)" "$2.out"
    check_eq "$1/policy" "bind:$N" "$(kv "$2" policy)" "$2.out"
    check_eq "$1/get-mempolicy" "bind:$N" "$(kv "$2" get_mempolicy)" "$2.out"
}

# The same facts read from outside the running process, through /proc/PID.
held_checks() { # LABEL PREFIX
    check_ran "$1/ran" "$2"
    # exec, not fork: the PID the shell started is the PID that reports.
    check_eq "$1/exec-in-place" "$(cat "$2.pid")" "$(kv "$2" pid)"
    line=$(outside_numa_maps_line "$2")
    check_eq "$1/outside-policy" "bind:$N" "$(echo "$line" | cut -d' ' -f2)"
    pages=$(numa_maps_nodes "$line")
    others=$(echo "$pages" | tr ',' '\n' | grep -v "^$N:" | tr '\n' ' ')
    if [ -n "$pages" ] && [ -z "$others" ]; then pass "$1/outside-pages-on-node-$N"; else
        fail "$1/outside-pages-on-node-$N" "numa_maps line: \`$line\`"; fi
    check_list "$1/outside-cpus-allowed" "$CPUS" "$(outside_status "$2" Cpus_allowed_list)"
    stop_held "$2"
}

run_to numactl "$NUMACTL" --cpunodebind=$N --membind=$N "$PROBE" --mib 64
bind_checks numactl numactl
start_held numactl-held "$NUMACTL" --cpunodebind=$N --membind=$N "$PROBE" --mib 16 --hold
held_checks numactl-held numactl-held

run_to pinctl "$PINCTL" exec --nodes $N -- "$PROBE" --mib 64
bind_checks pinctl pinctl
start_held pinctl-held "$PINCTL" exec --nodes $N -- "$PROBE" --mib 16 --hold
held_checks pinctl-held pinctl-held
