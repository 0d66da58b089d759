# layouts: 4node
# Scenario 7: pinctl-sys's mbind and get_mempolicy wrappers on a real multi-node kernel. The
# probe gives its allocation a policy with mbind (`--mbind`) before touching it; the kernel's
# numa_maps and get_mempolicy(MPOL_F_ADDR) must show that policy and the pages must follow it,
# while the task policy stays what the process was started with. Node 3 is the highest node:
# a mask passed with maxnode = bits instead of bits + 1 would lose it.
# Transparent huge pages off: khugepaged may collapse a bound range into a huge page on a node
# outside the range's policy (seen once on 6.1: 511 pages of a bind 0,3 range on node 2), which
# is the kernel's doing, not the mbind wrapper's.
[ -w /sys/kernel/mm/transparent_hugepage/enabled ] && echo never >/sys/kernel/mm/transparent_hugepage/enabled
LAST=$(node_ids | tr ',' '\n' | tail -n 1)
ALL=$(list_compress "$(node_ids)")

mbind_checks() { # LABEL PREFIX NUMA_MAPS_POLICY GET_MEMPOLICY PAGE_NODES TASK_POLICY
    check_ran "$1/ran" "$2"
    check_eq "$1/numa-maps-policy" "$3" "$(kv "$2" policy)" "$2.out"
    check_eq "$1/get-mempolicy-addr" "$4" "$(kv "$2" get_mempolicy_addr)" "$2.out"
    check_pages_on "$1/pages-on-$5" "$2" "$5"
    check_eq "$1/task-policy-unchanged" "$6" "$(kv "$2" get_mempolicy)" "$2.out"
}

run_to bind-last "$PROBE" --mib 16 --mbind "bind:$LAST"
mbind_checks bind-last bind-last "bind:$LAST" "bind:$LAST" "$LAST" "default:"

run_to bind-two "$PROBE" --mib 16 --mbind "bind:0,$LAST"
mbind_checks bind-two bind-two "bind:0,$LAST" "bind:0,$LAST" "0,$LAST" "default:"

run_to preferred "$PROBE" --mib 16 --mbind preferred:1
mbind_checks preferred preferred "prefer:1" "preferred:1" 1 "default:"

# A range policy wins over the task's bind for that range only.
run_to interleave-in-bind "$NUMACTL" --membind=2 "$PROBE" --mib 32 --mbind "interleave:$ALL"
mbind_checks interleave-in-bind interleave-in-bind "interleave:$ALL" "interleave:$ALL" "$ALL" "bind:2"
pages=$(kv interleave-in-bind node_pages)
spread=""
for n in $(node_ids | tr ',' ' '); do [ "$(pages_on "$pages" "$n")" -gt 0 ] || spread="$spread $n"; done
if [ -n "$pages" ] && [ -z "$spread" ]; then pass interleave-in-bind/every-node-used; else
    fail interleave-in-bind/every-node-used "no pages on node(s)$spread: $pages"; fi
