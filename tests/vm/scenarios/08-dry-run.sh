# layouts: 4node
# Scenario 8: `pinctl exec --dry-run --json` predicts what the kernel then shows. For each set
# of options, the dry run's CPUs, memory policy and nodes must equal the Cpus_allowed_list and
# numa_maps policy of the real run with the same options.
NVME=$(device_name pinctl-nvme-0)
i=0
while IFS='|' read -r opts; do
    [ -n "$opts" ] || continue
    i=$((i + 1))
    echo "$opts" >"case$i.opts"
    run_to "case$i.dry" "$PINCTL" exec $opts --dry-run --json -- "$PROBE" --mib 4
    run_to "case$i" "$PINCTL" exec $opts -- "$PROBE" --mib 4
done <<EOF2
--nodes 2
--nodes 0-3 --mem interleave
--nodes 1 --mem preferred
--nodes 3 --mem local
--nodes 2 --mem-nodes 3
--nodes 0,2 --cpus 1,4
--near $NVME --mem preferred-many
-N 2 -m 3
-C 1-6 -i 0,2
EOF2
# One jq start for every dry run: `FILE cpus policy nodes` lines.
jq -r '"\(input_filename) \(.cpus) \(.memory_policy) \(.memory_nodes)"' case*.dry.out >dry.facts 2>dry.jq-err
n=0
while [ $n -lt $i ]; do
    n=$((n + 1))
    opts=$(cat "case$n.opts")
    set -- $(grep "^case$n.dry.out " dry.facts)
    cpus=${2:-} policy=${3:-} nodes=${4:-}
    lacks=$(missing_feature $opts)
    if [ -n "$lacks" ]; then
        # The dry run plans without the kernel; the real run must refuse what this kernel lacks.
        if [ "$(rc_of "case$n.dry")" = 0 ] && [ -n "$cpus" ]; then pass "case$n/dry-run"; else
            fail "case$n/dry-run" "\`pinctl exec $opts --dry-run --json\` exited $(rc_of "case$n.dry")"; fi
        expect_refused "case$n/ran" "case$n" "$lacks"
        continue
    fi
    if [ "$(rc_of "case$n.dry")" = 0 ] && [ -n "$cpus" ]; then pass "case$n/dry-run"; else
        fail "case$n/dry-run" "\`pinctl exec $opts --dry-run --json\` exited $(rc_of "case$n.dry"): $(head -c 300 "case$n.dry.err" | tr '\n' ' ')"
        detail "case$n.dry.out"
    fi
    check_ran "case$n/ran" "case$n"
    check_list "case$n/cpus" "${cpus:-<no dry run>}" "$(kv "case$n" cpus_allowed_list)" "case$n.dry.out"
    [ "$nodes" = null ] && nodes=""
    check_eq "case$n/policy" "$(numa_maps_policy "${policy:-none}" "$(list_compress "$nodes")")" "$(kv "case$n" policy)" "case$n.dry.out"
done
note "$i option sets: $(cat case*.opts | paste -sd'|' -)"
