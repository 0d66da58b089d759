//! Hostile topology sources (issue 12), each built in the test: every one is a clean error that
//! names what is wrong, or (one bad file inside a tree, issue 10 section 2) a warning that names
//! it and what was assumed, never a crash, a hang, unbounded memory or a file from outside the
//! tree.

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use pinctl_capture::{
    MAX_ENTRY_BYTES, MAX_PATH_BYTES, MAX_TREE_BYTES, capture_topology, load_topology, read_tarball,
};
use pinctl_sysfs::{DiscoveryError, TopologySource};

/// A minimal two-node tree; `extra` writes more files relative to the root.
fn tree(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    let w = |rel: &str, text: &str| {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    w("sys/devices/system/cpu/online", "0-3\n");
    for c in 0..4 {
        w(&format!("sys/devices/system/cpu/cpu{c}/topology/core_id"), &format!("{c}\n"));
    }
    w("sys/devices/system/node/online", "0-1\n");
    w("sys/devices/system/node/node0/cpulist", "0-1\n");
    w("sys/devices/system/node/node1/cpulist", "2-3\n");
    root
}

fn load(src: &Path) -> Result<pinctl_topology::Topology, String> {
    let kind = TopologySource::from_arg(Some(src)).map_err(|e| chain(&e))?;
    load_topology(&kind).map(|l| l.topology).map_err(|e| chain(&e))
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(&format!(": {c}"));
        cur = c.source();
    }
    s
}

/// The one discovery warning about `file` (a path ending), its text.
fn warning_about(t: &pinctl_topology::Topology, file: &str) -> String {
    let found: Vec<&String> = t.warnings.iter().filter(|w| w.contains(file)).collect();
    assert_eq!(found.len(), 1, "one warning about {file}: {:?}", t.warnings);
    found[0].clone()
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success());
}

#[test]
fn the_tree_itself_reads() {
    let dir = tempfile::tempdir().unwrap();
    let t = load(&tree(dir.path())).unwrap();
    assert_eq!(t.nodes.len(), 2);
}

#[test]
fn fifos_and_devices_fail_fast_or_are_set_aside_with_their_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    // A FIFO as --topology.
    let fifo = dir.path().join("topo.json");
    mkfifo(&fifo);
    let e = load(&fifo).unwrap_err();
    assert!(e.contains("is not a regular file") && e.contains("topo.json"), "{e}");
    // A FIFO inside the tree: never opened for a wait, node 1's CPUs are unknown.
    let cpulist = root.join("sys/devices/system/node/node1/cpulist");
    fs::remove_file(&cpulist).unwrap();
    mkfifo(&cpulist);
    let t = load(&root).unwrap();
    let w = warning_about(&t, "node1/cpulist");
    assert!(w.contains("not a regular file") && w.contains("node 1's CPUs"), "{w}");
    assert!(t.node(1).unwrap().cpus.is_empty());
    assert_eq!(t.node(0).unwrap().cpus.to_string(), "0-1");
    // A link to /dev/zero inside the tree resolves inside the root (absent), and a device
    // node reached inside it is refused.
    fs::remove_file(&cpulist).unwrap();
    symlink("/dev/zero", &cpulist).unwrap();
    let t = load(&root).unwrap();
    assert!(t.node(1).unwrap().cpus.is_empty(), "`/dev/zero` is taken below the root");
}

#[test]
fn a_file_larger_than_the_kernel_writes_is_set_aside_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let bomb = root.join("sys/devices/system/node/node1/cpulist");
    fs::write(&bomb, "2-3,".repeat(100_000)).unwrap();
    let t = load(&root).unwrap();
    let w = warning_about(&t, "node1/cpulist");
    assert!(w.contains("larger than 65536 bytes") && w.contains("not read"), "{w}");
    assert!(t.node(1).unwrap().cpus.is_empty());
}

#[test]
fn links_out_of_a_directory_root_are_refused_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let secret = dir.path().join("secret");
    fs::write(&secret, "SECRET-HOST-DATA\n").unwrap();
    let cpulist = root.join("sys/devices/system/node/node1/cpulist");
    fs::remove_file(&cpulist).unwrap();
    // Relative: climbs out of the root.
    symlink("../../../../../../secret", &cpulist).unwrap();
    let e = load(&root).unwrap_err();
    assert!(e.contains("leads out of the topology root"), "{e}");
    assert!(!e.contains("SECRET"), "{e}");
    // Issue 26: the error names the link, not the root the walk had climbed back to.
    assert!(e.starts_with(&format!("`{}` is a link", cpulist.display())), "{e}");
    // Absolute: taken below the root, as in tarballs.
    fs::remove_file(&cpulist).unwrap();
    symlink(&secret, &cpulist).unwrap();
    let t = load(&root).unwrap();
    assert!(t.node(1).unwrap().cpus.is_empty());
    let out = dir.path().join("cap.tar.gz");
    capture_topology(&root, &out).unwrap();
    let bytes = fs::read(&out).unwrap();
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text).unwrap();
    assert!(!String::from_utf8_lossy(&text).contains("SECRET"), "the capture holds no host file");
}

#[test]
fn ids_beyond_the_ceilings_are_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let online = root.join("sys/devices/system/node/online");
    // A list beyond the ceiling is refused before anything is sized by it; the node folders
    // stand in for it.
    fs::write(&online, "0-1048576\n").unwrap();
    let t = load(&root).unwrap();
    let w = warning_about(&t, "node/online");
    assert!(w.contains("too large (at most 65535)") && w.contains("`nodeN` folders"), "{w}");
    assert_eq!(t.node_ids().to_string(), "0-1");
    fs::write(&online, "0-5000\n").unwrap();
    let t = load(&root).unwrap();
    assert!(warning_about(&t, "node/online").contains("at most 4095"), "{:?}", t.warnings);
    fs::remove_file(&online).unwrap();
    fs::create_dir(root.join("sys/devices/system/node/node4294967295")).unwrap();
    let e = load(&root).unwrap_err();
    assert!(e.contains("node4294967295") && e.contains("above 4095"), "{e}");
    fs::remove_dir(root.join("sys/devices/system/node/node4294967295")).unwrap();
    fs::create_dir(root.join("sys/devices/system/cpu/cpu65536")).unwrap();
    let e = load(&root).unwrap_err();
    assert!(e.contains("cpu65536") && e.contains("above 65535"), "{e}");
}

#[test]
fn a_folder_without_sysfs_is_not_a_root() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("proc/self")).unwrap();
    let e = load(dir.path()).unwrap_err();
    assert!(e.contains("is not a sysfs/procfs root"), "{e}");
}

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn tar_of_tree(root: &Path) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    b.append_dir_all("cap", root).unwrap();
    b.into_inner().unwrap()
}

#[test]
fn gzip_with_a_bad_checksum_or_trailing_garbage_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    let good = gz(&tar_of_tree(&root));
    let path = dir.path().join("c.tar.gz");
    fs::write(&path, &good).unwrap();
    assert_eq!(read_tarball(&path).unwrap().nodes.len(), 2);
    let mut bad_crc = good.clone();
    let n = bad_crc.len();
    bad_crc[n - 8] ^= 0xff; // CRC32 of the gzip trailer
    fs::write(&path, &bad_crc).unwrap();
    let e = read_tarball(&path).map(|_| ()).unwrap_err();
    assert!(chain(&e).contains("c.tar.gz"), "{}", chain(&e));
    let mut trailing = good;
    trailing.extend_from_slice(b"garbage after the stream");
    fs::write(&path, &trailing).unwrap();
    assert!(read_tarball(&path).is_err(), "trailing garbage is refused");
}

#[test]
fn a_header_claiming_a_huge_size_is_refused_without_allocating() {
    let mut h = tar::Header::new_gnu();
    h.set_path("cap/sys/devices/system/node/online").unwrap();
    h.set_size(1 << 40);
    h.set_mode(0o644);
    h.set_cksum();
    let mut bytes = h.as_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 1024]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.tar");
    fs::write(&path, &bytes).unwrap();
    let e = chain(&read_tarball(&path).map(|_| ()).unwrap_err());
    assert!(
        e.contains("node/online") && e.contains(&format!("more than {MAX_ENTRY_BYTES}")),
        "{e}"
    );
}

#[test]
fn a_pax_path_of_fifty_thousand_components_is_refused() {
    let long = "a/".repeat(50_000) + "f";
    let mut b = tar::Builder::new(Vec::new());
    b.append_pax_extensions([("path", long.as_bytes())]).unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_path("short").unwrap();
    h.set_size(1);
    h.set_mode(0o644);
    h.set_cksum();
    b.append(&h, &b"x"[..]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.tar");
    fs::write(&path, b.into_inner().unwrap()).unwrap();
    let e = chain(&read_tarball(&path).map(|_| ()).unwrap_err());
    assert!(e.contains(&format!("longer than {MAX_PATH_BYTES} bytes")), "{e}");
    assert!(e.len() < 400, "the error shows a shortened path: {e}");
}

/// Issue 26: each path was bounded, the tree was not. 300 entries of 4,094-byte paths of
/// one-letter folders store every parent folder under its full path (1.46 GiB from a 7 KiB
/// gzip): the tree's total is bounded and the capture refused past it, naming the entry.
#[test]
fn a_capture_of_deep_paths_is_refused_at_the_tree_bound() {
    let mut b = tar::Builder::new(Vec::new());
    for k in 0..300 {
        let path = format!("{k:03}/") + &"a/".repeat(2044) + "f";
        assert!(path.len() <= MAX_PATH_BYTES);
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        b.append_data(&mut h, &path, &b"x"[..]).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.tar");
    fs::write(&path, b.into_inner().unwrap()).unwrap();
    let e = chain(&read_tarball(&path).map(|_| ()).unwrap_err());
    assert!(
        e.contains(&format!(
            "would hold more than {MAX_TREE_BYTES} bytes of paths, names and files"
        )),
        "{e}"
    );
    assert!(e.contains("entry `0"), "names the entry: {e}");
    assert!(e.len() < 600, "the error shows a shortened path: {e}");
}

#[test]
fn errors_about_a_missing_source_are_not_a_regular_file_error() {
    let e = TopologySource::from_arg(Some(Path::new("/nonexistent/x.json"))).unwrap_err();
    assert!(matches!(e, DiscoveryError::MissingSource { .. }));
}

#[test]
fn a_bomb_in_place_of_a_file_in_a_capture_is_a_warning_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = tree(dir.path());
    // 8 MB of a valid-looking list compresses to a few KB; discovery must refuse it by name
    // rather than read it, or leave node 1 without CPUs.
    fs::write(root.join("sys/devices/system/node/node1/cpulist"), "2-3,".repeat(2 << 20)).unwrap();
    let path = dir.path().join("bomb.tar.gz");
    fs::write(&path, gz(&tar_of_tree(&root))).unwrap();
    assert!(fs::metadata(&path).unwrap().len() < 200_000);
    let t = read_tarball(&path).unwrap();
    let w = warning_about(&t, "node1/cpulist");
    assert!(w.contains("larger than 65536 bytes"), "{w}");
    assert!(t.node(1).unwrap().cpus.is_empty(), "the bomb is not read");
}
