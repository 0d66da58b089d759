//! Discovery that degrades instead of failing (issue 10, section 2): every file discovery reads
//! in the bundled trees and the captured machines of ../shared/fixtures/topologies, replaced by
//! an empty file, by text garbage, by bytes that are not text, or removed, one at a time. None
//! of these may panic; discovery answers unless no usable node is left; every node and device
//! that does not depend on the file keeps its CPUs, memory and node; and a file that is not
//! text is always a warning naming it.
//!
//! The trees are read once into memory ([`MemDir`], from the folder or straight from the
//! tarball); a case reads the tree through a view with one file changed ([`Mutated`]), so
//! thousands of cases cost no disk writes and no tree is left changed when a case fails. Which
//! files discovery reads is recorded by the view the baseline is read through.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read};

use pinctl_sysfs::fsroot::{FsRoot as Root, Tree, basename, join, normalize, parent};
use pinctl_sysfs::{DiscoveryError, read_topology, read_tree};
use pinctl_topology::{Locality, Topology};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const BUNDLED: &[&str] = &["stacked-2n", "no-numa", "empty-cpu0-online-17n"];
const CAPTURED: &[&str] = &[
    "G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax",
    "G02-hwloc-kunpeng920-2s-4n",
    "G03-hwloc-power7-8n-sparse",
    "G04-hwloc-cascadelake-snc2-2lm",
    "G05-hwloc-memory-only-and-cpu-only-nodes",
    "G06-hwloc-offline-cpu0-and-node0",
    "G07-hwloc-opteron-8n-cgroup-v1-cpuset",
    "G08-utillinux-epyc7451-2s-8n",
    "G11-libnvme-power-nvme-multipath",
];

/// A folder's files, folders and symbolic links in memory. pinctl-capture's own in-memory tree
/// is private to it (tarballs are its only input), so the test keeps a small one.
#[derive(Debug, Default)]
struct MemDir {
    entries: std::collections::HashMap<String, Entry>,
    /// The folder that holds `sys/` (absolute link targets start there).
    root: String,
    /// Every file read through [`Tree::read`] that exists, when recording.
    reads: Option<RefCell<Vec<String>>>,
}

#[derive(Debug)]
enum Entry {
    File(Vec<u8>),
    Link(String),
    Dir(Vec<String>),
}

impl MemDir {
    fn load(root: &Path) -> MemDir {
        let mut tree = MemDir::default();
        tree.add(root, "");
        tree
    }

    /// A (gzip, bzip2 or xz compressed) tarball; its root is the shallowest folder with `sys/`.
    fn from_tarball(path: &Path) -> MemDir {
        let mut reader = BufReader::new(fs::File::open(path).unwrap());
        let head = reader.fill_buf().unwrap().to_vec();
        let mut raw = Vec::new();
        if head.starts_with(&[0x1f, 0x8b]) {
            flate2::read::MultiGzDecoder::new(reader).read_to_end(&mut raw).unwrap();
        } else if head.starts_with(b"BZh") {
            bzip2::read::MultiBzDecoder::new(reader).read_to_end(&mut raw).unwrap();
        } else {
            lzma_rs::xz_decompress(&mut reader, &mut raw).unwrap();
        }
        let mut tree = MemDir::default();
        let mut hard = Vec::new();
        for entry in tar::Archive::new(&raw[..]).entries().unwrap() {
            let mut entry = entry.unwrap();
            let rel = normalize(&entry.path().unwrap().to_string_lossy());
            let link = entry.link_name().unwrap().map(|l| l.to_string_lossy().into_owned());
            let item = match entry.header().entry_type() {
                tar::EntryType::Regular => {
                    let mut data = Vec::new();
                    entry.read_to_end(&mut data).unwrap();
                    Entry::File(data)
                }
                tar::EntryType::Symlink => Entry::Link(link.unwrap()),
                tar::EntryType::Link => {
                    hard.push((rel, normalize(&link.unwrap())));
                    continue;
                }
                tar::EntryType::Directory => Entry::Dir(Vec::new()),
                _ => continue,
            };
            tree.insert(rel, item);
        }
        for (rel, target) in hard {
            if let Some(Entry::File(data)) = tree.entries.get(&target) {
                let data = data.clone();
                tree.insert(rel, Entry::File(data));
            }
        }
        let mut roots: Vec<&String> = tree
            .entries
            .keys()
            .filter(|k| basename(k) == "sys" && matches!(tree.entries[*k], Entry::Dir(_)))
            .collect();
        roots.sort_by_key(|k| (k.len(), k.to_string()));
        tree.root = parent(roots.first().expect("a folder with sys/")).to_string();
        tree
    }

    /// Adds an entry and its name to every folder above it.
    fn insert(&mut self, rel: String, item: Entry) {
        if rel.is_empty() {
            return;
        }
        let mut child = rel.clone();
        loop {
            let dir = parent(&child).to_string();
            let names = self.entries.entry(dir.clone()).or_insert_with(|| Entry::Dir(Vec::new()));
            if let Entry::Dir(names) = names {
                let name = basename(&child).to_string();
                if names.contains(&name) {
                    break;
                }
                names.push(name);
            }
            if dir.is_empty() {
                break;
            }
            child = dir;
        }
        match (self.entries.get(&rel), &item) {
            (Some(Entry::Dir(_)), Entry::Dir(_)) => {}
            _ => {
                self.entries.insert(rel, item);
            }
        }
    }

    fn add(&mut self, dir: &Path, rel: &str) {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let (path, child) = (entry.path(), join(rel, &name));
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                let target = fs::read_link(&path).unwrap().to_string_lossy().into_owned();
                self.entries.insert(child, Entry::Link(target));
            } else if kind.is_dir() {
                self.add(&path, &child);
            } else if kind.is_file() {
                self.entries.insert(child, Entry::File(fs::read(&path).unwrap()));
            }
            names.push(name);
        }
        self.entries.insert(rel.to_string(), Entry::Dir(names));
    }

    /// Where `rel` leads, following links inside the tree (absolute targets from its top).
    fn resolve(&self, rel: &str, follow_last: bool) -> Option<String> {
        let mut pending: Vec<String> =
            rel.split('/').filter(|c| !c.is_empty()).rev().map(str::to_string).collect();
        let mut current = String::new();
        let mut hops = 0;
        while let Some(comp) = pending.pop() {
            match comp.as_str() {
                "." => continue,
                ".." => {
                    current = parent(&current).to_string();
                    continue;
                }
                _ => {}
            }
            let next = join(&current, &comp);
            match self.entries.get(&next)? {
                Entry::Link(target) if !pending.is_empty() || follow_last => {
                    hops += 1;
                    if hops > 40 {
                        return None;
                    }
                    if target.starts_with('/') {
                        current = self.root.clone();
                    }
                    pending.extend(
                        target.split('/').filter(|c| !c.is_empty()).rev().map(str::to_string),
                    );
                }
                _ => current = next,
            }
        }
        Some(current)
    }
}

impl Tree for MemDir {
    fn read(&self, path: &str) -> Option<&[u8]> {
        match self.entries.get(&self.resolve(path, true)?)? {
            Entry::File(b) => {
                if let Some(reads) = &self.reads {
                    reads.borrow_mut().push(path.to_string());
                }
                Some(b)
            }
            _ => None,
        }
    }
    fn list(&self, path: &str) -> Option<Vec<String>> {
        match self.entries.get(&self.resolve(path, true)?)? {
            Entry::Dir(names) => Some(names.clone()),
            _ => None,
        }
    }
    fn read_link(&self, path: &str) -> Option<Option<&str>> {
        match self.entries.get(&self.resolve(path, false)?)? {
            Entry::Link(t) => Some(Some(t)),
            _ => Some(None),
        }
    }
    fn is_dir(&self, path: &str) -> bool {
        self.resolve(path, true)
            .is_some_and(|p| matches!(self.entries.get(&p), Some(Entry::Dir(_))))
    }
}

/// A [`MemDir`] with the file at `target` (a resolved path) changed by `mutation`.
#[derive(Debug)]
struct Mutated<'a> {
    base: &'a MemDir,
    target: String,
    mutation: Mutation,
}

impl Tree for Mutated<'_> {
    fn read(&self, path: &str) -> Option<&[u8]> {
        if self.base.resolve(path, true).as_deref() != Some(&self.target) {
            return self.base.read(path);
        }
        match self.mutation {
            Mutation::Empty => Some(b""),
            Mutation::TextGarbage => Some(b"no-such-value ::: 0x-1 \xce\xbb\n\n"),
            Mutation::Binary => Some(b"\xff\xfe\x00\x1b[31m\x80garbage\xc3"),
            Mutation::Removed => None,
        }
    }
    fn list(&self, path: &str) -> Option<Vec<String>> {
        let mut names = self.base.list(path)?;
        if self.mutation == Mutation::Removed
            && self.base.resolve(path, true).as_deref() == Some(parent(&self.target))
        {
            names.retain(|n| n != basename(&self.target));
        }
        Some(names)
    }
    fn read_link(&self, path: &str) -> Option<Option<&str>> {
        let gone = self.mutation == Mutation::Removed
            && self.base.resolve(path, false).as_deref() == Some(&self.target);
        if gone { None } else { self.base.read_link(path) }
    }
    fn is_dir(&self, path: &str) -> bool {
        self.base.is_dir(path)
    }
}

/// One tree, unpacked or copied to a folder of its own, with what discovery makes of it whole.
struct Fixture {
    name: String,
    tree: MemDir,
    baseline: Topology,
    /// Every regular file the baseline discovery read, relative to the root.
    files: Vec<String>,
    /// The folder under `sys/devices` of each device whose class entry leads to one.
    device_dirs: BTreeMap<String, String>,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tarball(id: &str) -> PathBuf {
    let raw = repo().join("../shared/fixtures/topologies").join(id).join("raw");
    let found: Vec<PathBuf> = fs::read_dir(&raw)
        .unwrap_or_else(|e| panic!("{}: {e} (the shared fixtures are required)", raw.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".tar"))
        .collect();
    assert_eq!(found.len(), 1, "one tarball in {}", raw.display());
    found[0].clone()
}

/// The root folder of `tree` as discovery sees it (paths relative to it), for `FsRoot`.
fn view<'t>(tree: &'t dyn Tree, top: &str, name: &str) -> Root<'t> {
    Root::in_memory(tree, top, Path::new(name))
}

fn fixture(name: &str, mut tree: MemDir) -> Fixture {
    tree.reads = Some(RefCell::new(Vec::new()));
    let top = tree.root.clone();
    let baseline =
        read_tree(&mut view(&tree, &top, name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut files: Vec<String> = tree.reads.take().unwrap().into_inner();
    // Paths as discovery names them: relative to the root folder.
    for f in &mut files {
        if !top.is_empty() {
            *f = f[top.len() + 1..].to_string();
        }
    }
    files.sort();
    files.dedup();
    let mut device_dirs = BTreeMap::new();
    let mut fs_root = view(&tree, &top, name);
    for d in &baseline.devices {
        for class in [
            "sys/class/block",
            "sys/block",
            "sys/class/net",
            "sys/class/infiniband",
            "sys/class/drm",
            "sys/bus/dax/devices",
        ] {
            if let Ok(Some(dir)) = fs_root.link(&format!("{class}/{}", d.name)) {
                device_dirs.insert(d.name.clone(), dir);
                break;
            }
        }
    }
    Fixture { name: name.to_string(), tree, baseline, files, device_dirs }
}

fn bundled() -> Vec<Fixture> {
    let start = Instant::now();
    let out = BUNDLED
        .iter()
        .map(|name| fixture(name, MemDir::load(&repo().join("tests/fixtures/sysfs").join(name))))
        .collect();
    eprintln!("bundled trees loaded in {:?}", start.elapsed());
    out
}

fn captured() -> Vec<Fixture> {
    let start = Instant::now();
    let out = CAPTURED.iter().map(|id| fixture(id, MemDir::from_tarball(&tarball(id)))).collect();
    eprintln!("captured machines read in {:?}", start.elapsed());
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mutation {
    Empty,
    /// Text no sysfs or procfs file holds.
    TextGarbage,
    /// Bytes that are not UTF-8, with control characters.
    Binary,
    Removed,
}

const MUTATIONS: [Mutation; 4] =
    [Mutation::Empty, Mutation::TextGarbage, Mutation::Binary, Mutation::Removed];

/// Which part of the machine a file speaks for.
enum Scope {
    /// A machine-wide list (online CPUs or nodes): its fallback may answer differently.
    Everything,
    /// Facts about nodes that leave their CPUs and memory alone (`has_cpu`, `possible`).
    NodeFlags,
    Node(u32),
    Cpu(u32),
    /// A process or kernel setting (`proc/self/status`): nodes and devices stay.
    Host,
    /// A file under a device folder or one of its ancestors.
    Device,
}

fn scope(rel: &str) -> Scope {
    let numbered = |s: &str, prefix: &str| -> Option<u32> {
        let first = s.split('/').next()?;
        first.strip_prefix(prefix)?.parse().ok()
    };
    if let Some(rest) = rel.strip_prefix("sys/devices/system/node/") {
        return match rest {
            "online" => Scope::Everything,
            r => numbered(r, "node").map_or(Scope::NodeFlags, Scope::Node),
        };
    }
    if let Some(rest) = rel.strip_prefix("sys/devices/system/cpu/") {
        return match numbered(rest, "cpu") {
            Some(id) => Scope::Cpu(id),
            None => Scope::Everything,
        };
    }
    match rel {
        // The memory of the one node of a kernel without NUMA.
        "proc/meminfo" => Scope::Everything,
        r if r.starts_with("proc/") || r.starts_with("sys/fs/cgroup") => Scope::Host,
        _ => Scope::Device,
    }
}

/// Checks one mutated discovery against the fixture's baseline; `Err` says what broke.
fn check(
    fx: &Fixture,
    rel: &str,
    m: Mutation,
    got: Result<Topology, DiscoveryError>,
) -> Result<(), String> {
    let t = match got {
        Ok(t) => t,
        Err(DiscoveryError::NoUsableNode { .. }) if matches!(scope(rel), Scope::Everything) => {
            return Ok(());
        }
        Err(e) => return Err(format!("discovery failed: {e}")),
    };
    if m == Mutation::Binary && !t.discovery_warnings.iter().any(|w| w.file == rel) {
        return Err(format!("no warning names the file: {:?}", t.discovery_warnings));
    }
    let known = &fx.baseline.discovery_warnings;
    if t.discovery_warnings.iter().any(|w| w.file != rel && !known.contains(w)) {
        return Err(format!("a warning about another file: {:?}", t.discovery_warnings));
    }
    let scope = scope(rel);
    let node_may_change = |id: u32| match scope {
        Scope::Everything => true,
        Scope::Node(n) => n == id,
        _ => false,
    };
    for b in &fx.baseline.nodes {
        if node_may_change(b.id) {
            continue;
        }
        let Some(n) = t.node(b.id) else { return Err(format!("node {} is gone", b.id)) };
        let cpus_differ = match scope {
            // A CPU's own `online` may change whether that CPU counts, and nothing else.
            Scope::Cpu(c) => {
                let diff = n.cpus.difference(&b.cpus).union(&b.cpus.difference(&n.cpus));
                diff.iter().any(|x| x != c)
            }
            _ => n.cpus != b.cpus,
        };
        if cpus_differ || n.memory_bytes != b.memory_bytes {
            return Err(format!("node {} changed: {b:?} became {n:?}", b.id));
        }
    }
    let file_dir = parent(rel);
    for b in &fx.baseline.devices {
        let may_change = match scope {
            Scope::Everything => true,
            Scope::Host | Scope::NodeFlags => false,
            // Only devices placed by `local_cpulist` (or through such members) read nodes' CPUs.
            Scope::Node(_) | Scope::Cpu(_) => b.locality != Locality::NumaNode,
            Scope::Device => match fx.device_dirs.get(&b.name) {
                // Derived from other devices, or not found in a class folder: not checked.
                _ if matches!(b.locality, Locality::Members | Locality::MultipathControllers) => {
                    true
                }
                None => true,
                Some(dir) => {
                    let dir = normalize(dir);
                    dir == file_dir
                        || dir.starts_with(&format!("{file_dir}/"))
                        || file_dir.starts_with(&format!("{dir}/"))
                }
            },
        };
        if may_change {
            continue;
        }
        let Some(d) = t.device(&b.name) else { return Err(format!("device {} is gone", b.name)) };
        if d.nodes != b.nodes {
            return Err(format!("device {} moved: {b:?} became {d:?}", b.name));
        }
    }
    Ok(())
}

fn run_case(fx: &Fixture, rel: &str, m: Mutation) -> Result<(), String> {
    let target = fx
        .tree
        .resolve(&join(&fx.tree.root, rel), true)
        .ok_or_else(|| format!("{}: `{rel}` is not in the tree", fx.name))?;
    let tree = Mutated { base: &fx.tree, target, mutation: m };
    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        read_tree(&mut view(&tree, &fx.tree.root, &fx.name))
    }));
    let got = got.map_err(|_| format!("{}: `{rel}` {m:?}: discovery panicked", fx.name))?;
    check(fx, rel, m, got).map_err(|e| format!("{}: `{rel}` {m:?}: {e}", fx.name))
}

/// How many cases the sampled test runs (`PINCTL_DEGRADE_CASES`), and its seed
/// (`PINCTL_DEGRADE_SEED`, 32 hexadecimal digits; printed so a failure can be replayed).
fn sampling() -> (u32, [u8; 32]) {
    let cases =
        std::env::var("PINCTL_DEGRADE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let seed_text = std::env::var("PINCTL_DEGRADE_SEED").unwrap_or_else(|_| {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        format!("{nanos:032x}")
    });
    let mut seed = [0u8; 32];
    for (i, b) in seed_text.bytes().take(32).enumerate() {
        seed[i] = b;
    }
    eprintln!("PINCTL_DEGRADE_SEED={seed_text} PINCTL_DEGRADE_CASES={cases}");
    (cases, seed)
}

#[test]
fn the_regression_fixture_reads_with_one_warning() {
    let t = read_topology(&repo().join("tests/fixtures/sysfs/empty-cpu0-online-17n")).unwrap();
    assert_eq!(t.nodes.len(), 17);
    assert_eq!(t.online_cpus().to_string(), "0-32");
    assert_eq!(t.node(0).unwrap().cpus.to_string(), "0-1");
    assert_eq!(t.node(16).unwrap().cpus.to_string(), "32");
    assert_eq!(t.device("nvme0n1").unwrap().node, Some(16));
    assert_eq!(t.discovery_warnings.len(), 1, "{:?}", t.discovery_warnings);
    let w = &t.discovery_warnings[0];
    assert_eq!(w.file, "sys/devices/system/cpu/cpu0/online");
    assert_eq!(w.problem, "is empty");
    assert!(w.assumed.contains("CPU 0 is online"), "{w}");
}

#[test]
fn every_file_of_the_bundled_trees_degrades() {
    // Small enough to try every file with every mutation.
    let mut count = 0;
    let mut failures = Vec::new();
    let fixtures = bundled();
    let start = Instant::now();
    for fx in &fixtures {
        for rel in &fx.files {
            for m in MUTATIONS {
                count += 1;
                if let Err(e) = run_case(fx, rel, m) {
                    failures.push(e);
                }
            }
        }
    }
    eprintln!("{count} cases over the bundled trees in {:?}", start.elapsed());
    assert!(count > 300, "the bundled trees read {count} cases' worth of files");
    assert!(failures.is_empty(), "{} of {count} failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn sampled_files_of_the_captured_machines_degrade() {
    let captured = captured();
    let total: usize = captured.iter().map(|f| f.files.len()).sum();
    for fx in &captured {
        eprintln!("{}: {} files read", fx.name, fx.files.len());
    }
    eprintln!("{total} files in all, {} mutations each", MUTATIONS.len());
    let (cases, seed) = sampling();
    let start = Instant::now();
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let strategy = (0..captured.len(), any::<prop::sample::Index>(), 0..MUTATIONS.len());
    runner
        .run(&strategy, |(f, file, m)| {
            let fx = &captured[f];
            let rel = &fx.files[file.index(fx.files.len())];
            run_case(fx, rel, MUTATIONS[m]).map_err(TestCaseError::fail)
        })
        .unwrap();
    eprintln!("{cases} sampled cases in {:?}", start.elapsed());
}

#[test]
fn a_file_missing_beside_others_that_have_it_is_a_warning() {
    let fixtures = bundled();
    let fx = fixtures.iter().find(|f| f.name == "stacked-2n").unwrap();
    for (rel, assumed) in [
        ("sys/devices/system/cpu/cpu3/topology/core_id", "CPU 3's core is unknown"),
        ("sys/devices/system/node/node1/meminfo", "node 1's memory is unknown"),
        ("sys/devices/system/node/node1/distance", "the distances are unknown"),
        ("sys/devices/system/node/node1/cpulist", "node 1 has no CPUs"),
    ] {
        let target = fx.tree.resolve(rel, true).unwrap();
        let tree = Mutated { base: &fx.tree, target, mutation: Mutation::Removed };
        let t = read_tree(&mut view(&tree, "", &fx.name)).unwrap();
        assert_eq!(t.discovery_warnings.len(), 1, "{rel}: {:?}", t.discovery_warnings);
        let w = &t.discovery_warnings[0];
        assert_eq!((w.file.as_str(), w.problem.as_str()), (rel, "is missing"));
        assert!(w.assumed.starts_with(assumed), "{w}");
    }
}
