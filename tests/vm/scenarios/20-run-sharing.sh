# layouts: 4node-run
# timeout: 240
# Scenario 20: more instances than nodes, under `pinctl run`. Eight instances of one service
# that writes no size (`share-nodes = "when-needed"`) in the 4-node guest: the plan puts two on
# each node, and the kernel is asked where each landed: its Cpus_allowed_list is its node's
# CPUs (shared with the other instance there, as `pinctl plan` says under `shared CPUs:`), its
# allocation is under the planned policy in /proc/PID/numa_maps and every resident page is on
# its node. A reload that adds a ninth instance starts it on a node and restarts nobody; SIGTERM
# stops all nine.
D=/tmp/sharing
mkdir -p "$D"
CONFIG=$D/pinctl.toml
write_config() { # INSTANCES
    cat >"$CONFIG" <<EOF
[host]
keep-free = []

[service.db]
command = ["$PROBE", "--mib", "8", "--hold"]
instances = $1
memory = "16MiB"
memory-policy = "bind"
output = "$D/db-{instance}.out"
EOF
}
write_config 8
INSTANCES="db-0 db-1 db-2 db-3 db-4 db-5 db-6 db-7"

run_to "$D/plan" "$PINCTL" plan -c "$CONFIG" --emit numactl
check_eq plan/ran 0 "$(rc_of "$D/plan")" "$D/plan.err"
planned() { # INSTANCE FIELD: cpus | nodes
    _line=$(grep -A1 -x "# $1" "$D/plan.out" | tail -1)
    case $2 in
        cpus) echo "$_line" | sed -n 's/.*--physcpubind=\([^ ]*\).*/\1/p' ;;
        nodes) echo "$_line" | sed -n 's/.* --membind=\([^ ]*\).*/\1/p' ;;
    esac
}
# Two on every node, each with all of its node's CPUs.
for node in $(node_ids | tr ',' ' '); do
    on=$(for n in $INSTANCES; do [ "$(planned "$n" nodes)" = "$node" ] && echo "$n"; done | wc -l)
    check_eq "plan/two-on-node-$node" 2 "$on" "$D/plan.out"
done
for n in $INSTANCES; do
    check_list "plan/$n-has-its-node-s-cpus" "$(node_cpus "$(planned "$n" nodes)")" "$(planned "$n" cpus)"
done
# The table says which instances share what, and the CPUs of instances per CPU.
run_to "$D/table" "$PINCTL" plan -c "$CONFIG"
check_eq plan/shared-cpus-lines 4 "$(grep -c '^  node [0-9]: db-[0-9], db-[0-9] (4 CPUs of instances on 2 usable CPUs: 2 per CPU)$' "$D/table.out")" "$D/table.out"

"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run.out" 2>"$D/run.err" &
RUN=$!
if wait_reports "$D" "$INSTANCES"; then pass run/all-ready; else
    fail run/all-ready "not every instance reported"
    detail "$D/run.err"
fi
for n in $INSTANCES; do
    echo 0 >"$D/$n.rc"
    kv "$D/$n" pid >"$D/$n.pid"
    nodes=$(planned "$n" nodes)
    check_list "$n/cpus-allowed" "$(planned "$n" cpus)" "$(outside_status "$D/$n" Cpus_allowed_list)"
    line=$(outside_numa_maps_line "$D/$n")
    check_eq "$n/policy" "$(numa_maps_policy bind "$nodes")" "$(numa_maps_line_policy "$line")"
    check_pages_on "$n/pages-on-planned-node" "$D/$n" "$nodes"
done

# Reload with a ninth instance: it starts, on one node's CPUs, and the eight keep their PIDs.
BEFORE=$(probe_mib_pids)
check_eq reload/eight-before 8 "$(echo $BEFORE | wc -w)"
write_config 9
run_to "$D/reload" "$PINCTL" reload --socket "$D/sock"
check_eq reload/ran 0 "$(rc_of "$D/reload")" "$D/reload.err"
if wait_reports "$D" db-8; then pass reload/ninth-ready; else
    fail reload/ninth-ready "db-8 did not report after the reload"
    detail "$D/run.err"
fi
kv "$D/db-8" pid >"$D/db-8.pid"
ninth=$(outside_status "$D/db-8" Cpus_allowed_list)
found=
for node in $(node_ids | tr ',' ' '); do
    [ "$(list_expand "$ninth")" = "$(list_expand "$(node_cpus "$node")")" ] && found=$node
done
if [ -n "$found" ]; then pass "reload/ninth-on-node-$found"; else
    fail reload/ninth-on-a-node "db-8 runs on CPUs \`$ninth\`, no node's CPUs"
fi
after=$(probe_mib_pids)
kept=0
for p in $BEFORE; do case " $after " in *" $p "*) kept=$((kept + 1)) ;; esac; done
check_eq reload/nobody-restarted 8 "$kept" "$D/run.err"
check_eq reload/nine-running 9 "$(echo $after | wc -w)"

kill -TERM $RUN
wait $RUN
check_eq stop/exit-status 0 "$?" "$D/run.err"
check_eq stop/no-probe-left "" "$(probe_mib_pids)"
