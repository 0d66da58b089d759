# layouts: 4node
# timeout: 300
# Scenario 12: `pinctl watch` against the guest kernel. An instance planned on one node (bind)
# has its pages pushed to another node with numactl's own `migratepages`; the watcher sees the
# locality drift only after its hold time and, with `on-drift = "rebalance"`, moves the pages
# back with move_pages until the instance's locality is above its threshold again (the default
# 90 %, where the rebalancer is documented to stop): the kernel's numa_maps of the whole instance
# then shows at least that share of its pages on the planned node. Not every page: a run on 5.10
# stopped at 91.8 % with one page of the allocation still remote, as designed.
# The kernel decides, not pinctl.
D=/tmp/drift
mkdir -p "$D"
# Only pinctl may move the pages back: the kernel's automatic NUMA balancing would move a bound
# instance's pages home by itself (and does, on newer kernels), proving nothing about pinctl.
[ -w /proc/sys/kernel/numa_balancing ] && echo 0 >/proc/sys/kernel/numa_balancing
CONFIG=$D/pinctl.toml
cat >"$CONFIG" <<EOT
[host]
keep-free = []
watch-interval = "1s"

[service.db]
command = ["$PROBE", "--mib", "16", "--hold"]
nodes = 1
memory-policy = "bind"
pid-file = "$D/db.pid"
on-drift = "rebalance"
drift-hold = "1s"
min-memory = "1MiB"
rebalance-cooldown = "0s"
rebalance-rate = "1GiB"
EOT

run_to "$D/plan" "$PINCTL" plan -c "$CONFIG" --emit numactl
N=$(emitted_membind "$D/plan.out")
check_eq plan/one-node 1 "$(echo "$N" | wc -w)"
OTHER=$(other_node "$N")

start_held db "$PINCTL" exec -c "$CONFIG" --service db -- "$PROBE" --mib 16 --hold
cp db.pid "$D/db.pid" 2>/dev/null || cp "$WORKDIR/db.pid" "$D/db.pid"
check_ran db/ran db
PID=$(cat "$D/db.pid")

pages_now() { numa_maps_nodes "$(outside_numa_maps_line db)"; }
# Every mapping's pages per node, summed over the instance's whole numa_maps: what the watcher's
# locality is computed from.
instance_pages() {
    tr ' ' '\n' <"/proc/$PID/numa_maps" 2>/dev/null | awk -F'[N=]' '/^N[0-9]+=/ { p[$2] += $3 }
        END { s = ""; for (n in p) { s = s (s == "" ? "" : ",") n ":" p[n] }; print s }'
}
# Back when at least 90 % (min-locality's default) of the instance's pages are on the planned
# node: the share the rebalancer restores before it stops.
pages_total() { echo "$1" | tr ',' '\n' | awk -F: '{ s += $2 } END { print s + 0 }'; }
mostly_on() { [ "$(pages_total "$1")" -gt 0 ] && [ $(($(pages_on "$1" "$2") * 10)) -ge $(($(pages_total "$1") * 9)) ]; }
before=$(pages_now)
check_eq db/pages-on-node-$N-first "$(pages_on "$before" "$N")" "$(pages_total "$before")"

# Push every page of the instance to another node, as a careless operator or a tool would.
run_to "$D/migrate" migratepages "$PID" "$N" "$OTHER"
moved=$(pages_now)
if [ "$(pages_on "$moved" "$OTHER")" -gt 0 ] && [ "$(pages_on "$moved" "$N")" = 0 ]; then
    pass "migratepages/pages-now-on-node-$OTHER"
else
    fail "migratepages/pages-now-on-node-$OTHER" "numa_maps after migratepages: $moved"
fi

"$PINCTL" watch -c "$CONFIG" >"$D/watch.out" 2>"$D/watch.err" &
WATCH=$!
# Bounded: the drift must start (after its hold time) and the pages come back within 150 s
# (under TCG with other guests running, numa_maps walks are slow and the watcher spaces them).
_start=$(cut -d. -f1 /proc/uptime)
while [ $(($(cut -d. -f1 /proc/uptime) - _start)) -lt 150 ]; do
    mostly_on "$(instance_pages)" "$N" && break
    sleep 1
done
# The rebalance's report is printed once the move is over, which can be after the pages are
# back above 90 %: wait for it (bounded) before stopping the watcher.
_start=$(cut -d. -f1 /proc/uptime)
while [ $(($(cut -d. -f1 /proc/uptime) - _start)) -lt 60 ] && ! grep -q "^rebalance.*instance=db" "$D/watch.out"; do
    sleep 1
done
kill $WATCH 2>/dev/null
wait $WATCH 2>/dev/null
back=$(instance_pages)
if mostly_on "$back" "$N"; then
    pass "rebalance/pages-back-on-node-$N"
else
    fail "rebalance/pages-back-on-node-$N" "instance's pages per node after watching: $back (its allocation: $(pages_now)); watch said: $(tail -c 600 "$D/watch.out" "$D/watch.err" | tr '\n' ' ')"
fi
if cat "$D/watch.out" "$D/watch.err" | grep -q "drift.*edge=start.*kind=locality"; then pass watch/locality-drift-logged; else
    fail watch/locality-drift-logged "no locality drift start in: $(head -c 600 "$D/watch.out" | tr '\n' ' ')"
fi
moved_line=$(cat "$D/watch.out" "$D/watch.err" | grep "^rebalance.*instance=db" | head -1)
note "$moved_line"
pages=$(echo "$moved_line" | sed -n 's/.*pages_moved=\([0-9]*\).*/\1/p')
if [ "${pages:-0}" -gt 0 ]; then pass watch/rebalance-reported-pages; else
    fail watch/rebalance-reported-pages "no rebalance line with moved pages: \`$moved_line\`"
fi
stop_held db
