# layouts: 4node
# timeout: 300
# Scenario 16: the drift watcher of `pinctl run`. The supervisor starts an instance bound to one
# node in its own cgroup (cgroup v2 with the memory controller), so its watcher samples it
# through the cgroup's `memory.numa_stat`, knowing its PID from the supervisor rather than from a
# PID file. Its pages are pushed to another node with `migratepages`; with `on-drift =
# "rebalance"` the supervisor's watcher moves them back, judged by the kernel's numa_maps.
D=/tmp/drift16
mkdir -p "$D"
[ -w /proc/sys/kernel/numa_balancing ] && echo 0 >/proc/sys/kernel/numa_balancing
mkdir -p /sys/fs/cgroup
mounted /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo +memory >/sys/fs/cgroup/cgroup.subtree_control
CONFIG=$D/pinctl.toml
cat >"$CONFIG" <<EOT
[host]
keep-free = []
watch-interval = "1s"

[service.db]
command = ["$PROBE", "--mib", "16", "--hold"]
nodes = 1
memory-policy = "bind"
on-drift = "rebalance"
drift-hold = "1s"
min-memory = "1MiB"
rebalance-cooldown = "0s"
rebalance-rate = "1GiB"
EOT

run_to "$D/plan" "$PINCTL" plan -c "$CONFIG" --emit numactl
N=$(emitted_membind "$D/plan.out")
check_eq plan/one-node 1 "$(echo "$N" | wc -w)" "$D/plan.out" "$D/plan.err"
OTHER=$(other_node "$N")

"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run.out" 2>"$D/run.err" &
RUN=$!
said() { grep -q "$1" "$D/run.err" 2>/dev/null; }
wait_until 60 said "pinctl: db: started as"
PID=$(sed -n 's/^pinctl: db: started as \([0-9]*\) .*/\1/p' "$D/run.err" | head -n 1)
wait_until 30 grep -qx "db: ready" "$D/run.out"
if [ -n "$PID" ] && grep -qx "db: ready" "$D/run.out"; then pass run/started; else
    fail run/started "no started instance: $(head -c 600 "$D/run.err" | tr '\n' ' ')"
fi
if wait_until 60 said "pinctl: watch: instance instance=db status=found pids=$PID source=cgroup"; then
    pass watch/sampled-through-its-cgroup
else
    fail watch/sampled-through-its-cgroup "no cgroup sample of $PID: $(grep 'pinctl: watch' "$D/run.err" | head -5 | tr '\n' ' ')"
fi

# The instance's anonymous pages (what its cgroup is charged for and the watcher measures on
# this path) back on node $N.
check_back() { mostly_on "$(pages_of "$PID" anon)" "$N"; }

run_to "$D/migrate" migratepages "$PID" "$N" "$OTHER"
moved=$(pages_of "$PID" anon)
if [ "$(pages_on "$moved" "$N")" -lt "$(pages_on "$moved" "$OTHER")" ]; then pass migratepages/moved-away; else
    fail migratepages/moved-away "numa_maps after migratepages: $moved"
fi
wait_until 150 check_back
back=$(pages_of "$PID" anon)
# The rebalance's report is logged once the move is over, which can be after the pages are
# back above 90 %: wait for it (bounded).
wait_until 60 said "pinctl: watch: rebalance instance=db"
if mostly_on "$back" "$N"; then pass rebalance/pages-back-on-node-$N; else
    fail rebalance/pages-back-on-node-$N "pages per node after watching: $back; run said: $(grep 'pinctl: watch' "$D/run.err" | tail -5 | tr '\n' ' ')"
fi
if said "pinctl: watch: drift edge=start instance=db .*kind=locality"; then pass watch/locality-drift-logged; else
    fail watch/locality-drift-logged "no locality drift start (pages after migratepages: $moved)"
    detail "$D/run.err"
fi
# Some move moved pages (a move that starts while migratepages is still at work can find
# the pages on their way and move none).
pages=$(sed -n 's/^pinctl: watch: rebalance instance=db .*pages_moved=\([0-9]*\).*/\1/p' "$D/run.err" | sort -n | tail -n 1)
if [ "${pages:-0}" -gt 0 ]; then pass watch/rebalance-reported-pages; else
    fail watch/rebalance-reported-pages "no rebalance line with moved pages: $(grep 'rebalance' "$D/run.err" | head -3 | tr '\n' ' ')"
fi

# The episode ends, and the move that ended it read the cgroup's counters again before it said
# locality was back (it once counted pages of shared files that other cgroups are charged for).
# Only the last move is held to that: one made mid-migratepages measures locality mid-move.
if wait_until 30 said "pinctl: watch: drift edge=end instance=db .*kind=locality"; then pass watch/episode-ended; else
    fail watch/episode-ended "no locality edge=end after the rebalance: $(grep 'instance=db' "$D/run.err" | tail -4 | tr '\n' ' ')"
fi
line=$(grep "pinctl: watch: rebalance instance=db" "$D/run.err" | tail -n 1)
after=$(echo "$line" | sed -n 's/.* locality_after=\([0-9.]*\).*/\1/p')
if [ -n "$after" ] && awk -v a="$after" 'BEGIN { exit !(a >= 0.9) }'; then pass rebalance/locality-measured-after; else
    fail rebalance/locality-measured-after "last rebalance line without locality_after >= 0.9: \`$line\`"
    grep 'pinctl: watch' "$D/run.err" | tail -n 30 | sed 's/^/    | /'
fi

# SIGTERM stops the supervisor and its instance; bounded, then KILL by PID.
kill "$RUN" 2>/dev/null
_t0=$(uptime_s)
while kill -0 "$RUN" 2>/dev/null && [ $(($(uptime_s) - _t0)) -lt 20 ]; do usleep 200000; done
kill -9 "$RUN" "$PID" 2>/dev/null
wait "$RUN" 2>/dev/null
if kill -0 "$PID" 2>/dev/null; then fail run/instance-stopped "instance $PID still runs"; else pass run/instance-stopped; fi
