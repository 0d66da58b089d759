# layouts: 4node-run
# timeout: 300
# Scenario 17: a real database under `pinctl run`. Two Redis servers from Debian's package (the
# host's redis-server, staged with its libraries by tests/vm/run) run as one two-instance
# service with `memory-policy = "bind"` and `enforce = "cgroup"`, each on its own port
# (`{instance}` in the command). Each is loaded with 200,000 keys (DEBUG POPULATE, tens of MiB)
# and then the guest kernel is asked where it all is: the anonymous pages of each server in
# /proc/PID/numa_maps lie on its planned node under the planned policy, its cgroup's
# cpuset.cpus / cpuset.mems (and the effective CPUs) are the plan's, and its CPUs as the kernel
# reports them are the plan's. Each answers DBSIZE with what it was loaded with on its own port.
# pinctl SIGKILLed and started again adopts both; one killed from outside then is restarted
# (pidfd watch), the other keeps its process and keys; SIGTERM to pinctl stops both.
D=/tmp/redis
KEYS=200000
mkdir -p "$D"
REDIS=/vm/bin/redis-server
CLI=/vm/bin/redis-cli
# Redis listens on loopback only; the guest's /init does not bring `lo` up.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
# khugepaged may collapse a bound range into a huge page on a node outside its policy (see
# scenario 07): the check is about pinctl's placement, not that kernel behaviour.
[ -w /sys/kernel/mm/transparent_hugepage/enabled ] && echo never >/sys/kernel/mm/transparent_hugepage/enabled

# cgroup v2 with the cpuset and memory controllers handed down to pinctl's subtree.
mkdir -p /sys/fs/cgroup
mounted /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control
echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null

CONFIG=$D/pinctl.toml
# `save ""` and `appendonly no`: no fork for BGSAVE (a forked child would double the memory
# being checked and is not the server); DEBUG is off by default since Redis 7.
cat >"$CONFIG" <<EOF
[host]
keep-free = []

[service.redis]
command = ["$REDIS", "--port", "638{instance}", "--bind", "127.0.0.1", "--save", "",
    "--appendonly", "no", "--enable-debug-command", "yes", "--daemonize", "no",
    "--dir", "$D"]
instances = 2
nodes = 1
memory-policy = "bind"
enforce = "cgroup"
output = "$D/redis-{instance}.log"
EOF
INSTANCES="redis-0 redis-1"
port_of() { echo "638${1#redis-}"; }

run_to "$D/plan" "$PINCTL" plan -c "$CONFIG" --emit numactl
check_eq plan/ran 0 "$(rc_of "$D/plan")" "$D/plan.err"
planned() { # INSTANCE FIELD: cpus | policy | nodes
    _line=$(grep -A1 -x "# $1" "$D/plan.out" | tail -1)
    case $2 in
        cpus) echo "$_line" | sed -n 's/.*--physcpubind=\([^ ]*\).*/\1/p' ;;
        policy) echo "$_line" | sed -n 's/.* --\(membind\|preferred\)=.*/\1/p' | sed 's/membind/bind/' ;;
        nodes) echo "$_line" | sed -n 's/.* --\(membind\|preferred\)=\([^ ]*\).*/\2/p' ;;
    esac
}

# PIDs of every running redis-server, from /proc (busybox pgrep matches process names only).
redis_pids() {
    for _d in /proc/[0-9]*; do
        case $(tr '\0' ' ' <"$_d/cmdline" 2>/dev/null) in
            "$REDIS "*) echo "${_d#/proc/}" ;;
        esac
    done | sort -n | tr '\n' ' '
}

# Waits (bounded, 30 s) until the server on port $1 answers PING.
wait_pong() {
    _i=0
    while [ $_i -lt 300 ]; do
        [ "$("$CLI" -p "$1" ping 2>/dev/null)" = PONG ] && return 0
        usleep 100000
        _i=$((_i + 1))
    done
    return 1
}

"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run.out" 2>"$D/run.err" &
RUN=$!

for n in $INSTANCES; do
    port=$(port_of "$n")
    if ! wait_pong "$port"; then
        fail "$n/answers" "no PONG on port $port after 30 s"
        detail "$D/run.err" "$D/$n.log" "$D/redis-${n#redis-}.log"
        continue
    fi
    pass "$n/answers"
    # The server's own PID, as it reports it on its port: the instance pinctl started there.
    pid=$("$CLI" -p "$port" info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
    echo "$pid" >"$D/$n.pid"
    cpus=$(planned "$n" cpus)
    policy=$(planned "$n" policy)
    nodes=$(planned "$n" nodes)

    # The cgroup pinctl made for it, with the plan as its hard cpuset.
    cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
    check_eq "$n/cgroup" "/pinctl/pinctl/$n" "$cg" "$D/run.err"
    check_list "$n/cpuset.cpus" "$cpus" "$(cat "/sys/fs/cgroup$cg/cpuset.cpus" 2>/dev/null)"
    check_list "$n/cpuset.cpus.effective" "$cpus" "$(cat "/sys/fs/cgroup$cg/cpuset.cpus.effective" 2>/dev/null)"
    check_list "$n/cpuset.mems" "$nodes" "$(cat "/sys/fs/cgroup$cg/cpuset.mems" 2>/dev/null)"
    check_list "$n/cpus-allowed" "$cpus" "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$pid/status")"

    # Loaded with data, then answering with it on its own port.
    run_to "$D/$n-populate" "$CLI" -p "$port" debug populate "$KEYS" "$n"
    check_eq "$n/populate" OK "$(cat "$D/$n-populate.out")" "$D/$n-populate.err"
    check_eq "$n/dbsize" "$KEYS" "$("$CLI" -p "$port" dbsize)"

    # Where its memory is: every anonymous mapping (heap, jemalloc's arenas, stacks; file
    # mappings are the initramfs's pages, wherever the kernel put them at boot) under the
    # planned policy, and at least 90 % of its pages on the planned node(s).
    cp "/proc/$pid/numa_maps" "$D/$n.numa_maps"
    want_policy=$(numa_maps_policy "$policy" "$nodes")
    summary=$(grep ' anon=' "$D/$n.numa_maps" | grep -v ' file=' | awk -v want="$want_policy" -v nodes=",$(list_expand "$nodes")," '
        {
            if ($2 != want) other++
            for (i = 3; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {
                split(substr($i, 2), kv, "="); total += kv[2]
                if (index(nodes, "," kv[1] ",")) home += kv[2]
            }
        }
        END { printf "%d %d %d %d\n", total, home, other + 0, total ? int(100 * home / total) : 0 }')
    set -- $summary
    total=$1 home=$2 other=$3 percent=$4
    note "$n: PID $pid, $total anonymous pages, $home on node(s) $nodes ($percent %)"
    check_eq "$n/anon-policy-$want_policy" 0 "$other" "$D/$n.numa_maps"
    # 200,000 keys take ~25 MiB: fewer than 2,560 pages (10 MiB) means the data is not there.
    if [ "$total" -ge 2560 ] && [ "$percent" -ge 90 ]; then
        pass "$n/memory-on-planned-node"
    else
        fail "$n/memory-on-planned-node" "expected >= 2560 anonymous pages, >= 90 % on node(s) $nodes; numa_maps has $total, $home ($percent %) there"
        detail "$D/$n.numa_maps"
    fi
done
# Two servers on two different nodes: each instance's data is its own.
check_eq plan/distinct-nodes 2 "$(for n in $INSTANCES; do planned "$n" nodes; done | sort -u | wc -l)"

# Adoption: pinctl is SIGKILLed and started again; it adopts both servers (their data stays)
# and watches them through pidfds, so one killed from outside is noticed and started again on
# its node while the other keeps its process and its keys.
BEFORE=$(redis_pids)
check_eq adopt/two-servers-before 2 "$(echo $BEFORE | wc -w)"
kill -9 $RUN
wait $RUN 2>/dev/null
check_eq adopt/servers-survive-sigkill "$BEFORE" "$(redis_pids)"
"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run2.out" 2>"$D/run2.err" &
RUN=$!
_i=0
until "$PINCTL" status --socket "$D/sock" >"$D/status.out" 2>/dev/null || [ $_i -ge 100 ]; do
    usleep 100000
    _i=$((_i + 1))
done
check_eq adopt/same-pids-no-copies "$BEFORE" "$(redis_pids)" "$D/run2.err"
check_eq adopt/watched-through-pidfds 2 "$(grep -c 'watched through a pidfd' "$D/run2.err")" "$D/run2.err"
victim=$(cat "$D/redis-0.pid")
kill -9 "$victim"
_i=0
new=
while [ $_i -lt 300 ]; do
    new=$("$CLI" -p 6380 info server 2>/dev/null | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
    [ -n "$new" ] && [ "$new" != "$victim" ] && break
    usleep 100000
    _i=$((_i + 1))
done
if [ -n "$new" ] && [ "$new" != "$victim" ]; then pass adopt/killed-server-restarted; else
    fail adopt/killed-server-restarted "no new server on port 6380 within 30 s of killing adopted PID $victim"
    detail "$D/run2.err"
fi
if [ -n "$new" ]; then
    check_eq adopt/restarted-in-its-cgroup /pinctl/pinctl/redis-0 "$(sed -n 's/^0:://p' "/proc/$new/cgroup")"
    check_list adopt/restarted-on-its-cpus "$(planned redis-0 cpus)" "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$new/status")"
fi
check_eq adopt/other-keeps-its-process "$(cat "$D/redis-1.pid")" "$("$CLI" -p 6381 info server | sed -n 's/^process_id:\([0-9]*\).*/\1/p')"
check_eq adopt/other-keeps-its-keys "$KEYS" "$("$CLI" -p 6381 dbsize)"

# SIGTERM to pinctl stops both servers and pinctl exits 0.
kill -TERM $RUN
wait $RUN
check_eq stop/exit-status 0 "$?" "$D/run.err"
check_eq stop/no-server-left "" "$(redis_pids)"
