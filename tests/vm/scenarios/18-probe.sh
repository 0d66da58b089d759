# layouts: 4node-run
# Scenario 18: what the firmware says beyond SLIT, and what `pinctl probe` measures. The
# guest has an HMAT (the layout's `hmat` figures): `pinctl topology --json` must report every
# access class, initiator and figure the kernel publishes under nodeN/access0 and access1, and
# the memory tiers of /sys/devices/virtual/memory_tiering (Linux 6.1+). Then `pinctl probe
# --quick` measures every pair of the 4 CPU nodes and 4 memory nodes within its budget and
# saves them with the topology; a plan on that snapshot does not use a --quick measurement
# (nor HMAT, which names only each node's best initiator) and says so. Under TCG the figures
# themselves mean nothing (every "memory access" is emulated): only the shape, the coverage
# and the reported budget and time are checked; the figures are printed. The budget is given
# (12 s, twice the --quick default for 4 nodes): three other TCG guests share the host's 2
# cores; whether it was kept is printed, not asserted (a time).

# --- HMAT and tiers: pinctl against /sys
run_to topo "$PINCTL" topology --json
jq -r '(.memory_performance.hmat // [])[]
        | "\(.node) \(.class) \(.initiators | map(tostring) | join(",")) \(.read_latency_ns) \(.write_latency_ns) \(.read_bandwidth_mb_s) \(.write_bandwidth_mb_s)"' \
    topo.out >hmat.pinctl 2>topo.jq-err
want=$(for d in /sys/devices/system/node/node[0-9]*/access[01]/initiators; do
    [ -d "$d" ] || continue
    node=${d#/sys/devices/system/node/node}
    node=${node%%/*}
    class=${d%/initiators}
    class=${class##*/}
    inits=$(ls "$d" | sed -n 's/^node//p' | sort -n | paste -sd, -)
    figs=""
    for f in read_latency write_latency read_bandwidth write_bandwidth; do
        v=$(cat "$d/$f" 2>/dev/null)
        case $v in '' | 0) v=null ;; esac
        figs="$figs $v"
    done
    [ -z "$inits" ] && [ "$figs" = " null null null null" ] && continue
    echo "$node $class $inits$figs"
done | sort -n -k1,1 -k2,2)
got=$(sort -n -k1,1 -k2,2 hmat.pinctl)
if [ -z "$want" ]; then
    fail sysfs/hmat "the guest's kernel publishes no access class: the layout's HMAT did not reach it"
else
    pass sysfs/hmat
fi
check_eq pinctl/hmat "$want" "$got" topo.out
want=$(for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
    [ -f "$t/nodelist" ] && echo "${t##*memory_tier}:$(list_compress "$(cat "$t/nodelist")")"
done | sort -n | paste -sd' ' -)
got=$(jq -r '[(.memory_performance.memory_tiers // [])[] | "\(.tier):\(.nodes | map(tostring) | join(","))"] | join(" ")' topo.out)
got=$(for x in $got; do echo "${x%%:*}:$(list_compress "${x#*:}")"; done | paste -sd' ' -)
check_eq pinctl/memory-tiers "$want" "$got" topo.out

# --- the probe
t0=$(uptime_cs)
run_to probe "$PINCTL" probe --quick --budget 12 --json --save /tmp/probed.json
t1=$(uptime_cs)
jq -r '
    "pairs=\([.measured.pairs[] | "\(.cpu_node)>\(.memory_node)"] | join(" "))",
    "budget_ms=\(.measured.budget_ms)",
    "elapsed_ms=\(.measured.elapsed_ms)",
    "positive=\([.measured.pairs[] | select(.latency_ns > 0 and .read_bandwidth_gb_s > 0 and .latency_passes >= 1 and .bandwidth_passes >= 1)] | length)",
    "compared=\(.pairs | length)",
    "latency=\([.measured.pairs[] | "\(.cpu_node)>\(.memory_node):\(.latency_ns)"] | join(" "))"
' probe.out >probe.facts 2>probe.jq-err
fact() { sed -n "s/^$1=//p" probe.facts; }
if [ "$(rc_of probe)" = 0 ] && [ -s probe.facts ]; then pass probe/ran; else
    fail probe/ran "\`pinctl probe --quick --json\` exited $(rc_of probe): $(head -c 300 probe.err | tr '\n' ' ')"
    detail probe.out probe.err
fi
want=$(for c in $(node_ids | tr ',' ' '); do for m in $(node_ids | tr ',' ' '); do printf '%s ' "$c>$m"; done; done)
check_eq probe/every-pair "${want% }" "$(fact pairs)" probe.out
check_eq probe/figures "$(node_count | awk '{ print $1 * $1 }')" "$(fact positive)" probe.out
check_eq probe/compared "$(node_count | awk '{ print $1 * $1 }')" "$(fact compared)" probe.out
budget=$(fact budget_ms)
elapsed=$(fact elapsed_ms)
# Whether the probe kept its budget is a matter of time, and no test asserts a time: a TCG
# guest beside three others on 2 cores can lose seconds in one pass (13.2 and 14.1 s of 12 s
# on a loaded development machine).
# Keeping the budget is tested on a fake clock (crates/pinctl-probe/tests/budget.rs); here the
# probe must have been given the budget asked for and report its time honestly: never more
# than the process ran (uptime in centiseconds, so 10 ms of rounding), never nothing.
check_eq probe/budget-given 12000 "$budget" probe.out
process_ms=$(((t1 - t0) * 10))
if [ -n "$elapsed" ] && [ "$elapsed" -gt 0 ] && [ "$elapsed" -le $((process_ms + 10)) ]; then
    pass probe/elapsed-reported
else
    fail probe/elapsed-reported "reports ${elapsed:-?} ms; the process ran $process_ms ms"
fi
note "probe --quick: $elapsed ms of $budget ms ($process_ms ms as a process); latency under TCG (means nothing): $(fact latency)"
bench probe_quick_ms="$elapsed" budget_ms="$budget" pairs="$(node_count | awk '{ print $1 * $1 }')"

# --- saved with the topology, read back, planned on
run_to saved "$PINCTL" topology --json --topology /tmp/probed.json
check_eq probe/saved "$(jq -c .measured probe.out)" "$(jq -c .memory_performance.measured saved.out)" saved.out
layout_config config.toml
run_to plan "$PINCTL" plan --json -c config.toml --topology /tmp/probed.json
check_eq probe/plan-says-why-not-measured-nor-hmat \
    "slit: the saved measurement is a --quick one, not for planning; HMAT names only each node's best initiators and says nothing of node 0 and node 1" \
    "$(jq -r '"\(.distances.measure): \(.distances.note)"' plan.out)" plan.out plan.err
