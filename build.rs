//! Sets `PINCTL_VERSION` for `pinctl --version`: the crate version, plus the short commit id
//! when the source is a git checkout and git is installed (`0.1.0 (1a2b3c4)`). A build from a
//! tarball, or without git, gets the plain version and never fails for the lack of it.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let version = env!("CARGO_PKG_VERSION");
    // Only a checkout of this very package counts: a tarball unpacked inside some other
    // repository must not report that repository's commit.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let top = git(&["-C", &manifest_dir, "rev-parse", "--show-toplevel"]);
    let canonical = |p: &str| std::fs::canonicalize(p).ok();
    let ours =
        top.is_some_and(|t| canonical(&t).is_some() && canonical(&t) == canonical(&manifest_dir));
    let commit =
        if ours { git(&["-C", &manifest_dir, "rev-parse", "--short", "HEAD"]) } else { None };
    match commit {
        Some(commit) => {
            println!("cargo:rustc-env=PINCTL_VERSION={version} ({commit})");
            // Rebuild when HEAD moves: HEAD itself (a checkout), the branch it points to
            // (a commit), and packed-refs (where a branch's id may live instead). Only paths
            // that exist, since cargo reruns on every build for a missing one.
            let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
            if let Some(branch) = git(&["-C", &manifest_dir, "symbolic-ref", "-q", "HEAD"]) {
                watched.push(branch);
            }
            for name in watched {
                if let Some(path) = git(&["-C", &manifest_dir, "rev-parse", "--git-path", &name]) {
                    let path = Path::new(&manifest_dir).join(path);
                    if path.exists() {
                        println!("cargo:rerun-if-changed={}", path.display());
                    }
                }
            }
        }
        None => println!("cargo:rustc-env=PINCTL_VERSION={version}"),
    }
}
