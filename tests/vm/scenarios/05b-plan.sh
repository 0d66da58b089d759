# layouts: 4node 8node
# timeout: 300
# Scenario 5b: `pinctl exec -c FILE --service X` applies exactly the placement `pinctl plan`
# prints for instance X: for every instance of configs/<layout>.toml, the kernel's
# Cpus_allowed_list equals the plan's CPUs, numa_maps shows the plan's policy and nodes, and
# under bind every page is on the plan's memory nodes; `--dry-run --json` for X predicts the
# same. Instances placed near a drive must sit on that drive's node as the kernel reports it.
layout_config config.toml

run_to plan "$PINCTL" plan -c config.toml --json
# The plan's instances as `instance cpus policy memory-nodes nodes` lines (one jq start).
jq -r '.services[] | "\(.name) \(.cpus) \(.memory_policy) \(.memory_nodes // [] | map(tostring) | join(",")) \(.nodes | map(tostring) | join(","))"' \
    plan.out >plan.facts 2>plan.jq-err
if [ "$(rc_of plan)" = 0 ] && [ -s plan.facts ]; then pass plan/ran; else
    fail plan/ran "\`pinctl plan -c config.toml --json\` exited $(rc_of plan) or printed no placements: $(head -c 300 plan.err | tr '\n' ' ')"
    detail plan.out plan.jq-err config.toml
fi

# Every instance of the config must be in the plan and be checked: list them from the file
# itself (`[service.NAME]` with `instances = K` gives NAME-0..NAME-K-1, else NAME).
instances=$(awk '
    /^\[service\.[^].]*\]/ { if (name != "") emit(); name = $0; sub(/^\[service\./, "", name); sub(/\].*/, "", name); count = 1 }
    /^instances *=/ { count = $3 + 0; multi = 1 }
    function emit() { if (multi) for (i = 0; i < count; i++) print name "-" i; else print name; multi = 0 }
    END { if (name != "") emit() }' config.toml)
note "instances in config: $(echo $instances)"

for x in $instances; do
    set -- $(grep "^$x " plan.facts)
    cpus=${2:-} policy=${3:-} mem_nodes=${4:-} nodes=${5:-}
    if [ -z "$cpus" ]; then fail "$x/in-plan" "instance \`$x\` is not in the plan"; else pass "$x/in-plan"; fi
    run_to "$x" "$PINCTL" exec -c config.toml --service "$x" -- "$PROBE" --mib 8
    run_to "$x.dry" "$PINCTL" exec -c config.toml --service "$x" --dry-run --json -- "$PROBE"
    check_ran "$x/ran" "$x"
    check_list "$x/cpus-as-planned" "${cpus:-<no plan>}" "$(kv "$x" cpus_allowed_list)" "$x.out"
    check_eq "$x/policy-as-planned" "$(numa_maps_policy "${policy:-none}" "$(list_compress "$mem_nodes")")" "$(kv "$x" policy)" "$x.out"
    # Without a plan the policy is unknown: the check still runs (and fails) so the count of
    # checks does not depend on the outcome.
    if [ "$policy" = bind ] || [ -z "$policy" ]; then
        check_pages_on "$x/pages-on-planned-nodes" "$x" "${mem_nodes:-none}"
    fi
done

# The dry run of each instance predicts the real run (one jq start for all of them).
jq -r '"\(input_filename) \(.cpus) \(.memory_policy) \(.memory_nodes)"' *.dry.out >dry.facts 2>dry.jq-err
for x in $instances; do
    set -- $(grep "^$x.dry.out " dry.facts)
    cpus=${2:-} policy=${3:-} nodes=${4:-}
    [ "$nodes" = null ] && nodes=""
    check_list "$x/dry-run-cpus" "${cpus:-<no dry run: status $(rc_of "$x.dry")>}" "$(kv "$x" cpus_allowed_list)" "$x.dry.err"
    check_eq "$x/dry-run-policy" "$(numa_maps_policy "${policy:-none}" "$(list_compress "$nodes")")" "$(kv "$x" policy)" "$x.dry.out"
done

# Placement rule 3 against the kernel: storage next to its drive.
case $LAYOUT in
    4node) near_of="store:/data0" ;;
    8node) near_of="tikv-0:/data0 tikv-1:/data1" ;;
esac
for pair in $near_of; do
    x=${pair%%:*} path=${pair#*:}
    dev=$(awk -v m="$path" '$2 == m { sub("/dev/", "", $1); print $1 }' /proc/mounts)
    node=$(cat "/sys/block/$dev/device/device/numa_node" 2>/dev/null)
    set -- $(grep "^$x " plan.facts)
    case ",$(list_expand "${5:-}")," in
        *",$node,"*) pass "$x/near-$dev" ;;
        *) fail "$x/near-$dev" "$path is on $dev, node $node (kernel), but the plan gives \`$x\` nodes \`${5:-none}\`" ;;
    esac
done

# Placement rule 2 against the kernel: an instance with several nodes gets close ones. Every
# pair of its nodes must be at the smallest distance any two distinct nodes have (/sys).
closest=$(for n in $(node_ids | tr ',' ' '); do cat /sys/devices/system/node/node$n/distance; done |
    tr ' ' '\n' | grep -v '^10$' | sort -n | head -n 1)
for x in $instances; do
    set -- $(grep "^$x " plan.facts)
    nodes=${5:-}
    case $nodes in *,*) ;; *) continue ;; esac
    worst=0
    for a in $(echo "$nodes" | tr ',' ' '); do
        row=$(cat /sys/devices/system/node/node$a/distance)
        for b in $(echo "$nodes" | tr ',' ' '); do
            [ "$a" = "$b" ] && continue
            d=$(echo "$row" | cut -d' ' -f$(( $(echo "$(node_ids)" | tr ',' '\n' | grep -n "^$b$" | cut -d: -f1) )))
            [ "$d" -gt "$worst" ] && worst=$d
        done
    done
    check_eq "$x/closest-nodes" "$closest" "$worst"
done
