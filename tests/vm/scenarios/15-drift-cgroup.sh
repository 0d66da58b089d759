# layouts: 4node
# timeout: 240
# Scenario 15: the cgroup v2 sampling path against the guest kernel. An instance runs alone in a
# cgroup with the memory controller, so the watcher reads its memory per node from the cgroup's
# `memory.numa_stat` (counters, no page-table walk) instead of numa_maps. Its figures must agree
# with what the kernel's numa_maps of the same process says (anonymous pages per node, within
# 2 MiB or 5 %), before and after `migratepages` moves the instance to another node; and its
# mappings' policies are still judged (policy drift) although its figures never need a walk.
D=/tmp/drift15
mkdir -p "$D"
[ -w /proc/sys/kernel/numa_balancing ] && echo 0 >/proc/sys/kernel/numa_balancing
mkdir -p /sys/fs/cgroup
mounted /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo +memory >/sys/fs/cgroup/cgroup.subtree_control
CG=/sys/fs/cgroup/drift15
mkdir -p "$CG"
if [ -f "$CG/memory.numa_stat" ]; then pass cgroup/memory-numa-stat; else
    fail cgroup/memory-numa-stat "no $CG/memory.numa_stat (controllers: $(cat /sys/fs/cgroup/cgroup.controllers))"
fi
CONFIG=$D/pinctl.toml
cat >"$CONFIG" <<EOT
[host]
keep-free = []

[service.db]
command = ["$PROBE", "--mib", "32", "--hold"]
nodes = 1
memory-policy = "bind"
pid-file = "$D/db.pid"
min-memory = "1MiB"
EOT
run_to "$D/plan" "$PINCTL" plan -c "$CONFIG" --emit numactl
N=$(emitted_membind "$D/plan.out")
check_eq plan/one-node 1 "$(echo "$N" | wc -w)" "$D/plan.out" "$D/plan.err"
OTHER=$(other_node "$N")

start_held "$D/db" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" \
    "$PINCTL" exec -c "$CONFIG" --service db -- "$PROBE" --mib 32 --mbind "interleave:$N" --hold
check_ran db/ran "$D/db"
PID=$(cat "$D/db.pid")

# Anonymous pages per node over the process's numa_maps as `node:pages,...`: mappings with no
# file behind them (heap, stacks, the allocation), where numa_maps' N<node> counts are all anon.
maps_anon() {
    grep -v ' file=' "/proc/$PID/numa_maps" | grep ' anon=' | tr ' ' '\n' |
        awk -F'[N=]' '/^N[0-9]+=/ { p[$2] += $3 } END { for (n in p) printf "%s:%s,", n, p[n] }' | sed 's/,$//'
}
# The watcher's anon bytes per node for db, as `node:bytes,...`, and where they came from.
watcher_anon() {
    "$PINCTL" watch -c "$CONFIG" --once --json >"$D/once.json" 2>"$D/once.err"
    /vm/bin/jq -r '.instances[0].sample | "\(.source) \([.memory | to_entries[] | "\(.key):\(.value.anon)"] | join(","))"' "$D/once.json" 2>/dev/null
}
# agree LABEL: the watcher's figures match numa_maps on every node within 2 MiB or 5 %.
agree() {
    _w=$(watcher_anon)
    _src=${_w%% *}
    _bytes=${_w#* }
    _maps=$(maps_anon)
    check_eq "$1/source-cgroup" cgroup "$_src" "$D/once.json" "$D/once.err"
    _bad=""
    for _n in $(node_ids | tr ',' ' '); do
        _wb=$(pages_on "$_bytes" "$_n")
        _mb=$(($(pages_on "$_maps" "$_n") * 4096))
        _diff=$((_wb - _mb))
        [ "$_diff" -lt 0 ] && _diff=$((-_diff))
        _tol=$((_mb / 20))
        [ "$_tol" -lt 2097152 ] && _tol=2097152
        [ "$_diff" -gt "$_tol" ] && _bad="$_bad node $_n: watcher $_wb bytes, numa_maps $_mb bytes;"
    done
    if [ -z "$_bad" ] && [ "$(pages_on "$_maps" "$2")" -gt 0 ]; then pass "$1/figures-match-numa-maps"; else
        fail "$1/figures-match-numa-maps" "anon on node $2 expected;$_bad watcher: $_bytes; numa_maps pages: $_maps"
    fi
}
agree planned "$N"
run_to "$D/migrate" migratepages "$PID" "$N" "$OTHER"
agree migrated "$OTHER"

# Policy drift for a cgroup-sampled instance: the probe gave its allocation its own policy
# (interleave on the planned node, `--mbind`) where the plan says bind. Its memory is still all
# on the planned node, so only the policy rule can see it, from a numa_maps walk the watcher
# makes for policies at a much lower rate than it reads the cgroup's counters.
/vm/bin/jq -r '.instances[0].findings[][0]' "$D/once.json" >"$D/findings" 2>&1
if grep -qx policy "$D/findings"; then pass policy/judged-on-cgroup-path; else
    fail policy/judged-on-cgroup-path "no policy finding for an allocation under interleave:$N (planned bind:$N); findings: $(tr '\n' ' ' <"$D/findings")"
fi
stop_held "$D/db"
rmdir "$CG" 2>/dev/null
