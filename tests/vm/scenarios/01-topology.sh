# layouts: 4node 8node
# Scenario 1: `pinctl topology --json` describes the guest as the kernel does: the layout's
# nodes, their CPUs and distances, each CPU's node and socket, node memory, and every device on
# the node its PCIe expander bridge gives it. The `sysfs/` checks first prove the test bed built
# the machine the layout file describes; the `pinctl/` checks compare pinctl with that /sys.

# --- the test bed: /sys against the layout file
check_list sysfs/nodes-online "$(node_ids)" "$(cat /sys/devices/system/node/online)"
for n in $(node_ids | tr ',' ' '); do
    check_list "sysfs/node$n-cpus" "$(node_cpus "$n")" "$(cat /sys/devices/system/node/node$n/cpulist)"
    check_eq "sysfs/node$n-distances" "$(node_distances "$n")" "$(cat /sys/devices/system/node/node$n/distance)"
done
for dev in $(layout_devices); do
    key=${dev#*/}
    key=${key%/*}
    name=$(device_name "$key")
    if [ -z "$name" ]; then fail "sysfs/device-$key" "no device with serial or MAC \`$key\`"; continue; fi
    case $name in
        nvme*) got=$(cat "/sys/block/$name/device/device/numa_node" 2>/dev/null) ;;
        *) got=$(cat "/sys/class/net/$name/device/numa_node" 2>/dev/null) ;;
    esac
    check_eq "sysfs/$name-node" "$(device_node "$key")" "$got"
done

# --- pinctl against the same /sys
run_to topo "$PINCTL" topology --json
# One jq start for every fact (jq costs most of a second under TCG).
jq -r '
    "ids=\([.nodes[].id | tostring] | join(","))",
    (.nodes[] | "cpus\(.id)=\(.cpus)", "memory\(.id)=\(.memory_bytes)"),
    "distances=\(.distances | tojson)",
    "cpus=\([.cpus[] | "\(.id):\(.node):\(.package)"] | join(" "))",
    (.devices[] | "device_\(.name)=\(.node)/\(.kind)"),
    "discovery_warnings=\(.discovery_warnings // [] | map("\(.file) \(.problem)") | join("; "))",
    "machine_memory=\(.host.memory_bytes)",
    "memory_warnings=\([.warnings[] | select(startswith("the nodes'"'"' memory"))] | length)",
    "policies=\(.host.memory_policies | "preferred-many:\(.preferred_many) weighted-interleave:\(.weighted_interleave) numa-balancing-flag:\(.numa_balancing_flag)")",
    "weights=\([.host.memory_policies.interleave_weights[] | "\(.node):\(.weight)"] | join(","))"
' topo.out >topo.facts 2>topo.jq-err
fact() { sed -n "s/^$1=//p" topo.facts; }
if [ "$(rc_of topo)" = 0 ] && [ -s topo.facts ]; then pass pinctl/ran; else
    fail pinctl/ran "\`pinctl topology --json\` exited $(rc_of topo) or printed no topology JSON: $(head -c 300 topo.err | tr '\n' ' ')"
    detail topo.out topo.jq-err
fi
check_eq pinctl/node-ids "$(node_ids)" "$(fact ids)"
# A real kernel's files are never set aside as broken (docs/topology.md, "When a file is
# broken"): a warning here would be pinctl misreading something every kernel writes.
check_eq pinctl/no-discovery-warnings "" "$(fact discovery_warnings)"
for n in $(node_ids | tr ',' ' '); do
    check_list "pinctl/node$n-cpus" "$(cat /sys/devices/system/node/node$n/cpulist)" "$(fact "cpus$n")"
    kb=$(awk '/MemTotal:/ { print $4 }' /sys/devices/system/node/node$n/meminfo)
    check_eq "pinctl/node$n-memory" "$((kb * 1024))" "$(fact "memory$n")"
done
# The machine's memory is /proc/meminfo's, and a guest whose nodes hold all of it (QEMU gives
# each node its memdev) gets no warning that the firmware's figures disagree.
kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
check_eq pinctl/machine-memory "$((kb * 1024))" "$(fact machine_memory)"
check_eq pinctl/no-memory-disagreement 0 "$(fact memory_warnings)"
# The memory-policy features pinctl probes, against the kernel versions that brought them
# (Debian's kernels backport none of them): preferred-many 5.15, the NUMA-balancing flag 5.12,
# weighted interleave 6.9, whose weights are the files of its sysfs folder.
has() { if kernel_has "$1"; then echo true; else echo false; fi; }
check_eq pinctl/memory-policies \
    "preferred-many:$(has preferred-many) weighted-interleave:$(has weighted-interleave) numa-balancing-flag:$(has balancing)" \
    "$(fact policies)"
WI=/sys/kernel/mm/mempolicy/weighted_interleave
want=$(for f in "$WI"/node*; do [ -f "$f" ] && echo "${f##*/node}:$(cat "$f")"; done | sort -n | paste -sd, -)
check_eq pinctl/interleave-weights "$want" "$(fact weights)"
want=$(for n in $(node_ids | tr ',' ' '); do echo "[$(sed 's/ /,/g' /sys/devices/system/node/node$n/distance)]"; done | paste -sd, -)
check_eq pinctl/distances "[$want]" "$(fact distances)"
want=$(for c in /sys/devices/system/cpu/cpu[0-9]*; do
    id=${c##*cpu}
    node=$(ls -d "$c"/node* 2>/dev/null | sed 's/.*node//')
    echo "$id:$node:$(cat "$c/topology/physical_package_id")"
done | sort -n | paste -sd' ' -)
check_eq pinctl/cpu-node-package "$want" "$(fact cpus)"
for dev in $(layout_devices); do
    key=${dev#*/}
    key=${key%/*}
    name=$(device_name "$key")
    [ -n "$name" ] || continue
    check_eq "pinctl/$name" "$(device_node "$key")/$(device_kind "$key")" "$(fact "device_$name")"
done
