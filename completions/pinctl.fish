# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_pinctl_global_optspecs
    string join \n h/help V/version
end

function __fish_pinctl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_pinctl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_pinctl_using_subcommand
    set -l cmd (__fish_pinctl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c pinctl -n "__fish_pinctl_needs_command" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_needs_command" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "topology" -d 'Show the machine\'s NUMA topology: nodes, CPUs, memory, distances, devices, warnings'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "check" -d 'Validate a service file against a topology'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "plan" -d 'Compute where every service instance runs, and why (a dry run: changes nothing)'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "fleet" -d 'Plan many hosts offline, each on its own capture; fill in a TiUP topology\'s NUMA fields'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "exec" -d 'Apply a placement to this process and exec a command (replaces numactl in units)'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "run" -d 'Supervise every instance of a service file: start, restart, reload, adopt'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "status" -d 'Show the supervised instances: state, PID, uptime, restarts, placement'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "start" -d 'Start instances of the running supervisor (clears `failed`)'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "stop" -d 'Stop instances of the running supervisor'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "restart" -d 'Stop and start instances of the running supervisor'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "reload" -d 'Re-read the service file and apply the difference (`--dry-run`: only show it)'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "detach" -d 'Make the supervisor exit, leaving its instances running for the next one to adopt'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "reopen-logs" -d 'Open every instance\'s `output` file again at its path (after logrotate moved it)'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "watch" -d 'Watch where the planned instances\' memory and threads are; alert, export, rebalance'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "irq" -d 'Steer interrupts as a service file\'s plan says, or put them back (for services started with `pinctl exec`; `pinctl run` steers by itself)'
complete -c pinctl -n "__fish_pinctl_needs_command" -f -a "probe" -d 'Measure memory latency and bandwidth between every CPU node and memory node, beside SLIT and HMAT; save them with the topology for plans'
complete -c pinctl -n "__fish_pinctl_using_subcommand topology" -l topology -d 'Read this instead of the live machine: a sysfs/procfs directory, a tarball of one (.tar, .tar.gz, .tar.bz2, .tar.xz), a `pinctl topology --json` snapshot, or an hwloc XML file (`lstopo --of xml`, formats 2.x and 3.x)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand topology" -l capture -d 'Write every file pinctl reads on this host into FILE (a .tar.gz) that `--topology` accepts on any other machine' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand topology" -l json -d 'Print the topology as JSON (the format docs/topology.md specifies)'
complete -c pinctl -n "__fish_pinctl_using_subcommand topology" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand topology" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand check" -s c -l config -d 'The service file' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand check" -l topology -d 'Check against this topology instead of the live machine: a sysfs/procfs directory, a tarball of one, a `pinctl topology --json` snapshot, or an hwloc XML file' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand check" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand check" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand plan" -s c -l config -d 'The service file; repeat it to plan several files together, as one host (on the live machine, the other files of the file\'s folder are planned with it anyway)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand plan" -l topology -d 'Plan for this topology instead of the live machine: a sysfs/procfs directory, a tarball of one, a `pinctl topology --json` snapshot, or an hwloc XML file' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand plan" -l emit -d 'Write what applies the plan: `systemd DIR` writes a drop-in per instance (`DIR/<unit>.d/50-pinctl.conf`); `numactl` prints a numactl command line per instance' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand plan" -l json -d 'Print the plan as JSON (the contract in docs/planning.md)'
complete -c pinctl -n "__fish_pinctl_using_subcommand plan" -s v -l verbose -d 'List each interrupt on the instances\' CPUs, not a count per instance'
complete -c pinctl -n "__fish_pinctl_using_subcommand plan" -l strict -d 'Fail when the best plan breaks a soft rule (memory over a node\'s capacity under a policy that spills, an instance away from its `near` device, a kept-free node used), and when a `near` entry names no device of the topology (a snapshot\'s too)'
complete -c pinctl -n "__fish_pinctl_using_subcommand plan" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand plan" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -s c -l config -d 'The service file every host runs; with `--tiup`, the mapping file that overrides the settings of TiUP\'s components (docs/fleet.md)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -l topology -d 'A host and its capture (`pinctl topology --capture`, a `--json` snapshot, hwloc XML): `HOST=CAPTURE`, as often as there are hosts' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -l captures -d 'A folder of captures named after their hosts (`db-1.json`, `10.0.1.16.tar.gz`, a sysfs tree `db-2/`), besides or instead of `--topology`' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -l tiup -d 'A TiUP cluster topology: plan each host\'s instances and fill in their `numa_node` and `numa_cores`, every other byte kept; a unified diff on stdout unless `--write`' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -l write -d 'With `--tiup`: write the filled-in topology to FILE (whole or not at all; it may be the topology itself) instead of printing a diff' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -l service-files -d 'With `--tiup`: also write each planned host\'s service file to DIR/HOST.toml, to check or plan it alone with `pinctl plan -c`' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -l json -d 'Print the fleet\'s plan as JSON keyed by host (docs/fleet.md)'
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -l strict -d 'A host whose best plan breaks a soft rule has no plan (as `pinctl plan --strict`)'
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand fleet" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l nodes -d 'Run on the CPUs of these nodes and allocate memory there (policy bind unless --mem says otherwise)' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l cpus -d 'Run on these CPUs (overrides the CPUs of --nodes)' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l mem -d 'Memory policy: default, bind, preferred, preferred-many, interleave, weighted-interleave, local' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l mem-nodes -d 'Nodes of the memory policy, when memory goes elsewhere than --nodes' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l near -d 'Run on the node(s) of a device (eth0, nvme0n1, /dev/sdb, 0000:3b:00.0) or of the block device holding a path' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s c -l config -d 'Service file whose plan gives the placement (with --service)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l service -d 'Service instance to place as the plan places it (with -c)' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l if-unsupported -d 'What to do when the kernel lacks the requested policy' -r -f -a "fail\t'Refuse to run the command (the default: a service must not run unpinned by surprise)'
ignore\t'Run the command without the unsupported policy or flag, with a warning'"
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s m -l membind -d 'numactl: memory only from these nodes (bind)' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s N -l cpunodebind -d 'numactl: run on the CPUs of these nodes' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s C -l physcpubind -d 'numactl: run on these CPUs' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s p -l preferred -d 'numactl: prefer memory from this node' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s P -l preferred-many -d 'numactl: prefer memory from these nodes (Linux 5.15+)' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s i -l interleave -d 'numactl: interleave memory over these nodes' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s w -l weighted-interleave -d 'numactl: weighted interleave over these nodes (Linux 6.9+)' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l dry-run -d 'Print the resolved placement and exit without running anything'
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -l json -d 'With --dry-run: print JSON'
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s l -l localalloc -d 'numactl: allocate on the node of the CPU that faults'
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s b -l balancing -d 'numactl: let NUMA balancing migrate pages within the bind set (Linux 5.12+)'
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s a -l all -d 'numactl: read lists against every possible node/CPU, not this process\'s cpuset'
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pinctl -n "__fish_pinctl_using_subcommand exec" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand run" -s c -l config -d 'The service file' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand run" -l socket -d 'The control socket (default: `[host] socket`, else /run/pinctl/NAME.sock, NAME being `[host] name` or the service file\'s name without `.toml`)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand run" -l state-file -d 'The state file used for adoption (default: `[host] state-file`, else /run/pinctl/NAME.state.json)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand run" -l topology -d 'Plan against this topology instead of the live machine' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand run" -l strict -d 'Refuse to start when the best plan breaks a soft rule (as `pinctl plan --strict`)'
complete -c pinctl -n "__fish_pinctl_using_subcommand run" -l unpinned -d 'Testing only: start instances without their placement (with a --topology larger than this machine)'
complete -c pinctl -n "__fish_pinctl_using_subcommand run" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand run" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand status" -l socket -d 'The supervisor\'s control socket' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand status" -s c -l config -d 'The service file whose supervisor to ask (its `[host] socket`, else /run/pinctl/NAME.sock as `pinctl run -c FILE` chose)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand status" -l runtime-dir -d 'The runtime folder of `--host`' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand status" -l json -d 'Print the answer as JSON (`instances`, as in docs/supervisor.md)'
complete -c pinctl -n "__fish_pinctl_using_subcommand status" -l host -d 'Every supervisor of the host (each control socket of the runtime folder): its file, instances, placements and states, then the nodes no instance uses'
complete -c pinctl -n "__fish_pinctl_using_subcommand status" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand status" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand start" -l socket -d 'The supervisor\'s control socket' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand start" -s c -l config -d 'The service file whose supervisor to ask (its `[host] socket`, else /run/pinctl/NAME.sock as `pinctl run -c FILE` chose)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand start" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand start" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand stop" -l socket -d 'The supervisor\'s control socket' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand stop" -s c -l config -d 'The service file whose supervisor to ask (its `[host] socket`, else /run/pinctl/NAME.sock as `pinctl run -c FILE` chose)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand stop" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand stop" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand restart" -l socket -d 'The supervisor\'s control socket' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand restart" -s c -l config -d 'The service file whose supervisor to ask (its `[host] socket`, else /run/pinctl/NAME.sock as `pinctl run -c FILE` chose)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand restart" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand restart" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand reload" -l socket -d 'The supervisor\'s control socket' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand reload" -s c -l config -d 'The service file whose supervisor to ask (its `[host] socket`, else /run/pinctl/NAME.sock as `pinctl run -c FILE` chose)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand reload" -l dry-run -d 'Print what a reload would change, change nothing'
complete -c pinctl -n "__fish_pinctl_using_subcommand reload" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand reload" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand detach" -l socket -d 'The supervisor\'s control socket' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand detach" -s c -l config -d 'The service file whose supervisor to ask (its `[host] socket`, else /run/pinctl/NAME.sock as `pinctl run -c FILE` chose)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand detach" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand detach" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand reopen-logs" -l socket -d 'The supervisor\'s control socket' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand reopen-logs" -s c -l config -d 'The service file whose supervisor to ask (its `[host] socket`, else /run/pinctl/NAME.sock as `pinctl run -c FILE` chose)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand reopen-logs" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand reopen-logs" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand watch" -s c -l config -d 'The service file whose planned instances are watched' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand watch" -l once -d 'Print one sample of every instance and exit as a monitoring check: 0 in place, 1 drift, 2 an instance not sampled, 3 a file or plan it cannot use'
complete -c pinctl -n "__fish_pinctl_using_subcommand watch" -l json -d 'JSON: the sample as one object (`--once`), or one object per log line'
complete -c pinctl -n "__fish_pinctl_using_subcommand watch" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand watch" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and not __fish_seen_subcommand_from apply restore" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and not __fish_seen_subcommand_from apply restore" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and not __fish_seen_subcommand_from apply restore" -f -a "apply" -d 'Steer the host\'s interrupts for the plan of a service file, and record what changed (for hosts that start services with `pinctl exec`; `pinctl run` steers by itself)'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and not __fish_seen_subcommand_from apply restore" -f -a "restore" -d 'Put back every interrupt affinity, queue mask and irqbalance setting recorded by `pinctl irq apply` (or by a `pinctl run` of the same file that was detached or killed)'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from apply" -s c -l config -d 'The service file (its `[host] steer-interrupts` must be on)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from apply" -l state-file -d 'The supervisor\'s state file, beside which the record is kept (default: `[host] state-file`, else /run/pinctl/NAME.state.json)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from apply" -l dry-run -d 'Print what would be moved and change nothing'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from apply" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from apply" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from restore" -s c -l config -d 'The service file (its `[host] steer-interrupts` must be on)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from restore" -l state-file -d 'The supervisor\'s state file, beside which the record is kept (default: `[host] state-file`, else /run/pinctl/NAME.state.json)' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from restore" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand irq; and __fish_seen_subcommand_from restore" -s V -l version -d 'Print version'
complete -c pinctl -n "__fish_pinctl_using_subcommand probe" -l budget -d 'The time the whole probe may take, in seconds (default: about 10 for 2 nodes and 90 for 8; with --quick, a few)' -r
complete -c pinctl -n "__fish_pinctl_using_subcommand probe" -l save -d 'Also save this machine\'s topology with the result: a snapshot (FILE.json) or a capture (FILE.tar.gz, FILE.tgz) that `--topology` reads on any machine, so plans made there use the measured costs' -r -F
complete -c pinctl -n "__fish_pinctl_using_subcommand probe" -l quick -d 'Small buffers and short passes (a few seconds): checks that the probe works, in CI or a VM. Its figures are not for planning'
complete -c pinctl -n "__fish_pinctl_using_subcommand probe" -l json -d 'Print the result as JSON (docs/probe.md)'
complete -c pinctl -n "__fish_pinctl_using_subcommand probe" -s h -l help -d 'Print help'
complete -c pinctl -n "__fish_pinctl_using_subcommand probe" -s V -l version -d 'Print version'
