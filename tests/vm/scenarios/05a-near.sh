# layouts: 4node
# Scenario 5a: `pinctl exec --near` lands on the node of a device as the kernel reports it
# (the device's PCI numa_node, from the expander bridge's ACPI proximity): the NVMe drive by
# name and by /dev path, a path on a filesystem on that drive, and the NIC. Each run's CPUs,
# pages and policy are read back from the kernel. numactl's `block:`/`netdev:` forms of the
# same placement are the baseline.
NVME=$(device_name pinctl-nvme-0)
NVME_NODE=$(cat "/sys/block/$NVME/device/device/numa_node")
NIC=$(devices_of_kind nic)
NIC_NODE=$(cat "/sys/class/net/$NIC/device/numa_node")
note "$NVME is on node $NVME_NODE, $NIC on node $NIC_NODE (kernel's numa_node)"

near_checks() { # LABEL PREFIX NODE
    check_ran "$1/ran" "$2"
    check_list "$1/cpus-of-node-$3" "$(node_cpus "$3")" "$(kv "$2" cpus_allowed_list)" "$2.out"
    check_eq "$1/policy" "bind:$3" "$(kv "$2" policy)" "$2.out"
    check_pages_on "$1/pages-on-node-$3" "$2" "$3"
}

run_to numactl-block "$NUMACTL" --cpunodebind=block:$NVME --membind=block:$NVME "$PROBE" --mib 16
near_checks numactl-block numactl-block "$NVME_NODE"
run_to numactl-netdev "$NUMACTL" --cpunodebind=netdev:$NIC --membind=netdev:$NIC "$PROBE" --mib 16
near_checks numactl-netdev numactl-netdev "$NIC_NODE"

run_to pinctl-device "$PINCTL" exec --near "$NVME" -- "$PROBE" --mib 16
near_checks pinctl-device pinctl-device "$NVME_NODE"
run_to pinctl-dev-path "$PINCTL" exec --near "/dev/$NVME" -- "$PROBE" --mib 16
near_checks pinctl-dev-path pinctl-dev-path "$NVME_NODE"
run_to pinctl-fs-path "$PINCTL" exec --near /data0 -- "$PROBE" --mib 16
near_checks pinctl-fs-path pinctl-fs-path "$NVME_NODE"
run_to pinctl-nic "$PINCTL" exec --near "$NIC" -- "$PROBE" --mib 16
near_checks pinctl-nic pinctl-nic "$NIC_NODE"
