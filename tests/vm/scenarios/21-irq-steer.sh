# layouts: 4node-run
# timeout: 300
# Scenario 21: interrupts follow the plan (docs/irq.md). The layout's NIC (vmxnet3, MSI-X, one
# vector per queue: 8 queues on 8 CPUs, plus an event vector) sits on node 3, which the file
# keeps free; two `nodes = 1` instances and a one-CPU instance take CPUs elsewhere. With
# `steer-interrupts = true`, `pinctl run`, judged by the guest kernel's /proc/irq and
# /proc/interrupts:
#   - before, the NIC's vectors may be delivered to every CPU, the services' included;
#   - after, every NIC vector is allowed only on node 3's CPUs and RPS of every receive queue
#     names them; no movable interrupt may go to a service CPU (the managed NVMe queues and
#     any interrupt the kernel refused to move are said in pinctl's log, by number and name);
#   - ping through the NIC (QEMU's user network answers 10.0.2.2) fires the NIC's interrupts
#     on node 3's CPUs only;
#   - an affinity put back on a service CPU by hand is steered away again;
#   - `pinctl detach` leaves it as it is, with its record, and a new supervisor takes it over;
#   - a reload that turns steering off puts everything back (the first supervisor's
#     originals), one that turns it on again steers again;
#   - after SIGTERM every affinity and RPS mask is as it was, and the record is gone.
# Then with Debian's irqbalance running (`-t 1`: a pass a second), which spreads interrupts
# over every CPU: `pinctl run` tells it over its socket to avoid the services' CPUs and to
# leave the NIC's vectors alone; the same irqbalance process (no restart) keeps the movable
# interrupts off the services' CPUs pass after pass, and gets its own settings back on
# SIGTERM.
D=/tmp/irq21
mkdir -p "$D"
NIC=$(devices_of_kind nic)
NIC_NODE=$(for d in $(layout_devices); do case $d in nic/*) echo "${d##*/}" ;; esac; done)
NODE_CPUS=$(node_cpus "$NIC_NODE")
ip link set lo up
ip link set "$NIC" up
ip addr add 10.0.2.15/24 dev "$NIC"

# Interrupt numbers of the NIC's vectors the kernel lists (requested once the link is up).
nic_irqs() {
    for _n in $(ls "/sys/class/net/$NIC/device/msi_irqs"); do
        grep -q "^ *$_n:" /proc/interrupts && echo "$_n"
    done
}
affinity() { cat "/proc/irq/$1/smp_affinity_list"; }
# Every numbered interrupt of /proc/interrupts with its name, `N NAME`.
irq_names() { awk '$1 ~ /^[0-9]+:$/ { n = $1; sub(":", "", n); print n, $NF }' /proc/interrupts; }
managed() { case $1 in nvme[0-9]*q[1-9]*) return 0 ;; esac; return 1; }
# `subset A B`: every id of list A is in list B.
subset() {
    for _c in $(list_expand "$1" | tr ',' ' '); do
        case ",$(list_expand "$2")," in *",$_c,"*) ;; *) return 1 ;; esac
    done
}
meets() {
    for _c in $(list_expand "$1" | tr ',' ' '); do
        case ",$(list_expand "$2")," in *",$_c,"*) return 0 ;; esac
    done
    return 1
}
# Counts of the NIC's vectors per CPU, one line `CPU COUNT` summed over its vectors.
nic_counts() {
    _irqs=" $(nic_irqs | tr '\n' ' ') "
    awk -v irqs="$_irqs" 'NR == 1 { for (i = 1; i <= NF; i++) cpu[i] = substr($i, 4); next }
        { n = $1; sub(":", "", n); if (index(irqs, " " n " ")) for (i = 1; i <= length(cpu); i++) s[cpu[i]] += $(i + 1) }
        END { for (c in s) print c, s[c] }' /proc/interrupts | sort -n
}
snapshot() { for n in $(irq_names | cut -d' ' -f1); do echo "$n $(affinity "$n")"; done; }
# Movable interrupts (of $D/names) allowed on a service CPU, as ` N:NAME:AFFINITY` words,
# leaving out those the logs given say the kernel refused to move.
on_service_cpus() {
    while read -r _n _name; do
        managed "$_name" && continue
        meets "$(affinity "$_n")" "$SERVICE_CPUS" || continue
        [ $# -gt 0 ] && grep -q "pinctl: irq: refused irq=$_n name=" "$@" && continue
        printf ' %s:%s:%s' "$_n" "$_name" "$(affinity "$_n")"
    done <"$D/names"
}

CONFIG=$D/pinctl.toml
cat >"$CONFIG" <<EOT
[host]
keep-free = ["$NIC"]
steer-interrupts = true
watch-interval = "1s"

[service.db]
command = ["$PROBE", "--mib", "4", "--hold"]
instances = 2
nodes = 1
memory-policy = "bind"

[service.web]
command = ["$PROBE", "--mib", "4", "--hold"]
cpus = 1
memory-policy = "bind"
EOT
run_to "$D/plan" "$PINCTL" plan -c "$CONFIG" --json
check_eq plan/ran 0 "$(rc_of "$D/plan")" "$D/plan.err"
SERVICE_CPUS=$(list_compress "$(jq -r '.services[].cpus' "$D/plan.out" | paste -sd, -)")
check_eq plan/nic-node-kept-free "[$NIC_NODE]" "$(jq -c '.kept_free_nodes' "$D/plan.out")" "$D/plan.out"
note "service CPUs $SERVICE_CPUS, NIC $NIC on node $NIC_NODE (CPUs $NODE_CPUS), vectors $(nic_irqs | tr '\n' ' ')"
# `pinctl plan` says which interrupts land on the services' CPUs today, and that they move.
if jq -e '[.interrupts_on_service_cpus[] | select(.steering == "moved")] | length > 0' "$D/plan.out" >/dev/null; then
    pass plan/reports-interrupts-on-service-cpus
else
    fail plan/reports-interrupts-on-service-cpus "$(jq -c '.interrupts_on_service_cpus' "$D/plan.out" | head -c 400)"
fi

# Before: movable interrupts may go to the services' CPUs (the kernel allows each device's
# on its node, and legacy lines on node 0).
snapshot >"$D/before"
irq_names >"$D/names"
on_service=$(on_service_cpus)
note "before pinctl, allowed on the service CPUs:$on_service"
if [ -n "$on_service" ]; then pass before/movable-interrupts-allowed-on-service-cpus; else
    fail before/movable-interrupts-allowed-on-service-cpus "none: $(tr '\n' ' ' <"$D/before")"
fi

"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run.out" 2>"$D/run.err" &
RUN=$!
steered() { grep -q "pinctl: irq: steered " "$D/run.err"; }
if wait_until 60 steered; then pass after/steered; else
    fail after/steered "no \`pinctl: irq: steered\` line"
    detail "$D/run.err"
fi
nic_on_node() {
    for _n in $(nic_irqs); do subset "$(affinity "$_n")" "$NODE_CPUS" || return 1; done
}
if nic_on_node; then pass after/nic-vectors-on-its-node; else
    fail after/nic-vectors-on-its-node "$(for n in $(nic_irqs); do printf '%s:%s ' "$n" "$(affinity "$n")"; done)"
    detail "$D/run.err"
fi
# Spread over the node: each queue vector on one CPU, every CPU of the node used.
used=""
single=1
for n in $(nic_irqs); do
    case $(grep "^ *$n:" /proc/interrupts) in *event*) continue ;; esac
    a=$(affinity "$n")
    [ "$(list_expand "$a" | tr ',' '\n' | wc -l)" = 1 ] || single=0
    used="$used,$a"
done
if [ "$single" = 1 ] && [ "$(list_compress "${used#,}")" = "$(list_compress "$NODE_CPUS")" ]; then
    pass after/nic-queues-spread-one-cpu-each
else
    fail after/nic-queues-spread-one-cpu-each "$(for n in $(nic_irqs); do printf '%s:%s ' "$n" "$(affinity "$n")"; done)"
fi
# The record of what was changed, root's only.
check_eq after/record-is-root-only "-rw-------" "$(ls -l "$D/pinctl.irq.json" 2>/dev/null | cut -c1-10)"
# RPS of every receive queue names the node's CPUs (a hexadecimal mask).
mask=0
for c in $(list_expand "$NODE_CPUS" | tr ',' ' '); do mask=$((mask | (1 << c))); done
want=$(printf '%x' "$mask")
rps=$(cat /sys/class/net/"$NIC"/queues/rx-*/rps_cpus | tr -d ',' | sed 's/^0*//' | sort -u | tr '\n' ' ')
check_eq after/rps-on-the-nic-node "$want " "$rps"
# No movable interrupt may go to a service CPU: managed ones stay (the kernel's), and one the
# kernel refused to move must be named in the log.
bad=$(on_service_cpus "$D/run.err")
check_eq after/no-movable-interrupt-on-service-cpus "" "$bad" "$D/run.err"
refused=$(grep -c 'pinctl: irq: refused irq=' "$D/run.err")
note "refused by the kernel (said by number and name): $refused; $(grep 'refused irq=' "$D/run.err" | sed 's/.*refused //' | tr '\n' ';')"

# Traffic through the NIC fires its interrupts on node 3's CPUs only.
nic_counts >"$D/counts-before"
ping -c 40 -i 0.05 -W 1 10.0.2.2 >"$D/ping" 2>&1
nic_counts >"$D/counts-after"
fired=$(awk 'NR == FNR { b[$1] = $2; next } { d = $2 - b[$1]; if (d > 0) print $1 ":" d }' "$D/counts-before" "$D/counts-after" | tr '\n' ' ')
note "NIC interrupts during 40 pings (CPU:count): $fired"
elsewhere=""
total=0
for cd in $fired; do
    total=$((total + ${cd#*:}))
    subset "${cd%%:*}" "$NODE_CPUS" || elsewhere="$elsewhere $cd"
done
if [ "$total" -gt 0 ] && [ -z "$elsewhere" ]; then pass traffic/nic-interrupts-only-on-its-node; else
    fail traffic/nic-interrupts-only-on-its-node "fired $fired (outside CPUs $NODE_CPUS:$elsewhere)"
    detail "$D/ping"
fi

# An affinity put on a service CPU by hand is steered away again (every watch-interval).
first=$(nic_irqs | head -n 1)
svc=$(list_expand "$SERVICE_CPUS" | cut -d, -f1)
echo "$svc" >"/proc/irq/$first/smp_affinity_list"
back_on_node() { subset "$(affinity "$first")" "$NODE_CPUS"; }
if wait_until 20 back_on_node; then pass after/kept-on-its-node; else
    fail after/kept-on-its-node "IRQ $first still on $(affinity "$first")"
fi

# Detached: left as it is, with its record; the next supervisor takes the record over.
snapshot >"$D/steered"
"$PINCTL" detach --socket "$D/sock" >/dev/null 2>&1
wait $RUN
check_eq detach/left-as-it-is "" "$(snapshot | diff - "$D/steered" | grep '^[<>]' | tr '\n' ' ')"
check_eq detach/record-kept "-rw-------" "$(ls -l "$D/pinctl.irq.json" 2>/dev/null | cut -c1-10)"
"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run.out" 2>>"$D/run.err" &
RUN=$!
answers() { "$PINCTL" status --socket "$D/sock" >/dev/null 2>&1; }
wait_until 60 answers || fail detach/taken-over "the second supervisor does not answer"
# (The edited copies are not `*.toml`: every `*.toml` of the file's folder is a file of the
# host, planned with it.)
# A reload that turns steering off puts everything back at once (the originals of the first
# supervisor, from the record).
sed 's/^steer-interrupts = true/steer-interrupts = false/' "$CONFIG" >"$D/off.tmp" && cat "$D/off.tmp" >"$CONFIG"
run_to "$D/reload" "$PINCTL" reload --socket "$D/sock"
check_eq reload/accepted 0 "$(rc_of "$D/reload")" "$D/reload.err"
back_as_before() { snapshot | cmp -s - "$D/before"; }
if wait_until 30 back_as_before; then pass reload/steering-off-puts-everything-back; else
    fail reload/steering-off-puts-everything-back "$(snapshot | diff "$D/before" - | grep '^[<>]' | tr '\n' ' ')"
    detail "$D/run.err"
fi
check_eq reload/record-removed "" "$(ls "$D/pinctl.irq.json" 2>/dev/null)"
# On again: steered again, and SIGTERM puts it all back.
sed 's/^steer-interrupts = false/steer-interrupts = true/' "$CONFIG" >"$D/on.tmp" && cat "$D/on.tmp" >"$CONFIG"
run_to "$D/reload2" "$PINCTL" reload --socket "$D/sock"
if wait_until 30 nic_on_node && wait_until 30 back_on_node && [ -e "$D/pinctl.irq.json" ]; then
    pass reload/steering-on-again
else
    fail reload/steering-on-again "$(for n in $(nic_irqs); do printf '%s:%s ' "$n" "$(affinity "$n")"; done)"
fi
kill -TERM $RUN
wait $RUN
check_eq stop/exit-status 0 "$?" "$D/run.err"
snapshot >"$D/after"
if cmp -s "$D/before" "$D/after"; then pass stop/affinities-back-as-they-were; else
    fail stop/affinities-back-as-they-were "$(diff "$D/before" "$D/after" | grep '^[<>]' | tr '\n' ' ')"
fi
check_eq stop/rps-back "00" "$(cat /sys/class/net/"$NIC"/queues/rx-*/rps_cpus | sort -u | tr -d '\n' | sed 's/^0*$/00/')"
check_eq stop/record-removed "" "$(ls "$D/pinctl.irq.json" 2>/dev/null)"

# With irqbalance running: it is told, not fought, and not restarted.
mkdir -p /run/irqbalance
/vm/bin/irqbalance -f -t 1 >"$D/irqbalance.out" 2>&1 &
IRQB=$!
sock_there() { [ -S "/run/irqbalance/irqbalance$IRQB.sock" ]; }
if ! wait_until 20 sock_there; then
    fail irqbalance/started "no socket /run/irqbalance/irqbalance$IRQB.sock"
    detail "$D/irqbalance.out"
fi
sleep 3
on_service=$(on_service_cpus)
note "before pinctl, irqbalance lets these on the service CPUs:$on_service"
if [ -n "$on_service" ]; then pass irqbalance/spreads-over-service-cpus-before; else
    fail irqbalance/spreads-over-service-cpus-before "every movable interrupt is off $SERVICE_CPUS already"
fi
"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run2.out" 2>"$D/run2.err" &
RUN=$!
told() { grep -q "pinctl: irq: irqbalance pid=$IRQB avoids_cpus=" "$D/run2.err"; }
if wait_until 60 told; then pass irqbalance/told-over-its-socket; else
    fail irqbalance/told-over-its-socket "no line saying so"
    detail "$D/run2.err"
fi
# What irqbalance itself answers on its socket (`pinctl topology` asks it), from its next
# pass on.
avoids() { "$PINCTL" topology 2>/dev/null | sed -n "s/^irqbalance: PID $IRQB .*avoids CPUs \(.*\)$/\1/p"; }
avoids_services() { _a=$(avoids); [ -n "$_a" ] && subset "$SERVICE_CPUS" "$_a"; }
if wait_until 20 avoids_services; then pass irqbalance/avoids-the-service-cpus; else
    fail irqbalance/avoids-the-service-cpus "irqbalance says it avoids \`$(avoids)\`, service CPUs $SERVICE_CPUS"
fi
# Several of its passes later: still nothing movable on the service CPUs, the NIC where pinctl
# put it, the same irqbalance.
sleep 4
bad=$(on_service_cpus "$D/run2.err" "$D/run.err")
check_eq irqbalance/keeps-off-the-service-cpus "" "$bad" "$D/run2.err"
if nic_on_node; then pass irqbalance/leaves-the-nic-vectors-alone; else
    fail irqbalance/leaves-the-nic-vectors-alone "$(for n in $(nic_irqs); do printf '%s:%s ' "$n" "$(affinity "$n")"; done)"
fi
check_eq irqbalance/not-restarted "irqbalance" "$(cat "/proc/$IRQB/comm" 2>/dev/null)"
kill -TERM $RUN
wait $RUN
check_eq irqbalance/stop-exit-status 0 "$?" "$D/run2.err"
own_again() { "$PINCTL" topology 2>/dev/null | grep -qx "irqbalance: PID $IRQB (/run/irqbalance/irqbalance$IRQB.sock), avoids no CPU"; }
if wait_until 20 own_again; then pass irqbalance/given-its-settings-back; else
    fail irqbalance/given-its-settings-back "$("$PINCTL" topology 2>&1 | grep '^irqbalance')"
    detail "$D/run2.err"
fi
kill $IRQB
wait $IRQB 2>/dev/null
