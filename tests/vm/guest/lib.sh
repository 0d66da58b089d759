# Helpers for the guest's scenario scripts (busybox sh). A scenario reports each assertion with
# `pass NAME` or `fail NAME REASON`; /init counts them. Every assertion compares with what the
# kernel reports (/proc/PID/numa_maps and status, /sys), never with what pinctl prints about
# itself, except where the point is that pinctl's report matches the kernel's.

# shellcheck disable=SC2034 # used by the scenario scripts that source this file
PROBE=/vm/bin/pinctl-alloc-probe
PINCTL=/vm/bin/pinctl
PINCTL_NUMACTL=/vm/pinctl-numactl/numactl
NUMACTL=/vm/bin/numactl

_record() { [ -n "${SCENARIO:-}" ] && echo "$1" >>"/tmp/scenarios/$SCENARIO/checks"; }

pass() {
    _record pass
    echo "PINCTL-VM: PASS $SCENARIO/$1"
}

# fail NAME REASON...: the reason names what was expected and what the kernel said.
fail() {
    _name=$1
    shift
    _record fail
    echo "PINCTL-VM: FAIL $SCENARIO/$_name: $*"
}

# Shows a file under the preceding failure, indented (console only; not a result line).
detail() {
    for _f in "$@"; do
        [ -s "$_f" ] || continue
        echo "    --- $(basename "$_f")"
        head -n 40 "$_f" | sed 's/^/    | /'
    done
}

note() { echo "  [$SCENARIO] $*"; }

# bench KEY=VALUE...: a benchmark's figures, printed by tests/vm/run as `BENCH ...` (reported,
# never asserted).
bench() { echo "PINCTL-VM: BENCH $SCENARIO $*"; }

# mounted DIR: something is mounted on DIR (busybox has no `mountpoint`).
mounted() { awk -v dir="$1" '$2 == dir { found = 1 } END { exit !found }' /proc/mounts; }

# Centiseconds since boot (/proc/uptime): busybox's date has no sub-second format.
uptime_cs() { cut -d' ' -f1 /proc/uptime | tr -d .; }
# Whole seconds since boot.
uptime_s() { cut -d. -f1 /proc/uptime; }
# on_kernel ROLE...: this guest's kernel stands where one of ROLEs says among the kernels of the
# run (`oldest`, `newest`, `middle`; tests/vm/run passes it as KERNEL_ROLE, a run of one kernel
# being both oldest and newest).
on_kernel() {
    for _role in "$@"; do
        case ",$KERNEL_ROLE," in *",$_role,"*) return 0 ;; esac
    done
    return 1
}
# wait_until SECONDS COMMAND...: runs COMMAND every 0.3 s until it succeeds (0) or SECONDS of
# the guest's uptime pass (1).
wait_until() {
    _limit=$1
    shift
    _t0=$(uptime_s)
    while ! "$@"; do
        [ $(($(uptime_s) - _t0)) -ge "$_limit" ] && return 1
        usleep 300000
    done
}

# instance_lines SOCKET: every instance of the `pinctl run` at SOCKET as `NAME STATE PID CPUS`
# lines (from `status --json`: one field a line, an instance's object closed by a line of four
# blanks and `}`).
instance_lines() {
    "$PINCTL" status --json --socket "$1" 2>/dev/null | awk -F'"' '
        /^      "name":/ { n = $4 }
        /^      "state":/ { s = $4 }
        /^      "pid":/ { p = $3; gsub(/[ :,]/, "", p) }
        /^      "cpus":/ { c = $4 }
        /^    }/ { print n, s, p, c }'
}

# ---------------------------------------------------------------- id lists
# Kernel list format (`0-2,5`) to one id per comma, sorted, no ranges: comparable as strings.
list_expand() {
    echo "$1" | awk -F, '{
        for (i = 1; i <= NF; i++) {
            if ($i == "") continue
            # Anything but ids and ranges stays visibly different from every real list.
            if ($i !~ /^[0-9]+(-[0-9]+)?$/) { print "not-a-list(" $0 ")"; bad = 1; exit }
            n = split($i, r, "-")
            lo = r[1] + 0; hi = (n == 2 ? r[2] + 0 : lo)
            for (x = lo; x <= hi; x++) seen[x] = 1
            if (hi > max) max = hi
        }
        if (bad) exit
        out = ""
        for (x = 0; x <= max; x++) if (x in seen) out = out (out == "" ? "" : ",") x
        print out
    }'
}

# Any list to the kernel's own format (`0-3,5`), as %*pbl prints it in numa_maps and status.
list_compress() {
    list_expand "$1" | awk -F, '{
        out = ""
        for (i = 1; i <= NF; i++) {
            lo = $i; hi = $i
            while (i < NF && $(i + 1) == hi + 1) { i++; hi = $i }
            out = out (out == "" ? "" : ",") (lo == hi ? lo : lo "-" hi)
        }
        print out
    }'
}

# check_eq NAME WANT GOT [FILE...]: exact string comparison.
check_eq() {
    _n=$1 _want=$2 _got=$3
    shift 3
    if [ "$_want" = "$_got" ]; then
        pass "$_n"
    else
        fail "$_n" "expected \`$_want\`, got \`$_got\`"
        detail "$@"
    fi
}

# check_list NAME WANT GOT [FILE...]: same set of ids, whatever the formatting.
check_list() {
    _n=$1 _want=$2 _got=$3
    shift 3
    if [ -n "$_got" ] && [ "$(list_expand "$_want")" = "$(list_expand "$_got")" ]; then
        pass "$_n"
    else
        fail "$_n" "expected \`$_want\`, got \`$_got\`"
        detail "$@"
    fi
}

# ---------------------------------------------------------------- the layout
# /vm/layout.env is the layout file as variables (tests/vm/run writes it): jq costs most of a
# second per start under TCG, so it is kept for pinctl's JSON output.
[ -f /vm/layout.env ] && . /vm/layout.env
node_ids() { echo "$LAYOUT_NODE_IDS"; }
node_cpus() { eval "echo \"\$LAYOUT_NODE_CPUS_$1\""; }
node_distances() { eval "echo \"\$LAYOUT_DIST_$1\""; }
all_cpus() { for _n in $(echo "$LAYOUT_NODE_IDS" | tr ',' ' '); do node_cpus "$_n"; done | paste -sd, -; }
node_count() { echo "$LAYOUT_NODE_IDS" | tr ',' '\n' | wc -l; }
# The first node of the layout other than $1 (where the drift scenarios push pages).
other_node() { for _n in $(node_ids | tr ',' ' '); do [ "$_n" != "$1" ] && echo "$_n" && return; done; }
# The node an `--emit numactl` plan line binds memory to (`--membind=N`).
emitted_membind() { sed -n 's/.* --membind=\([0-9]*\) .*/\1/p' "$1"; }
# Layout devices as `kind/key/node` words; key is the NVMe serial or the NIC MAC.
layout_devices() { echo "$LAYOUT_DEVICES"; }

# Prints `key=kernel-name` for every device of the layout; fails while one has not appeared.
resolve_devices() {
    _missing=""
    for _dev in $LAYOUT_DEVICES; do
        _kind=${_dev%%/*} _key=${_dev#*/}
        _key=${_key%/*}
        _found=""
        case $_kind in
            nvme)
                for _c in /sys/class/nvme/nvme*; do
                    [ -f "$_c/serial" ] || continue
                    [ "$(tr -d ' ' <"$_c/serial")" = "$_key" ] || continue
                    for _ns in "$_c"/nvme*n1; do [ -e "$_ns" ] && _found=$(basename "$_ns"); done
                done
                [ -n "$_found" ] && [ ! -b "/dev/$_found" ] && _found=""
                ;;
            nic)
                for _i in /sys/class/net/*; do
                    [ "$(cat "$_i/address" 2>/dev/null)" = "$_key" ] && _found=$(basename "$_i")
                done
                ;;
        esac
        if [ -n "$_found" ]; then echo "$_key=$_found"; else _missing="$_missing $_key"; fi
    done
    [ -z "$_missing" ] || { echo "missing:$_missing" >&2; return 1; }
}

# Kernel name of the layout device with this serial or MAC (`nvme0n1`, `eth0`).
device_name() { sed -n "s/^$1=//p" /tmp/devices.env; }
# Node the layout puts the device with this serial or MAC on.
device_node() { for _d in $LAYOUT_DEVICES; do case $_d in */"$1"/*) echo "${_d##*/}" ;; esac; done; }
device_kind() { for _d in $LAYOUT_DEVICES; do case $_d in */"$1"/*) echo "${_d%%/*}" ;; esac; done; }
# layout_config FILE: /vm/configs/<layout>.toml with each `@SERIAL-OR-MAC@` replaced by that
# device's kernel name, written to FILE.
layout_config() {
    _sed=""
    for _dev in $(layout_devices); do
        _key=${_dev#*/}
        _key=${_key%/*}
        _sed="$_sed s|@$_key@|$(device_name "$_key")|g;"
    done
    sed "$_sed" "/vm/configs/$LAYOUT.toml" >"$1"
}

# Kernel names of the layout's devices of one kind, in layout order.
devices_of_kind() {
    for _d in $LAYOUT_DEVICES; do
        case $_d in "$1"/*) _k=${_d#*/}; device_name "${_k%/*}" ;; esac
    done
}

# ---------------------------------------------------------------- running things
# run_to PREFIX COMMAND...: stdout to PREFIX.out, stderr to PREFIX.err, status to PREFIX.rc.
run_to() {
    _p=$1
    shift
    echo "$*" >"$_p.cmd"
    "$@" >"$_p.out" 2>"$_p.err"
    echo $? >"$_p.rc"
}

# Shell builtins only in these two: every process start costs ~0.1 s under TCG, and they run
# for every assertion.
rc_of() {
    _rc=none
    [ -f "$1.rc" ] && read -r _rc <"$1.rc"
    echo "$_rc"
}

# Value of KEY in a probe report (PREFIX.out).
kv() {
    [ -f "$1.out" ] || return 0
    while IFS= read -r _l; do
        case $_l in "$2="*) echo "${_l#*=}"; return 0 ;; esac
    done <"$1.out"
}

# check_ran NAME PREFIX: the command exited 0 and the probe finished its report.
check_ran() {
    if [ "$(rc_of "$2")" = 0 ] && grep -qx ready "$2.out" 2>/dev/null; then
        pass "$1"
        return 0
    fi
    fail "$1" "\`$(cat "$2.cmd" 2>/dev/null)\` exited with status $(rc_of "$2") without a probe report: $(head -c 300 "$2.err" 2>/dev/null | tr '\n' ' ')"
    detail "$2.out"
    return 1
}

# check_pages_on NAME PREFIX NODES: every resident page of the probe's allocation is on one
# of NODES, and every touched page is resident.
check_pages_on() {
    _pages=$(kv "$2" node_pages)
    _resident=$(kv "$2" resident_pages)
    _touched=$(kv "$2" touched_pages)
    _allowed=",$(list_expand "$3"),"
    _off=$(echo "$_pages" | tr ',' '\n' | while IFS=: read -r _node _count; do
        [ -n "$_node" ] || continue
        case $_allowed in *",$_node,"*) ;; *) echo "$_count pages on node $_node" ;; esac
    done | tr '\n' ' ')
    if [ -z "$_pages" ]; then
        fail "$1" "no per-node page counts in the probe report (command status $(rc_of "$2"))"
    elif [ -n "$_off" ]; then
        fail "$1" "expected every page on node(s) $3, numa_maps has $_off(all: $_pages)"
        detail "$2.out"
    elif [ "${_resident:-0}" -lt "${_touched:-1}" ]; then
        fail "$1" "only $_resident of $_touched touched pages are resident"
    else
        pass "$1"
    fi
}

# The pages of one node in a `node:pages,...` list (0 when absent).
pages_on() { echo "$1" | tr ',' '\n' | awk -F: -v n="$2" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }'; }
# The pages in a `node:pages,...` list, all nodes together.
pages_total() { echo "$1" | tr ',' '\n' | awk -F: '{ s += $2 } END { print s + 0 }'; }
# Whether at least 90 % (min-locality's default) of a `node:pages,...` list is on node $2.
mostly_on() { [ "$(pages_total "$1")" -gt 0 ] && [ $(($(pages_on "$1" "$2") * 10)) -ge $(($(pages_total "$1") * 9)) ]; }
# The resident pages per node of process $1, as `node:pages,...`: every mapping (what numa_maps
# sampling counts), or with `anon` only the anonymous ones (numa_maps lines with no file behind
# them: what its cgroup is charged for and what migratepages moves; a binary's shared file pages
# are charged to whoever read them first).
pages_of() {
    if [ "${2:-}" = anon ]; then
        grep -v ' file=' "/proc/$1/numa_maps" 2>/dev/null | grep ' anon='
    else
        cat "/proc/$1/numa_maps" 2>/dev/null
    fi | tr ' ' '\n' | awk -F'[N=]' '/^N[0-9]+=/ { p[$2] += $3 }
        END { s = ""; for (n in p) { s = s (s == "" ? "" : ",") n ":" p[n] }; print s }'
}

# MemFree of a node in MiB, from its own meminfo.
node_free_mib() {
    awk '/MemFree:/ { print int($4 / 1024) }' "/sys/devices/system/node/node$1/meminfo"
}

# How the kernel prints a pinctl policy name with its nodes in numa_maps.
numa_maps_policy() {
    case $1 in
        bind) echo "bind:$2" ;;
        preferred) echo "prefer:$2" ;;
        preferred-many) echo "prefer (many):$2" ;;
        interleave) echo "interleave:$2" ;;
        weighted-interleave) echo "weighted interleave:$2" ;;
        local) echo "local" ;;
        default) echo "default" ;;
        *) echo "unknown-policy-$1" ;;
    esac
}

# start_held PREFIX COMMAND...: starts a holding probe in the background and waits (60 s at
# most) for its report; PREFIX.pid holds the PID the shell started.
start_held() {
    _p=$1
    shift
    echo "$*" >"$_p.cmd"
    "$@" >"$_p.out" 2>"$_p.err" &
    echo $! >"$_p.pid"
    _i=0
    # HELD_TRIES (default 600, about 60 s; a process that exits ends the wait at once): in CI
    # a 4 MiB probe behind `pinctl exec -c` once took over 10 s to report on 7.2 beside three
    # other TCG guests. A probe that fills a node first has the kernel reclaim and spill under
    # TCG, which can take minutes on a loaded host (scenario 14 asks for more).
    while [ $_i -lt "${HELD_TRIES:-600}" ] && ! grep -qx ready "$_p.out" 2>/dev/null; do
        kill -0 "$(cat "$_p.pid")" 2>/dev/null || break
        usleep 100000
        _i=$((_i + 1))
    done
    if grep -qx ready "$_p.out" 2>/dev/null; then echo 0 >"$_p.rc"; else echo "not-ready" >"$_p.rc"; fi
}

stop_held() {
    kill "$(cat "$1.pid")" 2>/dev/null
    wait "$(cat "$1.pid")" 2>/dev/null
    return 0
}

# The numa_maps line of the probe's allocation as read from OUTSIDE the probe.
outside_numa_maps_line() {
    _start=$(kv "$1" mapping | cut -d- -f1)
    [ -n "$_start" ] || return 0
    grep "^$_start " "/proc/$(cat "$1.pid")/numa_maps" 2>/dev/null
}

# A /proc/PID/status field of the held probe, read from outside.
outside_status() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$(cat "$1.pid")/status" 2>/dev/null; }

# The policy of a numa_maps line as the kernel prints it (two words for "weighted interleave:N"
# and "prefer (many):N", the only policies with a space).
numa_maps_line_policy() {
    set -- $1
    case "$2 ${3:-}" in
        "weighted interleave"* | "prefer (many)"*) echo "$2 $3" ;;
        *) echo "${2:-}" ;;
    esac
}

# Per-node pages of a numa_maps line as `node:pages,...`.
numa_maps_nodes() {
    echo "$1" | tr ' ' '\n' | sed -n 's/^N\([0-9]*\)=\([0-9]*\)$/\1:\2/p' | tr '\n' ',' | sed 's/,$//'
}

# pinctl is missing when the host could not build it: say so in every pinctl check.
pinctl_present() { [ -x "$PINCTL" ]; }

# wait_reports DIR INSTANCES: waits (30 s at most) until the probe of every instance has
# written its report, DIR/NAME.out ending in `ready` (a service's `output` under `pinctl run`).
wait_reports() {
    _i=0
    while [ $_i -lt 300 ]; do
        _all=1
        for _n in $2; do grep -qx ready "$1/$_n.out" 2>/dev/null || _all=0; done
        [ $_all = 1 ] && return 0
        usleep 100000
        _i=$((_i + 1))
    done
    return 1
}

# PIDs of every running probe started with `--mib`, from /proc (busybox's pgrep matches only
# process names), ascending on one line.
probe_mib_pids() {
    for _d in /proc/[0-9]*; do
        case $(tr '\0' ' ' <"$_d/cmdline" 2>/dev/null) in
            "$PROBE --mib"*) echo "${_d#/proc/}" ;;
        esac
    done | sort -n | tr '\n' ' '
}

# ---------------------------------------------------------------- kernel features
# The suite boots several kernels (tests/vm/run --kernel). Memory-policy features newer than
# the oldest of them are checked where the kernel has them; where it does not, the check is that
# pinctl refuses them, named (expect_refused): a REFUSED line, counted as refused as expected.
kernel_version() {
    _r=$(uname -r)
    _maj=${_r%%.*} _min=${_r#*.}
    _min=${_min%%[!0-9]*}
    echo $((_maj * 1000 + _min))
}

# kernel_has FEATURE: preferred-many (Linux 5.15), balancing (MPOL_F_NUMA_BALANCING, 5.12),
# weighted-interleave (6.9).
kernel_has() {
    case $1 in
        preferred-many) _need=5015 ;;
        balancing) _need=5012 ;;
        weighted-interleave) _need=6009 ;;
        *) echo "kernel_has: unknown feature $1" >&2; return 1 ;;
    esac
    [ "$(kernel_version)" -ge "$_need" ]
}

# The first feature a command line asks for that this kernel lacks (nothing when none).
missing_feature() {
    for _f in preferred-many weighted-interleave balancing; do
        case " $* " in *"$_f"*) kernel_has "$_f" || { echo "$_f"; return 0; } ;; esac
    done
    return 0
}

refused_as_expected() {
    _record refused
    echo "PINCTL-VM: REFUSED $SCENARIO/$1"
}

# expect_refused NAME PREFIX WORD [STATUS]: the command exited STATUS (242, pinctl exec's; numactl
# mode's is 1), its stderr names WORD (the policy) and this kernel's release, and what it was to
# run never ran (no probe report).
expect_refused() {
    _why=""
    _status=${4:-242}
    [ "$(rc_of "$2")" = "$_status" ] || _why="exited $(rc_of "$2"), not $_status;"
    grep -q -- "$3" "$2.err" 2>/dev/null || _why="$_why stderr does not name \`$3\`;"
    grep -qF -- "$(uname -r)" "$2.err" 2>/dev/null || _why="$_why stderr does not name the kernel $(uname -r);"
    grep -qx ready "$2.out" 2>/dev/null && _why="$_why the command ran anyway;"
    if [ -z "$_why" ]; then refused_as_expected "$1"; else
        fail "$1" "Linux $(uname -r) lacks $3, so \`$(cat "$2.cmd" 2>/dev/null)\` must be refused:$_why $(head -c 300 "$2.err" 2>/dev/null | tr '\n' ' ')"
    fi
}
