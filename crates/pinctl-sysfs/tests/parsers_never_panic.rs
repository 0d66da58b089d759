//! Whatever bytes a file holds, the parsers answer with a value or an error, never a panic.

use pinctl_sysfs::parse;
use proptest::prelude::*;

proptest! {
    #[test]
    fn parsers_never_panic(text in "\\PC{0,200}") {
        let _ = parse::id_list::<pinctl_topology::CpuKind>(&text);
        let _ = parse::id_mask::<pinctl_topology::CpuKind>(&text);
        let _ = parse::numa_node(&text);
        let _ = parse::meminfo(&text);
        let _ = parse::distance_row(&text);
        let _ = parse::numastat(&text);
        let _ = parse::status_allowed(&text);
        let _ = parse::numa_maps(&text);
        let _ = parse::memory_numa_stat(&text);
        let _ = parse::mounts(&text);
        let _ = parse::mountinfo(&text);
        let _ = parse::default_routes_v4(&text);
        let _ = parse::default_routes_v6(&text);
        let _ = parse::cgroup_path(&text, Some("cpuset"));
        let _ = parse::is_pci_address(&text);
    }

    #[test]
    fn numa_maps_lines_round_trip_their_counts(
        addr in 0u64..u64::MAX,
        pages in proptest::collection::btree_map(0u32..64, 0u64..1_000_000, 0..6),
    ) {
        let fields: Vec<String> = pages.iter().map(|(n, p)| format!("N{n}={p}")).collect();
        let line = format!("{addr:x} bind:0-3 anon=1 {} kernelpagesize_kB=4", fields.join(" "));
        let e = parse::numa_maps_line(&line).unwrap();
        prop_assert_eq!(e.address, addr);
        prop_assert_eq!(e.pages, pages.into_iter().collect::<Vec<_>>());
    }
}
