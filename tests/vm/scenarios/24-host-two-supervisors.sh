# layouts: 4node-run
# timeout: 600
# Scenario 24: one host, one plan (issue 27). Two teams' files in one folder, each run by a
# supervisor of its own: MariaDB in `db.toml`, two Redis in `cache.toml`, every instance
# `nodes = 1`. Started db first, then cache; stopped; started cache first, then db. Asked of the
# kernel: each instance's allowed CPUs (/proc/PID/status) are the ones its supervisor reports,
# no two instances share a node's CPUs, the placements are the same in both orders, and
# `pinctl status --host` lists both supervisors with their files.
D=/tmp/host24
ETC=$D/etc
RUNDIR=$D/run
mkdir -p "$ETC" "$RUNDIR" "$D/data"
chmod 755 "$D" "$ETC" "$RUNDIR"
mkdir -p /sys/fs/cgroup
mounted /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up

cat >"$ETC/db.toml" <<EOT
[host]
keep-free = []
socket = "$RUNDIR/db.sock"
state-file = "$RUNDIR/db.state.json"

[service.mariadb]
command = ["/vm/bin/mariadbd", "--no-defaults", "--user=root", "--datadir=$D/data",
           "--socket=$D/mdb.sock", "--skip-networking", "--skip-grant-tables",
           "--lc-messages-dir=/vm/mysql", "--innodb-buffer-pool-size=16M",
           "--innodb-log-file-size=4M", "--innodb-use-native-aio=0", "--skip-log-bin"]
nodes = 1
memory-policy = "preferred"
stop-timeout = "60s"
output = "$D/mariadb.log"
EOT
cat >"$ETC/cache.toml" <<EOT
[host]
socket = "$RUNDIR/cache.sock"
state-file = "$RUNDIR/cache.state.json"

[service.redis]
command = ["/vm/bin/redis-server", "--port", "639{instance}", "--bind", "127.0.0.1",
    "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", "$D"]
instances = 2
nodes = 1
output = "$D/redis-{instance}.log"
EOT

# Every instance of both supervisors as `NAME STATE PID CPUS` lines.
both() { instance_lines "$RUNDIR/db.sock"; instance_lines "$RUNDIR/cache.sock"; }
all_active() {
    [ "$(both | awk '$2 == "active"' | wc -l)" -eq 3 ]
}
start() { # NAME
    "$PINCTL" run -c "$ETC/$1.toml" >"$D/$1.out" 2>"$D/$1.err" &
    echo $! >"$D/$1.pid"
    wait_until 120 test -S "$RUNDIR/$1.sock"
}
stop() { # NAME
    kill -TERM "$(cat "$D/$1.pid")"
    wait "$(cat "$D/$1.pid")"
}

round() { # FIRST SECOND LABEL
    start "$1"
    start "$2"
    if wait_until 240 all_active; then pass "$3/all-active"; else
        fail "$3/all-active" "not every instance active within 240 s: $(both | tr '\n' ';')"
        detail "$D/db.err" "$D/cache.err"
    fi
    both | awk '{ print $1, $4 }' | sort >"$D/$3.placements"
    # The kernel's word for each: the process runs on the CPUs its supervisor reports.
    both | while read -r name state pid cpus; do
        check_list "$3/$name/kernel-cpus" "$cpus" \
            "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$pid/status")"
    done
    # No CPU given twice: the three instances' CPUs, expanded, are all different.
    total=$(both | awk '{ print $4 }' | while read -r c; do list_expand "$c" | tr ',' '\n'; done | wc -l)
    distinct=$(both | awk '{ print $4 }' | while read -r c; do list_expand "$c" | tr ',' '\n'; done | sort -u | wc -l)
    check_eq "$3/no-cpu-twice" "$total" "$distinct" "$D/$3.placements"
    run_to "$D/$3.host" "$PINCTL" status --host --runtime-dir "$RUNDIR"
    check_eq "$3/status-host-ran" 0 "$(rc_of "$D/$3.host")" "$D/$3.host.err"
    for s in db cache; do
        if grep -q "^supervisor \`$s\` (PID [0-9]*, $ETC/$s.toml, $RUNDIR/$s.sock)" "$D/$3.host.out"; then
            pass "$3/status-host-lists-$s"
        else
            fail "$3/status-host-lists-$s" "no line for supervisor $s"
            detail "$D/$3.host.out"
        fi
    done
    stop "$2"
    stop "$1"
}

round db cache db-first
round cache db cache-first
check_eq same-placements-either-order "$(cat "$D/db-first.placements")" "$(cat "$D/cache-first.placements")" \
    "$D/db-first.placements" "$D/cache-first.placements"
