# layouts: 4node-run
# timeout: 900
# kernels: oldest newest
# Scenario 22: a real database scaled by reload under a writer (issue 18). Debian's MariaDB
# server runs under `pinctl run` as service `db` (its data directory, socket and log named by
# `{instance}`), first one instance, then two, then one again, each change a `pinctl reload`,
# while a writer inserts numbered rows into instance 0 and notes each insert the server
# acknowledged. Between the reloads instances are SIGKILLed and restarted by pinctl. Asked of
# the kernel and the database: no data directory ever has two server processes (a watcher
# samples /proc the whole time, and MariaDB's own lock would refuse a second copy: its log must
# not say so), scaling keeps instance 0's process (no restart on a rename), and every
# acknowledged insert is in the table at the end.
# The server runs as user `mysql` and writes its output into a folder only root may write,
# `/var/log/mdb22` (issue 25: pinctl opens it there, as systemd's `StandardOutput=file:`
# does); Debian's logrotate rotates it as docs/config.md says, and the `Shutdown complete` of
# the SIGTERM stop lands in the new file.
D=/tmp/mdb22
LOGS=/var/log/mdb22
mkdir -p "$D" "$LOGS" "$D/run"
chmod 755 /var /var/log "$LOGS"
grep -q '^mysql:' /etc/passwd 2>/dev/null || echo "mysql:x:27:27:MariaDB:/nonexistent:/bin/false" >>/etc/passwd
grep -q '^mysql:' /etc/group 2>/dev/null || echo "mysql:x:27:" >>/etc/group
grep -q '^root:' /etc/passwd || echo "root:x:0:0:root:/root:/bin/sh" >>/etc/passwd
grep -q '^root:' /etc/group || echo "root:x:0:" >>/etc/group
chown 27:27 "$D/run"
mkdir -p /sys/fs/cgroup
mounted /sys/fs/cgroup || mount -t cgroup2 cgroup2 /sys/fs/cgroup
CONFIG=$D/db.toml
MARIADB=/vm/bin/mariadb
write_config() { # INSTANCES
    cat >"$CONFIG" <<EOT
[host]
keep-free = []
watch-interval = "2s"

[service.db]
command = ["/vm/bin/mariadbd", "--no-defaults", "--datadir=$D/data-{instance}",
           "--socket=$D/run/sock-{instance}", "--tmpdir=$D/run", "--skip-networking", "--skip-grant-tables",
           "--lc-messages-dir=/vm/mysql", "--innodb-buffer-pool-size=16M",
           "--innodb-log-file-size=4M", "--innodb-use-native-aio=0", "--skip-log-bin"]
instances = $1
nodes = 1
memory-policy = "preferred"
restart = "always"
restart-delay = "200ms"
start-limit = "off"
stop-timeout = "60s"
user = "mysql"
output = "$LOGS/log-{instance}"
EOT
}
for i in 0 1; do mkdir -p "$D/data-$i" && chown 27:27 "$D/data-$i"; done

# Two server processes on one data directory: sampled from /proc every 0.2 s for the whole
# scenario. The pattern's `[0]` keeps grep from finding itself.
overlap_watch() {
    while [ ! -f "$D/stop-watch" ]; do
        for i in 0 1; do
            n=$(grep -a -l "mdb22/data-[$i]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)
            [ "$n" -gt 1 ] && echo "data-$i: $n servers at $(cut -d' ' -f1 /proc/uptime)" >>"$D/overlaps"
        done
        usleep 200000
    done
}
: >"$D/overlaps"
overlap_watch &
WATCHER=$!

sql() { # INSTANCE SQL
    "$MARIADB" --no-defaults -S "$D/run/sock-$1" --connect-timeout=5 -N -e "$2" 2>>"$D/sql.err"
}
# The PID of an active instance NAME, or nothing.
active_pid() { instance_lines "$D/sock" | awk -v n="$1" '$1 == n && $2 == "active" { print $3 }'; }
# Waits (up to 240 s) until instance NAME is active with a PID other than NOT and its server
# answers on the socket of instance number N.
serving() { # NAME N NOT
    _t0=$(uptime_s)
    while [ $(($(uptime_s) - _t0)) -lt 240 ]; do
        _p=$(active_pid "$1")
        if [ -n "$_p" ] && [ "$_p" != "$3" ] && sql "$2" "SELECT 1" >/dev/null; then
            echo "$_p"
            return 0
        fi
        usleep 500000
    done
    return 1
}

write_config 1
"$PINCTL" run -c "$CONFIG" --socket "$D/sock" --state-file "$D/state.json" >"$D/run.out" 2>"$D/run.err" &
RUN=$!
if PID0=$(serving db 0 none); then pass mariadb/started; else
    fail mariadb/started "db not serving within 240 s: $(instance_lines "$D/sock" | tr '\n' ';')"
    detail "$D/run.err" "$LOGS/log-0" "$D/sql.err"
fi
sql 0 "CREATE DATABASE IF NOT EXISTS t; CREATE TABLE IF NOT EXISTS t.w (id INT PRIMARY KEY) ENGINE=InnoDB"

# The writer: one insert at a time into instance 0, each acknowledged one noted.
writer() {
    _i=0
    while [ ! -f "$D/stop-writer" ]; do
        _i=$((_i + 1))
        if sql 0 "INSERT INTO t.w VALUES ($_i)"; then
            echo "$_i" >>"$D/acked"
        else
            usleep 300000 # the server is restarting: not a loop of failing clients
        fi
    done
}
: >"$D/acked"
writer &
WRITER=$!
wait_until 120 sh -c "[ \$(wc -l <'$D/acked') -ge 5 ]" && pass mariadb/writing ||
    fail mariadb/writing "fewer than 5 inserts acknowledged in 120 s: $(tail -n 3 "$D/sql.err")"

# Scale up: db becomes db-0 with the same process; db-1 starts.
write_config 2
"$PINCTL" reload --socket "$D/sock" >"$D/reload-up.out" 2>&1
if PID1=$(serving db-1 1 none); then pass scale-up/second-started; else
    fail scale-up/second-started "db-1 not serving: $(cat "$D/reload-up.out")"
    detail "$D/run.err" "$LOGS/log-1"
fi
check_eq scale-up/first-kept-its-process "$PID0" "$(active_pid db-0)"

# SIGKILL each; pinctl restarts them, the writer goes on once instance 0 is back.
kill -9 "$PID0" 2>/dev/null
if PID0=$(serving db-0 0 "$PID0"); then pass kill/first-restarted; else
    fail kill/first-restarted "db-0 not serving again"; detail "$D/run.err" "$LOGS/log-0"
fi
kill -9 "$PID1" 2>/dev/null
if PID1=$(serving db-1 1 "$PID1"); then pass kill/second-restarted; else
    fail kill/second-restarted "db-1 not serving again"; detail "$D/run.err" "$LOGS/log-1"
fi
before=$(wc -l <"$D/acked")
wait_until 120 sh -c "[ \$(wc -l <'$D/acked') -ge $((before + 5)) ]" && pass kill/writing-again ||
    fail kill/writing-again "no 5 more inserts acknowledged in 120 s after the restart"

# Scale down: db-1 stops, db-0 becomes db with the same process.
write_config 1
"$PINCTL" reload --socket "$D/sock" >"$D/reload-down.out" 2>&1
check_eq scale-down/instance-0-kept-its-process "$PID0" "$(active_pid db)"
wait_until 60 sh -c "! grep -a -q 'mdb22/data-[1]' /proc/[0-9]*/cmdline 2>/dev/null" &&
    pass scale-down/second-stopped || fail scale-down/second-stopped "a server on data-1 still runs"

# Once more after the scale-down, then stop the writer and count.
kill -9 "$PID0" 2>/dev/null
PID0=$(serving db 0 "$PID0") && pass kill/restarted-after-scale-down ||
    fail kill/restarted-after-scale-down "db not serving again"
before=$(wc -l <"$D/acked")
wait_until 120 sh -c "[ \$(wc -l <'$D/acked') -ge $((before + 5)) ]"
touch "$D/stop-writer"
wait "$WRITER" 2>/dev/null
acked=$(wc -l <"$D/acked")
present=$(sql 0 "SELECT COUNT(*) FROM t.w WHERE id IN ($(paste -sd, "$D/acked"))")
lost=$((acked - ${present:-0}))
bench "acknowledged=$acked present=$present lost=$lost restarts=3 reloads=2"
check_eq writes/none-lost 0 "$lost"
[ "$acked" -ge 15 ] && pass writes/enough || fail writes/enough "only $acked inserts acknowledged"

touch "$D/stop-watch"
wait "$WATCHER" 2>/dev/null
check_eq servers/never-two-on-one-datadir "" "$(cat "$D/overlaps")"
locked=$(grep -h -i "unable to lock\|another mariadbd" "$LOGS"/log-* 2>/dev/null | head -n 3)
check_eq servers/mariadb-never-found-its-datadir-locked "" "$locked"

# The output file: in root's folder, created by pinctl for mysql; rotated by logrotate with
# docs/config.md's stanza (no `create`), after which pinctl writes a new file for mysql.
owner=$(stat -c %u "$LOGS/log-0" 2>/dev/null)
check_eq output/root-folder-file-is-mysqls 27 "$owner"
grep -q "ready for connections" "$LOGS/log-0" && pass output/server-lines-in-file ||
    fail output/server-lines-in-file "no \`ready for connections\` in $LOGS/log-0"
cat >"$D/logrotate.conf" <<EOT
$LOGS/log-* {
    daily
    rotate 7
    compress
    delaycompress
    sharedscripts
    postrotate
        $PINCTL reopen-logs --socket $D/sock
    endscript
}
EOT
if /vm/bin/logrotate -f -s "$D/logrotate.state" "$D/logrotate.conf" >"$D/logrotate.out" 2>&1; then
    pass output/logrotate
else
    fail output/logrotate "$(cat "$D/logrotate.out")"
fi
grep -q "ready for connections" "$LOGS/log-0.1" 2>/dev/null && pass output/rotated-file-kept ||
    fail output/rotated-file-kept "no rotated $LOGS/log-0.1: $(ls -l "$LOGS" | tr '\n' ';')"
[ "$(stat -c %u "$LOGS/log-0" 2>/dev/null)" = 27 ] && pass output/new-file-is-mysqls ||
    fail output/new-file-is-mysqls "$(ls -ln "$LOGS" | tr '\n' ';')"

# SIGTERM: MariaDB shuts down cleanly, nothing is left.
kill -TERM "$RUN"
wait_until 90 sh -c "! kill -0 $RUN 2>/dev/null"
kill -9 "$RUN" 2>/dev/null
wait "$RUN" 2>/dev/null
left=$(grep -a -l "mdb22/data-[01]" /proc/[0-9]*/cmdline 2>/dev/null | tr '\n' ' ')
check_eq stop/no-server-left "" "$left"
grep -q "Shutdown complete" "$LOGS/log-0" && pass stop/clean-shutdown ||
    fail stop/clean-shutdown "no \`Shutdown complete\` in data-0's log: $(tail -n 3 "$LOGS/log-0")"
for p in $(grep -a -l "mdb22/data-[01]" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
    kill -9 "$p" 2>/dev/null
done
