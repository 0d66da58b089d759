# layouts: 4node
# Scenario 4: interleave over every node spreads an allocation's pages evenly: each node holds
# within 10% of the mean, and the policy reads `interleave:<all nodes>`.
ALL=$(node_ids)
COUNT=$(node_count)

interleave_checks() { # LABEL PREFIX
    check_ran "$1/ran" "$2"
    check_eq "$1/policy" "interleave:$(list_compress "$ALL")" "$(kv "$2" policy)" "$2.out"
    pages=$(kv "$2" node_pages)
    total=$(kv "$2" resident_pages)
    mean=$((${total:-0} / COUNT))
    bad=""
    for n in $(echo "$ALL" | tr ',' ' '); do
        p=$(pages_on "$pages" "$n")
        dev=$((p > mean ? p - mean : mean - p))
        [ $((dev * 10)) -le "$mean" ] || bad="$bad node $n has $p;"
    done
    if [ "$mean" -gt 0 ] && [ -z "$bad" ]; then pass "$1/even-within-10pct"; else
        fail "$1/even-within-10pct" "mean $mean pages per node:$bad (all: $pages)"; fi
}

run_to numactl "$NUMACTL" --interleave=all "$PROBE" --mib 64
interleave_checks numactl numactl
run_to pinctl "$PINCTL" exec --nodes "$ALL" --mem interleave -- "$PROBE" --mib 64
interleave_checks pinctl pinctl
