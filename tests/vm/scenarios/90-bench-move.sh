# layouts: 2node-bench
# timeout: 1500
# Benchmark, not a suite scenario (its layout boots only when named: scripts/bench drift-move):
# moving 1 GiB of an instance's memory back to its planned node, pinctl's rebalance against
# numactl's `migratepages` on the same pages, in the same guest. The instance (the allocation
# probe, 1024 MiB, bound to its node) is pushed to the other node with `migratepages` (timed),
# `pinctl watch` moves it back in bounded batches (its own line reports the time, batches and
# worst batch stall), then `migratepages` pushes it away and brings it back (both timed): the
# last is the same move as pinctl's. Five rounds, a ratio each, and a summary: each mover's
# fastest round and the median ratio. Times are reported, never asserted; the checks are that
# each move happened, per the guest kernel's numa_maps.
D=/tmp/move
mkdir -p "$D"
MIB=1024
# Only the movers under test may move pages.
[ -w /proc/sys/kernel/numa_balancing ] && echo 0 >/proc/sys/kernel/numa_balancing
CONFIG=$D/pinctl.toml
cat >"$CONFIG" <<EOT
[host]
keep-free = []
watch-interval = "1s"

[service.db]
command = ["$PROBE", "--mib", "$MIB", "--hold"]
nodes = 1
memory-policy = "bind"
pid-file = "$D/db.pid"
on-drift = "rebalance"
drift-hold = "1s"
# Every page back, as migratepages moves every page (the default stops at 90 %).
min-locality = 1.0
min-memory = "1MiB"
rebalance-cooldown = "0s"
# Unpaced: the comparison is of the moves themselves (the default paces to 256 MiB/s).
rebalance-rate = "64GiB"
EOT

run_to "$D/plan" "$PINCTL" plan -c "$CONFIG" --emit numactl
N=$(emitted_membind "$D/plan.out")
OTHER=$(other_node "$N")

# Touching 1 GiB under TCG takes a while.
HELD_TRIES=3000 start_held db "$PINCTL" exec -c "$CONFIG" --service db -- "$PROBE" --mib "$MIB" --hold
cp db.pid "$D/db.pid" 2>/dev/null || cp "$WORKDIR/db.pid" "$D/db.pid"
check_ran db/ran db
PID=$(cat "$D/db.pid")
alloc() { numa_maps_nodes "$(outside_numa_maps_line db)"; }
pages_total() { echo "$1" | tr ',' '\n' | awk -F: '{ s += $2 } END { print s + 0 }'; }
# Whether at least 99 % of the allocation's pages are on node $2 (numa_maps $1).
all_on() { [ $(($(pages_on "$1" "$2") * 100)) -ge $(($(pages_total "$1") * 99)) ] && [ "$(pages_total "$1")" -gt 0 ]; }
# timed_migrate NAME FROM TO: migratepages, its wall time in centiseconds in $D/NAME.cs.
timed_migrate() {
    _t0=$(uptime_cs)
    run_to "$D/$1" migratepages "$PID" "$2" "$3"
    echo $(($(uptime_cs) - _t0)) >"$D/$1.cs"
    if all_on "$(alloc)" "$3"; then pass "$1/pages-on-node-$3"; else
        fail "$1/pages-on-node-$3" "numa_maps after migratepages $2 -> $3: $(alloc)"
    fi
}
seconds() { awk -v c="$(cat "$1")" 'BEGIN { printf "%.2f", c / 100 }'; }

if all_on "$(alloc)" "$N"; then pass "db/pages-on-node-$N-first"; else
    fail "db/pages-on-node-$N-first" "numa_maps: $(alloc)"
fi
pages=$(pages_total "$(alloc)")
# Whether the allocation sits in transparent huge pages: both movers then move 2 MiB at once.
thp=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo none)
thp_size=$(cat /sys/kernel/mm/transparent_hugepage/hpage_pmd_size 2>/dev/null || echo none)
anon_huge_kb=$(awk '/^AnonHugePages:/ { print $2 }' "/proc/$PID/smaps_rollup" 2>/dev/null || echo "?")
note "transparent huge pages: $thp, the instance's AnonHugePages: $anon_huge_kb kB"
# The first move into the other node is slow (the hypervisor backs its memory on first touch)
# and is not compared.
timed_migrate away-first "$N" "$OTHER"

# rebalance_back ROUND: `pinctl watch` moves the allocation back; its rebalance line in $line.
rebalance_back() {
    note "round $1, before the rebalance: $(alloc)"
    "$PINCTL" watch -c "$CONFIG" >"$D/watch-$1.out" 2>"$D/watch-$1.err" &
    WATCH=$!
    _t0=$(uptime_cs)
    _said=0
    while [ $(($(uptime_cs) - _t0)) -lt 120000 ] && ! grep -q "^rebalance.*instance=db" "$D/watch-$1.out"; do
        sleep 1
        # A line now and then: tests/vm/run stops a guest whose console stays quiet for 300 s.
        _waited=$(($(uptime_cs) - _t0))
        if [ $((_waited / 6000)) -gt "$_said" ]; then
            _said=$((_waited / 6000))
            note "waiting for the rebalance: $((_waited / 100)) s, allocation now $(alloc)"
        fi
    done
    kill $WATCH 2>/dev/null
    wait $WATCH 2>/dev/null
    line=$(grep "^rebalance.*instance=db" "$D/watch-$1.out" | head -1)
    note "$line"
    if all_on "$(alloc)" "$N"; then pass "rebalance-$1/pages-back-on-node-$N"; else
        fail "rebalance-$1/pages-back-on-node-$N" "numa_maps: $(alloc); watch said: $(tail -c 600 "$D/watch-$1.out" "$D/watch-$1.err" | tr '\n' ' ')"
    fi
}
field() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

# Rounds of the same two moves back, one after the other on the same pages: the guest's noise
# between runs is as large as the difference, so each round gives its own ratio.
ROUNDS=5
round=1
: >"$D/times"
while [ $round -le $ROUNDS ]; do
    [ $round -gt 1 ] && timed_migrate away-$round-a "$N" "$OTHER"
    rebalance_back $round
    timed_migrate away-$round-b "$N" "$OTHER"
    timed_migrate back-$round "$OTHER" "$N"
    ratio=$(awk -v p="$(field seconds)" -v m="$(cat "$D/back-$round.cs")" 'BEGIN { if (m > 0) printf "%.2f", p * 100 / m; else print "n/a" }')
    bench "kernel=$(uname -r) round=$round mib=$MIB pages=$pages thp=$thp thp_size=$thp_size anon_huge_kb=$anon_huge_kb" \
        "migratepages_back_s=$(seconds "$D/back-$round.cs") pinctl_back_s=$(field seconds)" \
        "pinctl_lookup_s=$(field lookup_seconds)" \
        "pinctl_pages_moved=$(field pages_moved) pinctl_pages_failed=$(field pages_failed)" \
        "pinctl_huge_blocks=$(field huge_blocks) pinctl_huge_blocks_whole=$(field huge_blocks_whole)" \
        "pinctl_batches=$(field batches) pinctl_worst_batch_stall_ms=$(field worst_batch_stall_ms)" \
        "pinctl_call_cost_ms=$(field call_cost_ms) pinctl_page_cost_us=$(field page_cost_us)" \
        "pinctl_over_migratepages=$ratio"
    echo "$(field seconds) $(seconds "$D/back-$round.cs")" >>"$D/times"
    round=$((round + 1))
done
stop_held db

# Over the rounds: the guest's noise only ever adds time (a busy host, the hypervisor backing
# memory), so the fastest round of each mover is its cost; the median ratio says how a round
# usually went.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
pinctl_min=$(awk '{ print $1 }' "$D/times" | sort -n | head -1)
mp_min=$(awk '{ print $2 }' "$D/times" | sort -n | head -1)
ratio_median=$(awk '$2 > 0 { printf "%.3f\n", $1 / $2 }' "$D/times" | median)
bench "kernel=$(uname -r) rounds=$ROUNDS pinctl_fastest_s=$pinctl_min migratepages_fastest_s=$mp_min" \
    "fastest_ratio=$(awk -v p="$pinctl_min" -v m="$mp_min" 'BEGIN { if (m > 0) printf "%.2f", p / m; else print "n/a" }')" \
    "median_ratio=$ratio_median"
