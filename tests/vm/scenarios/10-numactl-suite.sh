# layouts: 4node
# timeout: 540
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
SUITE=/vm/numactl-suite
KNOWN=/vm/numactl-known-differences.txt
SCRIPTS="checktopology checkaffinity bind_range regress2 regress"

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
    # The invocations whose exit status differs (numactl's trace against pinctl's).
    diff "$s-numactl.trace" "$s-pinctl.trace" >"$s.trace.diff"
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
