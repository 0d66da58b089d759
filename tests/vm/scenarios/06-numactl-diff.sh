# layouts: 4node
# timeout: 300
# Scenario 6: differential test of pinctl's numactl mode against Debian's numactl. Each line
# of numactl-lines.txt runs under both; the kernel's Cpus_allowed_list, Mems_allowed_list and
# the numa_maps policy of the probe's allocation must be identical, and a line numactl refuses
# must be refused by pinctl too; a line asking for a policy the kernel lacks (preferred-many
# before 5.15) must be refused by both, by pinctl with numactl's status 1 naming it. `NN-numactl` checks that numactl itself did what the line
# expects (the test bed measures right); `NN-pinctl` is the comparison.
NVME=$(device_name pinctl-nvme-0)
NIC=$(devices_of_kind nic)

# The `narrow` cgroup: a cpuset of CPUs 2-7 and nodes 1-3.
mkdir -p /sys/fs/cgroup
mounted /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/narrow
echo 2-7 >/sys/fs/cgroup/narrow/cpuset.cpus
echo 1-3 >/sys/fs/cgroup/narrow/cpuset.mems
check_eq setup/narrow-cpuset "2-7 1-3" \
    "$(cat /sys/fs/cgroup/narrow/cpuset.cpus.effective) $(cat /sys/fs/cgroup/narrow/cpuset.mems.effective)"

# in_cgroup WHERE COMMAND...: runs COMMAND inside the cgroup (root or narrow).
in_cgroup() {
    _dir=/sys/fs/cgroup
    [ "$1" = narrow ] && _dir=/sys/fs/cgroup/narrow
    shift
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$_dir" "$@"
}

facts() { echo "cpus=$(kv "$1" cpus_allowed_list) mems=$(kv "$1" mems_allowed_list) policy=$(kv "$1" policy) get_mempolicy=$(kv "$1" get_mempolicy)"; }

i=0
grep -v '^#' /vm/scenarios/numactl-lines.txt | sed "s|@NVME@|$NVME|g; s|@NIC@|$NIC|g" >lines
while read -r expect where opts; do
    [ -n "$expect" ] || continue
    i=$((i + 1))
    id=$(printf '%02d' $i)
    # Word splitting of $opts is the point: it is a command line.
    run_to "$id-numactl" in_cgroup "$where" "$NUMACTL" $opts "$PROBE" --mib 1 </dev/null
    run_to "$id-pinctl" in_cgroup "$where" "$PINCTL_NUMACTL" $opts "$PROBE" --mib 1 </dev/null
    nrc=$(rc_of "$id-numactl") prc=$(rc_of "$id-pinctl")
    # A policy this kernel lacks: numactl refuses it ("without kernel support"), and pinctl
    # must refuse it named, with numactl's status (1).
    lacks=$(missing_feature $opts)
    if [ -n "$lacks" ]; then
        case $nrc in
            [1-9]*) pass "$id-numactl" ;;
            *) fail "$id-numactl" "[$where] numactl $opts on Linux $(uname -r) (no $lacks): expected a refusal, numactl exited $nrc" ;;
        esac
        expect_refused "$id-pinctl" "$id-pinctl" "$lacks" 1
        continue
    fi
    case $expect:$nrc in
        ok:0 | err:[1-9]*) pass "$id-numactl" ;;
        *) fail "$id-numactl" "[$where] numactl $opts: expected $expect, numactl exited $nrc: $(head -c 200 "$id-numactl.err" | tr '\n' ' ')" ;;
    esac
    if [ "$nrc" = 0 ] && [ "$prc" = 0 ]; then
        check_eq "$id-pinctl" "$(facts "$id-numactl")" "$(facts "$id-pinctl")" "$id-pinctl.err"
    elif [ "$nrc" != 0 ] && [ "$prc" = "$nrc" ]; then
        pass "$id-pinctl"
    else
        fail "$id-pinctl" "[$where] numactl $opts: numactl exited $nrc, pinctl's numactl mode exited $prc: $(head -c 300 "$id-pinctl.err" | tr '\n' ' ')"
    fi
done <lines
note "$i numactl command lines compared"
if [ "$i" -ge 20 ]; then pass lines-at-least-20; else fail lines-at-least-20 "only $i lines"; fi
