//! `pinctl-gen DIR`: writes pinctl's man pages to DIR/doc/man and its shell completions to
//! DIR/completions. Run from the repository root as `cargo run -p pinctl-gen -- .` after
//! changing the command line, and commit the result.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: pinctl-gen DIR   (writes DIR/doc/man/*.1 and DIR/completions/*)");
        return ExitCode::from(2);
    };
    let root = PathBuf::from(dir);
    match pinctl_gen::generate().and_then(|files| {
        pinctl_gen::write(&root, &files)?;
        Ok(files)
    }) {
        Ok(files) => {
            for f in files {
                println!("{}", root.join(f.path).display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pinctl-gen: error: cannot write under `{}`: {e}", root.display());
            ExitCode::FAILURE
        }
    }
}
