//! The crate's tests of the walk, what root trusts and its locks, on real files: each builds
//! the tree it needs in a temporary folder.

use std::fs::File;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::Path;

use crate::*;

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A root with `run/db/db.pid` (folders 0755, file 0644): trusted.
fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("run/db")).unwrap();
    chmod(&d.path().join("run"), 0o755);
    chmod(&d.path().join("run/db"), 0o755);
    std::fs::write(d.path().join("run/db/db.pid"), "100\n").unwrap();
    chmod(&d.path().join("run/db/db.pid"), 0o644);
    d
}

fn read(root: &Path, path: &str) -> Result<CheckedRead, CheckedReadError> {
    read_checked(root, Path::new(path), 64)
}

#[test]
fn a_file_only_root_could_write_is_trusted() {
    let d = tree();
    let r = read(d.path(), "/run/db/db.pid").unwrap();
    assert_eq!((r.bytes.as_slice(), r.untrusted), (&b"100\n"[..], None));
    // A link root placed is followed, relative or absolute (inside the root).
    symlink("db", d.path().join("run/alias")).unwrap();
    symlink("/run/db", d.path().join("run/abs")).unwrap();
    assert_eq!(read(d.path(), "/run/alias/db.pid").unwrap().untrusted, None);
    assert_eq!(read(d.path(), "/run/abs/../db/db.pid").unwrap().untrusted, None);
    // `..` never climbs above the root.
    assert_eq!(read(d.path(), "/../../run/db/db.pid").unwrap().untrusted, None);
}

#[test]
fn writable_files_and_folders_are_untrusted() {
    let d = tree();
    chmod(&d.path().join("run/db/db.pid"), 0o666);
    let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
    assert_eq!(why, Untrusted::FileWritable { mode: 0o100666 });
    assert_eq!(why.to_string(), "writable by group or others (mode 0666)");
    chmod(&d.path().join("run/db/db.pid"), 0o644);
    // The file's own folder: writable by others, even sticky, is not safe.
    chmod(&d.path().join("run/db"), 0o1777);
    let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
    assert!(
        why.to_string().starts_with("in `/run/db`, a folder group or others may write"),
        "{why}"
    );
    // A folder above it: sticky keeps others from renaming what is not theirs...
    chmod(&d.path().join("run/db"), 0o755);
    chmod(&d.path().join("run"), 0o1777);
    assert_eq!(read(d.path(), "/run/db/db.pid").unwrap().untrusted, None);
    // ...without it, `db` could be replaced.
    chmod(&d.path().join("run"), 0o775);
    let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
    assert_eq!(why, Untrusted::FolderWritable { folder: "/run".into(), mode: 0o40775 });
}

#[test]
fn files_and_links_of_other_users_are_untrusted() {
    // Giving a file to another user takes root, as the rule is for root.
    let euid = rustix::process::geteuid().as_raw();
    assert_eq!(euid, 0, "this test gives files to uid 65534: run it as root");
    let d = tree();
    let pid = d.path().join("run/db/db.pid");
    std::os::unix::fs::lchown(&pid, Some(65534), None).unwrap();
    let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
    assert_eq!(why.to_string(), "owned by uid 65534, not root");
    std::os::unix::fs::lchown(&pid, Some(0), None).unwrap();
    std::os::unix::fs::lchown(d.path().join("run/db"), Some(65534), None).unwrap();
    let why = read(d.path(), "/run/db/db.pid").unwrap().untrusted.unwrap();
    assert_eq!(why, Untrusted::FolderOwner { folder: "/run/db".into(), uid: 65534 });
    std::os::unix::fs::lchown(d.path().join("run/db"), Some(0), None).unwrap();
    // A link someone else placed: followed, but what it leads to is not believed.
    let link = d.path().join("run/elsewhere");
    symlink("db", &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), None).unwrap();
    let why = read(d.path(), "/run/elsewhere/db.pid").unwrap().untrusted.unwrap();
    assert_eq!(why, Untrusted::Link { link: "/run/elsewhere".into(), uid: 65534 });
}

#[test]
fn links_fifos_devices_and_large_files_are_refused_without_blocking() {
    let d = tree();
    symlink("db.pid", d.path().join("run/db/last.pid")).unwrap();
    assert!(matches!(read(d.path(), "/run/db/last.pid"), Err(CheckedReadError::Link { .. })));
    // A FIFO with no writer: opened without blocking, refused.
    let fifo = d.path().join("run/db/fifo.pid");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let e = read(d.path(), "/run/db/fifo.pid").unwrap_err();
    assert_eq!(e.to_string(), format!("`/run/db/fifo.pid` is not a regular file (a FIFO)"));
    let e = read_checked(Path::new("/"), Path::new("/dev/null"), 64).unwrap_err();
    assert!(matches!(e, CheckedReadError::NotRegular { kind: "character device", .. }));
    std::fs::write(d.path().join("run/db/big.pid"), "1".repeat(65)).unwrap();
    assert!(matches!(
        read(d.path(), "/run/db/big.pid"),
        Err(CheckedReadError::TooLarge { max: 64, .. })
    ));
    assert!(matches!(read(d.path(), "/run/none/x.pid"), Err(CheckedReadError::NotFound { .. })));
    assert!(matches!(read(d.path(), "/run/db/db.pid/x"), Err(CheckedReadError::NotAFolder { .. })));
    // A loop of links ends.
    symlink("loop", d.path().join("run/loop")).unwrap();
    assert!(matches!(
        read(d.path(), "/run/loop/db.pid"),
        Err(CheckedReadError::TooManyLinks { .. })
    ));
}

#[test]
fn a_supervisor_reads_only_what_root_alone_could_write() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("state.json");
    std::fs::write(&f, "{}").unwrap();
    chmod(&f, 0o600);
    assert_eq!(read_trusted(&f, 100).unwrap().unwrap(), b"{}");
    assert!(read_trusted(&dir.path().join("missing"), 100).unwrap().is_none());
    assert!(read_trusted(&dir.path().join("no/such/folder/x"), 100).unwrap().is_none());
    chmod(&f, 0o666);
    let e = read_trusted(&f, 100).unwrap_err().to_string();
    assert!(e.ends_with("state.json`: writable by group or others (mode 0666)"), "{e}");
    chmod(&f, 0o600);
    let e = read_trusted(&f, 1).unwrap_err().to_string();
    assert!(e.ends_with("holds more than 1 bytes"), "{e}");
    symlink(&f, dir.path().join("link")).unwrap();
    let e = read_trusted(&dir.path().join("link"), 100).unwrap_err().to_string();
    assert!(e.contains("is a symbolic link"), "{e}");
    chmod(dir.path(), 0o777);
    let e = read_trusted(&f, 100).unwrap_err().to_string();
    assert!(e.contains("a folder group or others may write (mode 0777)"), "{e}");
    let e = check_folder(dir.path()).unwrap_err().to_string();
    assert!(e.ends_with("`: writable by group or others (mode 0777)"), "{e}");
    chmod(dir.path(), 0o700);
    check_folder(dir.path()).unwrap();
    // /tmp, root's and sticky, may be above a trusted folder but not hold state itself.
    assert!(check_folder(Path::new("/tmp")).unwrap_err().to_string().contains("mode 1777"));
}

#[test]
fn only_sockets_of_root_are_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pinctl.sock");
    assert!(!check_socket(&p).unwrap());
    std::fs::write(&p, "precious").unwrap();
    let e = check_socket(&p).unwrap_err().to_string();
    assert!(e.ends_with("a regular file, not a socket"), "{e}");
    std::fs::remove_file(&p).unwrap();
    let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
    assert!(check_socket(&p).unwrap());
    symlink(&p, dir.path().join("link.sock")).unwrap();
    let e = check_socket(&dir.path().join("link.sock")).unwrap_err().to_string();
    assert!(e.ends_with("a symbolic link, not a socket"), "{e}");
}

#[test]
fn a_file_set_aside_is_kept_under_a_name_that_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("db.irq.json");
    std::fs::write(&f, "first").unwrap();
    let one = set_aside(&f, "damaged").unwrap();
    std::fs::write(&f, "second").unwrap();
    let two = set_aside(&f, "damaged").unwrap();
    assert_ne!(one, two, "never over another");
    assert!(!f.exists());
    let name = one.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("db.irq.json.refused-damaged-"), "{name}");
    assert_eq!(std::fs::read_to_string(&one).unwrap(), "first");
    assert_eq!(std::fs::read_to_string(&two).unwrap(), "second");
}

#[test]
fn private_locks_live_where_nobody_else_can_open_them() {
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let locks = dir.path().join("locks");
    let a = lock_private(&locks, "db.lock", LOCK_PATIENCE).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!((mode(&locks), mode(a.path())), (0o700, 0o600));
    assert_eq!(std::fs::read_to_string(a.path()).unwrap(), format!("{}\n", std::process::id()));
    // A second taker waits, then names the holder.
    match lock_private(&locks, "db.lock", std::time::Duration::from_millis(30)) {
        Err(LockError::Held { holder, .. }) => assert_eq!(holder, Some(std::process::id())),
        other => panic!("{other:?}"),
    }
    drop(a);
    // A lock file others could read is made private before it is used.
    chmod(&locks.join("db.lock"), 0o644);
    let b = lock_private(&locks, "db.lock", LOCK_PATIENCE).unwrap();
    assert_eq!(mode(b.path()), 0o600);
    // A folder others may enter is not a lock folder: what is in it could be open already.
    chmod(&locks, 0o755);
    let e = lock_private(&locks, "other.lock", LOCK_PATIENCE).unwrap_err().to_string();
    assert!(e.contains("with mode 0755"), "{e}");
    chmod(&locks, 0o700);
    // Nor a link, in place of the folder or the file.
    symlink(&locks, dir.path().join("link")).unwrap();
    let e = lock_private(&dir.path().join("link"), "x.lock", LOCK_PATIENCE).unwrap_err();
    assert!(e.to_string().contains("is not a folder"), "{e}");
    symlink(locks.join("db.lock"), locks.join("y.lock")).unwrap();
    let e = lock_private(&locks, "y.lock", LOCK_PATIENCE).unwrap_err();
    assert!(e.to_string().contains("is a symbolic link"), "{e}");
    // In a folder others may write, nothing is locked.
    chmod(dir.path(), 0o777);
    let e = lock_private(&locks, "db2.lock", LOCK_PATIENCE).unwrap_err();
    assert!(e.to_string().contains("writable by group or others"), "{e}");
    chmod(dir.path(), 0o700);
}

#[test]
fn a_lock_held_elsewhere_is_waited_for_then_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.lock");
    let a = File::create(&path).unwrap();
    let b = File::open(&path).unwrap();
    assert!(lock_exclusive(&a, LOCK_PATIENCE).unwrap());
    assert!(!lock_exclusive(&b, std::time::Duration::from_millis(30)).unwrap());
    drop(a);
    assert!(lock_exclusive(&b, std::time::Duration::ZERO).unwrap());
}
