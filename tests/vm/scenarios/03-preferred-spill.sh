# layouts: 4node
# Scenario 3: `preferred` keeps memory on its node while it fits and spills to other nodes
# instead of failing; `bind` with the same allocation fails. How bind fails: the kernel's OOM
# killer, constrained to the policy's nodes (dmesg: `constraint=CONSTRAINT_MEMORY_POLICY`),
# SIGKILLs the allocating process, so the command's status is 137 (128 + SIGKILL). Rust's
# allocator never sees an error: mmap succeeds (overcommit) and the pages fail at first touch.
N=2
free=$(node_free_mib $N)
size=$((free + 64))
note "node $N has $free MiB free; each run allocates $size MiB"

# The probe volunteers as the OOM victim so the killer never picks the test's shell.
oom_victim() { sh -c 'echo 1000 >/proc/self/oom_score_adj && exec "$@"' oom-victim "$@"; }

preferred_checks() { # LABEL PREFIX
    check_ran "$1/ran" "$2"
    check_eq "$1/policy" "prefer:$N" "$(kv "$2" policy)" "$2.out"
    pages=$(kv "$2" node_pages)
    local_pages=$(pages_on "$pages" $N)
    spilled=$(($(kv "$2" resident_pages) - local_pages))
    # Local first: node 2 must hold at least half of what was free on it before the run.
    if [ "$local_pages" -ge $((free * 256 / 2)) ]; then pass "$1/node-$N-filled-first"; else
        fail "$1/node-$N-filled-first" "only $local_pages pages on node $N ($free MiB were free): $pages"; fi
    if [ "$spilled" -gt 0 ]; then pass "$1/spilled-to-other-nodes"; else
        fail "$1/spilled-to-other-nodes" "no page outside node $N for $size MiB: $pages"; fi
}

bind_fails_checks() { # LABEL PREFIX
    check_eq "$1/killed-by-oom" 137 "$(rc_of "$2")" "$2.err" "$2.out"
    if grep -q 'constraint=CONSTRAINT_MEMORY_POLICY' "$2.dmesg"; then pass "$1/oom-constrained-to-policy"; else
        fail "$1/oom-constrained-to-policy" "dmesg has no memory-policy OOM kill"
        grep -i -m 5 'oom\|killed' "$2.dmesg" | sed 's/^/    | /'
    fi
}

run_oom() { # PREFIX COMMAND...: run under a fresh kernel log, keep what it printed
    _p=$1
    shift
    dmesg -c >/dev/null
    run_to "$_p" oom_victim "$@"
    dmesg >"$_p.dmesg"
}

run_to numactl-preferred "$NUMACTL" --cpunodebind=$N --preferred=$N "$PROBE" --mib $size
preferred_checks numactl-preferred numactl-preferred
run_oom numactl-bind "$NUMACTL" --cpunodebind=$N --membind=$N "$PROBE" --mib $size
bind_fails_checks numactl-bind numactl-bind

run_to pinctl-preferred "$PINCTL" exec --nodes $N --mem preferred -- "$PROBE" --mib $size
preferred_checks pinctl-preferred pinctl-preferred
run_oom pinctl-bind "$PINCTL" exec --nodes $N -- "$PROBE" --mib $size
bind_fails_checks pinctl-bind pinctl-bind
