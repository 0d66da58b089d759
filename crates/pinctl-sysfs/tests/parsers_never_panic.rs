//! Whatever bytes a file holds, the parsers answer with a value or an error, never a panic.

use pinctl_sysfs::parse;
use proptest::prelude::*;

proptest! {
    #[test]
    fn parsers_never_panic(text in "\\PC{0,200}") {
        let _ = parse::id_list::<pinctl_topology::CpuKind>(&text);
        let _ = parse::id_mask::<pinctl_topology::CpuKind>(&text);
        let _ = parse::numa_node(&text);
        let _ = parse::cache_type(&text);
        let _ = parse::cache_size(&text);
        let _ = pinctl_sysfs::node::meminfo::parse(&text);
        let _ = parse::distance_row(&text);
        let _ = pinctl_sysfs::node::numastat::parse(&text);
        let _ = pinctl_sysfs::proc::pid::status::parse(&text);
        let _ = pinctl_sysfs::proc::pid::numa_maps::parse(&text);
        let _ = pinctl_sysfs::cgroup::numa_stat::parse(&text);
        let _ = pinctl_sysfs::cgroup::numa_stat::parse_of(&text, &["anon", "total="]);
        let _ = parse::mounts(&text);
        let _ = parse::mountinfo(&text);
        let _ = parse::default_routes_v4(&text);
        let _ = parse::default_routes_v6(&text);
        let _ = pinctl_sysfs::proc::pid::cgroup::path(&text, Some("cpuset"));
        let _ = parse::is_pci_address(&text);
        let _ = parse::counters(&text);
        let _ = pinctl_sysfs::proc::pid::stat::parse(&text);
        let _ = pinctl_sysfs::proc::pid::maps::parse(&text);
        let _ = pinctl_sysfs::pci::pci_class(&text);
        let _ = pinctl_sysfs::pci::nvidia_device_minor(&text, "0000:41:00.0");
        let _ = pinctl_sysfs::hmat::figure(&text);
        let _ = pinctl_sysfs::memory_tiers::tier_of_folder(&text);
        let _ = pinctl_sysfs::proc::uptime::parse(&text);
        let _ = pinctl_sysfs::proc::vmstat::parse_counter(&text, "numa_pages_migrated");
        let _ = pinctl_sysfs::thp::parse(&text);
        let _ = pinctl_sysfs::cgroup::procs::parse(&text);
        let _ = pinctl_sysfs::proc::pid::cmdline::parse(text.as_bytes());
        let _ = pinctl_sysfs::proc::pid::smaps::anon_huge_pages_at(&text, 0x1000);
        if let Ok(t) = pinctl_sysfs::proc::interrupts::parse(&text) {
            for l in &t.lines {
                let _ = l.name();
            }
        }
        let _ = pinctl_sysfs::irq::actions(&text);
        let _ = pinctl_sysfs::irq::managed_by_name(&text);
        let _ = pinctl_sysfs::irq::cut(&text);
        let _ = pinctl_sysfs::irqbalance::pid_of_socket(&text);
    }

    #[test]
    fn numa_maps_lines_round_trip_their_counts(
        addr in 0u64..u64::MAX,
        pages in proptest::collection::btree_map(0u32..64, 0u64..1_000_000, 0..6),
    ) {
        let fields: Vec<String> = pages.iter().map(|(n, p)| format!("N{n}={p}")).collect();
        let line = format!("{addr:x} bind:0-3 anon=1 {} kernelpagesize_kB=4", fields.join(" "));
        let e = pinctl_sysfs::proc::pid::numa_maps::parse_line(&line).unwrap();
        prop_assert_eq!(e.address, addr);
        prop_assert_eq!(e.pages, pages.into_iter().collect::<Vec<_>>());
    }

    /// Real files cut anywhere or with a byte changed still parse or fail, never panic.
    #[test]
    fn truncated_and_garbled_process_files_never_panic(
        cut in 0usize..400,
        at in 0usize..400,
        byte in proptest::char::any(),
    ) {
        let files = [
            "7f0e1c000000 bind:0-1=static anon=512 dirty=512 N0=256 N1=256 kernelpagesize_kB=4\n\
             55d1 prefer (many):0-1 file=/bin/cat mapped=3 N1=3\n",
            "anon N0=4096 N1=0\nfile N0=1 N1=2\nshmem N0=0 N1=0\nfile_thp N0=0 N1=0\n",
            "Name:\tdb\nPPid:\t1\nCpus_allowed_list:\t0-7\nMems_allowed_list:\t0-1\n",
            "3560 (a (b)) S 1 3558 29067 0 -1 4194304 102 0 0 0 0 0 0 0 20 0 1 0 98576 3133440 \
             412 18446744073709551615 1 2 3 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
            "numa_hit 6451\nnuma_miss 0\nnuma_foreign 0\nnuma_pages_migrated 3\n",
            "559ba4af5000-559ba4af7000 r--p 00000000 fe:00 247282 /usr/bin/head\n",
        ];
        for f in files {
            let mut chars: Vec<char> = f.chars().collect();
            chars.truncate(cut.min(chars.len()));
            if !chars.is_empty() {
                let i = at % chars.len();
                chars[i] = byte;
            }
            let text: String = chars.into_iter().collect();
            let _ = pinctl_sysfs::proc::pid::numa_maps::parse(&text);
            let _ = pinctl_sysfs::cgroup::numa_stat::parse(&text);
            let _ = pinctl_sysfs::cgroup::numa_stat::parse_of(&text, &["anon", "file", "shmem"]);
            let _ = pinctl_sysfs::proc::pid::status::parse(&text);
            let _ = pinctl_sysfs::proc::pid::stat::parse(&text);
            let _ = parse::counters(&text);
            let _ = pinctl_sysfs::node::numastat::parse(&text);
            let _ = pinctl_sysfs::proc::pid::maps::parse(&text);
        }
    }
}
