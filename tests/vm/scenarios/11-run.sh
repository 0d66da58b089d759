# layouts: 4node
# timeout: 240
# Scenario 11: `pinctl run` supervises a multi-service file in a 4-node guest. The kernel, not
# pinctl, is asked where each instance landed: every instance's Cpus_allowed_list, the policy
# of its allocation in /proc/PID/numa_maps and the node of every resident page equal the plan
# (`pinctl plan --emit numactl` of the same file). Then pinctl itself is SIGKILLed and started
# again: it adopts the running instances (same PIDs, no second copies); a reload that moves one
# instance restarts that one alone, on its new node; and SIGTERM stops them all, leaving no
# probe behind.
D=/tmp/run
mkdir -p "$D"
CONFIG=$D/pinctl.toml
cat >"$CONFIG" <<EOF
[host]
keep-free = []

[service.db]
command = ["$PROBE", "--mib", "32", "--hold"]
instances = 2
nodes = 1
memory-policy = "bind"
output = "$D/db-{instance}.out"

[service.web]
command = ["$PROBE", "--mib", "16", "--hold"]
cpus = 1
memory-policy = "preferred"
output = "$D/web.out"
EOF
INSTANCES="db-0 db-1 web"

# The plan as numactl lines: `# NAME` then `numactl --physcpubind=CPUS --POLICY=NODES -- ...`.
run_to "$D/plan" "$PINCTL" plan -c "$CONFIG" --emit numactl
check_eq plan/ran 0 "$(rc_of "$D/plan")"
planned() { # INSTANCE FIELD: cpus | policy | nodes
    _line=$(grep -A1 -x "# $1" "$D/plan.out" | tail -1)
    case $2 in
        cpus) echo "$_line" | sed -n 's/.*--physcpubind=\([^ ]*\).*/\1/p' ;;
        policy) echo "$_line" | sed -n 's/.* --\(membind\|preferred\)=.*/\1/p' | sed 's/membind/bind/' ;;
        nodes) echo "$_line" | sed -n 's/.* --\(membind\|preferred\)=\([^ ]*\).*/\2/p' ;;
    esac
}

# Waits (bounded) until every instance's probe has written its report.
wait_ready() {
    _i=0
    while [ $_i -lt 300 ]; do
        _all=1
        for _n in $INSTANCES; do grep -qx ready "$D/$_n.out" 2>/dev/null || _all=0; done
        [ $_all = 1 ] && return 0
        usleep 100000
        _i=$((_i + 1))
    done
    return 1
}

# PIDs of every running probe, read from /proc (busybox's pgrep matches only process names).
probe_pids() {
    for _d in /proc/[0-9]*; do
        case $(tr '\0' ' ' <"$_d/cmdline" 2>/dev/null) in
            "$PROBE --mib"*) echo "${_d#/proc/}" ;;
        esac
    done | sort -n | tr '\n' ' '
}

"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run1.out" 2>"$D/run1.err" &
RUN=$!
if wait_ready; then pass run/all-ready; else
    fail run/all-ready "not every instance reported"
    detail "$D/run1.err"
fi

for n in $INSTANCES; do
    echo 0 >"$D/$n.rc"
    echo "pinctl run ($n)" >"$D/$n.cmd"
    kv "$D/$n" pid >"$D/$n.pid"
    cpus=$(planned "$n" cpus)
    policy=$(planned "$n" policy)
    nodes=$(planned "$n" nodes)
    check_list "$n/cpus-allowed" "$cpus" "$(outside_status "$D/$n" Cpus_allowed_list)"
    line=$(outside_numa_maps_line "$D/$n")
    check_eq "$n/policy" "$(numa_maps_policy "$policy" "$nodes")" "$(numa_maps_line_policy "$line")"
    check_pages_on "$n/pages-on-planned-nodes" "$D/$n" "$nodes"
done

# Adoption: pinctl dies without stopping anything; the next one takes the instances over.
BEFORE=$(probe_pids)
check_eq adopt/three-probes-before 3 "$(echo $BEFORE | wc -w)"
kill -9 $RUN
wait $RUN 2>/dev/null
check_eq adopt/instances-survive-sigkill "$BEFORE" "$(probe_pids)"
"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run2.out" 2>"$D/run2.err" &
RUN=$!
_i=0
until "$PINCTL" status --socket "$D/sock" >"$D/status.out" 2>/dev/null || [ $_i -ge 100 ]; do
    usleep 100000
    _i=$((_i + 1))
done
usleep 500000
check_eq adopt/same-pids-no-copies "$BEFORE" "$(probe_pids)"
active=$(awk 'NR > 1 && $2 == "active"' "$D/status.out" | wc -l)
check_eq adopt/status-lists-every-instance 3 "$active"

# Reload: web is moved to a node nobody uses; the two db instances keep running untouched.
used=",$(planned db-0 nodes),$(planned db-1 nodes),$(planned web nodes),"
target=
for n in $(node_ids | tr ',' ' '); do case $used in *",$n,"*) ;; *) target=$n ;; esac; done
DB_PIDS="$(kv "$D/db-0" pid) $(kv "$D/db-1" pid)"
OLD_WEB=$(kv "$D/web" pid)
sed -i "/^\[service.web\]/a only-nodes = [$target]" "$CONFIG"
rm -f "$D/web.out"
run_to "$D/reload" "$PINCTL" reload --socket "$D/sock"
check_eq reload/ran 0 "$(rc_of "$D/reload")"
if wait_ready; then pass reload/web-ready; else fail reload/web-ready "web did not report after the reload"; fi
echo "$(kv "$D/web" pid)" >"$D/web.pid"
web_cpus=$(outside_status "$D/web" Cpus_allowed_list)
case ",$(list_expand "$(node_cpus "$target")")," in
    *",$web_cpus,"*) pass "reload/web-on-node-$target" ;;
    *) fail "reload/web-on-node-$target" "web runs on CPUs \`$web_cpus\`, node $target has $(node_cpus "$target")" ;;
esac
if [ "$(kv "$D/web" pid)" != "$OLD_WEB" ]; then pass reload/web-restarted; else
    fail reload/web-restarted "web still runs as PID $OLD_WEB"; fi
alive=
for p in $DB_PIDS; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
check_eq reload/db-untouched " $DB_PIDS" "$alive"

# SIGTERM stops every instance and pinctl exits 0.
kill -TERM $RUN
wait $RUN
check_eq stop/exit-status 0 "$?"
check_eq stop/no-probe-left "" "$(probe_pids)"
