# layouts: 4node 8node 4node-odd
# timeout: 1000
# Scenario 10: numactl's own test scripts (checktopology, checkaffinity, bind_range, regress2,
# regress from the numactl source of the numactl installed on the host; tests/vm/run fetches and
# builds them, they are never vendored) run twice: with Debian's numactl, and with pinctl
# standing in as `numactl` (a symlink of that name, so pinctl runs in numactl mode) ahead of it
# in PATH. `numactl/SCRIPT` proves the script passes with numactl in this guest (the test bed);
# `pinctl/SCRIPT` that it passes with pinctl, and `pinctl/SCRIPT/exit-statuses` that every
# numactl command the script ran exited with the same status under pinctl (the scripts test
# `$? == 1` and let other failures through). A check listed in
# tests/vm/numactl-known-differences.txt must fail (reported KNOWN, with the listed reason); a
# listed one that passes fails: the line must go. Each script runs under its own time limit; its output is in
# /tmp/scenarios/10-numactl-suite/SCRIPT-TOOL.log (--keep, --shell).
# After the scripts, `forms/...` runs policy forms on every node and numactl's device items
# (`file:/dev/NVME`, `block:`, `netdev:`, `ip:HOST` through the NIC) under both tools: the exit
# status and the real `numactl --show` run under each must be the same; `pinctl-only/...`
# checks what numactl cannot do (`file:` on the NVMe controller's character device). The
# 4node-odd layout has a node with CPUs but no memory and one with memory but no CPUs.
SUITE=/vm/numactl-suite
KNOWN=/vm/numactl-known-differences.txt
SCRIPTS="checktopology checkaffinity bind_range regress2 regress"
# numactl's scripts are most of this scenario's minutes (regress waits for the kernel's
# statistics): on the 4node layout they run on every kernel, on the others (8 nodes, memoryless
# and CPU-less nodes) on the oldest and newest kernel of a run only. The policy forms and device
# items below run on every layout and kernel.
if [ "$LAYOUT" != 4node ] && ! on_kernel oldest newest; then
    note "numactl's scripts run on $LAYOUT on the oldest and newest kernel of a run only; this one is $KERNEL_ROLE"
    SCRIPTS=""
fi

# A source-and-build tree per tool, laid out the way the scripts expect ($srcdir/test/SCRIPT,
# $builddir/test/PROGRAM, $builddir/numactl first in PATH). `numactl` there is a wrapper that runs
# the tool (real/numactl: numactl itself, or a symlink of that name to pinctl) and appends its
# exit status and arguments to $NS_TRACE: the scripts mostly test `$? == 1`, so an invocation
# that fails with another status can pass unnoticed, and the traces of the two tools are
# compared invocation by invocation.
tree() { # DIR BINARY
    mkdir -p "$1/real"
    ln -sf "$2" "$1/real/numactl"
    ln -sfn "$SUITE/test" "$1/test"
    printf '#!/bin/sh\n"%s" "$@"\nrc=$?\necho "$rc $*" >>"$NS_TRACE"\nexit $rc\n' "$1/real/numactl" >"$1/numactl"
    chmod 755 "$1/numactl"
}
tree /tmp/ns-numactl "$NUMACTL"
tree /tmp/ns-pinctl "$PINCTL"

# known_reason NAME: the reason the known-differences file gives for NAME (`SCRIPT` or
# `SCRIPT/exit-statuses`), or nothing.
known_reason() {
    while read -r _s _reason; do
        case $_s in '' | '#'*) continue ;; esac
        [ "$_s" = "$1" ] && { echo "$_reason"; return 0; }
    done <"$KNOWN"
}

# expect_known NAME OK DETAIL: NAME (pinctl/NAME) is fine (OK = 1) or not; a listed NAME must not be.
expect_known() {
    _reason=$(known_reason "$1")
    if [ "$2" = 1 ] && [ -z "$_reason" ]; then
        pass "pinctl/$1"
    elif [ "$2" = 1 ]; then
        fail "pinctl/$1" "passes with pinctl now, but numactl-known-differences.txt lists it ($_reason): remove the line"
    elif [ -n "$_reason" ]; then
        _record known
        echo "PINCTL-VM: KNOWN $SCENARIO/pinctl/$1: $3 [known difference: $_reason]"
    else
        fail "pinctl/$1" "$3; not in numactl-known-differences.txt"
    fi
}

run_script() { # TOOL SCRIPT: status in SCRIPT-TOOL.rc, output in SCRIPT-TOOL.log, numactl calls in SCRIPT-TOOL.trace
    _dir=/tmp/ns-$1
    # A progress line: the host's watchdog takes a silent console for a hung guest.
    note "$2 with $1"
    # regress writes scratch files (numastat A/B) into its working directory.
    mkdir -p "run-$2-$1"
    _trace=$PWD/$2-$1.trace
    : >"$_trace"
    (cd "run-$2-$1" && PATH="$_dir:$SUITE/bin:$PATH" srcdir=$_dir builddir=$_dir NUMACTL=$_dir/numactl \
        NS_TRACE=$_trace timeout 240 "$_dir/test/$2") >"$2-$1.log" 2>&1 </dev/null
    echo $? >"$2-$1.rc"
    sed -i "s#/tmp/ns-$1/#/tmp/ns-TOOL/#g" "$2-$1.trace"
}

for s in $SCRIPTS; do
    run_script numactl "$s"
    run_script pinctl "$s"
    nrc=$(cat "$s-numactl.rc") prc=$(cat "$s-pinctl.rc")
    # The invocations whose exit status differs (numactl's trace against pinctl's), compared
    # by form: numbers in the arguments count as one, and each form's set of exit statuses
    # must be the same under both tools. regress picks the nodes with enough free memory as
    # `numactl --hardware` shows them at that moment, so on 128 MiB nodes the two runs bind to
    # other nodes (seen on 7.2/8node: `--cpubind=2` under numactl, `=1` under pinctl, both exit
    # 0) and make a form more or fewer times (6.12/8node: two more `--membind=N memhog -H N`
    # under pinctl, both exit 0). A form only one run made says nothing of pinctl's statuses.
    for _t in numactl pinctl; do
        awk '{ status = $1; $1 = ""; gsub(/[0-9]+/, "N"); print status $0 }' "$s-$_t.trace" >"$s-$_t.trace.shape"
    done
    awk '{ t = (FILENAME == ARGV[1]) ? 1 : 2; st = $1; $1 = ""; seen[t, $0, st] = 1; made[t, $0] = 1; form[$0] = 1; status[st] = 1 }
        END {
            for (f in form) if ((1, f) in made && (2, f) in made)
                for (st in status) if (((1, f, st) in seen) != ((2, f, st) in seen))
                    print (((2, f, st) in seen) ? "+" : "-") st f
        }' "$s-numactl.trace.shape" "$s-pinctl.trace.shape" | sort >"$s.trace.diff"
    calls=$(wc -l <"$s-numactl.trace")
    differ=$(grep -c '^+[0-9]' "$s.trace.diff")
    # One line per script for the host's side-by-side table.
    echo "PINCTL-VM: NUMACTL-SUITE $s numactl=$nrc pinctl=$prc calls=$calls differ=$differ"
    if [ "$nrc" = 0 ] && [ "$calls" -gt 0 ]; then pass "numactl/$s"; else
        fail "numactl/$s" "numactl's own $s fails with numactl itself (status $nrc; 77 = skipped; $calls numactl calls): the test bed is wrong"
        tail -n 15 "$s-numactl.log" | sed 's/^/    | /'
    fi
    ok=0
    [ "$prc" = 0 ] && ok=1
    expect_known "$s" $ok "exits $prc with pinctl as numactl (numactl: $nrc)"
    [ "$ok" = 1 ] || tail -n 15 "$s-pinctl.log" | sed 's/^/    | /'
    ok=0
    [ -s "$s.trace.diff" ] || ok=1
    expect_known "$s/exit-statuses" $ok "$differ of $calls numactl calls exit differently with pinctl: $(grep '^[-+][0-9]' "$s.trace.diff" | head -n 6 | tr '\n' ';')"
done

# ---------------------------------------------------------------- policy forms and devices
# compare NAME ARGS...: numactl ARGS numactl --show and the same under pinctl print the same
# and exit alike (numactl exits 1 for every failure; so must pinctl's numactl mode). Blank
# lines are left out: numactl 2.0.16's error path writes a stray newline to stdout (2.0.19's
# writes it to stderr, and numactl mode follows 2.0.19).
compare() {
    _n=$1
    shift
    for _tool in numactl pinctl; do
        _bin=$NUMACTL
        [ "$_tool" = pinctl ] && _bin=$PINCTL_NUMACTL
        "$_bin" "$@" "$NUMACTL" --show >"form-$_n.$_tool.raw" 2>"form-$_n.$_tool.err"
        _rc=$?
        grep -v '^$' "form-$_n.$_tool.raw" >"form-$_n.$_tool"
        echo "$_rc" >>"form-$_n.$_tool"
    done
    if cmp -s "form-$_n.numactl" "form-$_n.pinctl"; then pass "forms/$_n"; else
        fail "forms/$_n" "numactl $* differs: numactl exits $(tail -n 1 "form-$_n.numactl"), pinctl $(tail -n 1 "form-$_n.pinctl")"
        detail "form-$_n.numactl" "form-$_n.pinctl" "form-$_n.pinctl.err"
    fi
}
for n in $(node_ids | tr ',' ' '); do
    for form in "-m $n" "-N $n" "-p $n" "-i $n" "-N $n -m $n" "--cpunodebind=$n --localalloc"; do
        # shellcheck disable=SC2086 # the form is words
        compare "$(echo "$form" | tr -d ' =-')" $form
    done
done
# Failures outside a list: numactl exits 1 for a missing or non-executable command too.
compare missing-command -N 0 /vm/no-such-command
compare not-executable -N 0 "/vm/layouts/$LAYOUT.json"

NVME=$(devices_of_kind nvme | head -n 1)
NIC=$(devices_of_kind nic | head -n 1)
if [ -n "$NVME" ]; then
    ctrl=${NVME%n[0-9]*}
    dev_node=$(cat "/sys/class/nvme/$ctrl/device/numa_node")
    mems=$(sed -n 's/^Mems_allowed_list:[[:space:]]*//p' /proc/self/status)
    if [ "$dev_node" -lt "$(list_expand "$mems" | tr ',' '\n' | grep -c .)" ]; then
        for item in file:/dev/ block:; do
            compare "m-${item%%:*}-nvme" -m "$item$NVME"
            compare "N-${item%%:*}-nvme" -N "$item$NVME"
        done
        # A file is the node of the block device its file system is on (/data0: the NVMe's).
        grep -q ' /data0 ' /proc/mounts && compare m-file-on-nvme -m file:/data0
    else
        # libnuma (2.0.16 and 2.0.19) refuses a device whose node id is not below the number
        # of nodes with memory (sysfs_node_read compares an id with numa_num_task_nodes()), so
        # numactl cannot name this drive; pinctl binds to its node.
        for item in file:/dev/ block:; do
            "$PINCTL_NUMACTL" -m "$item$NVME" "$NUMACTL" --show >"dev-${item%%:*}.out" 2>"dev-${item%%:*}.err"
            check_eq "pinctl-only/m-${item%%:*}-nvme-on-node-$dev_node" "$dev_node " \
                "$(sed -n 's/^membind: //p' "dev-${item%%:*}.out")" "dev-${item%%:*}.out" "dev-${item%%:*}.err"
        done
    fi
    # numactl looks a character device up among block devices and fails; pinctl takes the
    # controller's node.
    "$PINCTL_NUMACTL" -m "file:/dev/$ctrl" "$NUMACTL" --show >ctrl.out 2>ctrl.err
    check_eq pinctl-only/file-nvme-controller "$dev_node " "$(sed -n 's/^membind: //p' ctrl.out)" ctrl.out ctrl.err
fi
if [ -n "$NIC" ]; then
    # A connected route through the NIC: ip:HOST is the node of the interface the route to
    # HOST uses (numactl asks netlink, pinctl reads /proc/net/route and ipv6_route).
    ip link set "$NIC" up
    ip addr add 192.0.2.2/24 dev "$NIC"
    ip -6 addr add 2001:db8:1::2/64 dev "$NIC" nodad 2>/dev/null ||
        ip -6 addr add 2001:db8:1::2/64 dev "$NIC" 2>/dev/null || true
    compare m-netdev -m "netdev:$NIC"
    compare m-ip4 -m ip:192.0.2.9
    compare N-ip4 -N ip:192.0.2.9
    # Loopback goes out of `lo`, which is on no node: both refuse.
    compare m-ip-loopback -m ip:127.0.0.1
    # An IPv6 prefix route appears once the address is set up (the guest may lack IPv6).
    if grep -q "^20010db8000100000000000000000000 40 .* $NIC\$" /proc/net/ipv6_route 2>/dev/null; then
        compare m-ip6 -m ip:2001:db8:1::9
    else
        note "no IPv6 route through $NIC in this guest: ip: with an IPv6 address not compared"
    fi
    ip addr flush dev "$NIC"
    ip link set "$NIC" down
fi
