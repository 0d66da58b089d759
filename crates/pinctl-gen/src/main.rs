//! `pinctl-gen DIR`: writes pinctl's man pages to DIR/doc/man, its shell completions to
//! DIR/completions and the JSON Schemas of its `--json` outputs to DIR/docs/schema. Run from
//! the repository root as `cargo run -p pinctl-gen -- .` after changing the command line, and
//! commit the result.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!(
            "usage: pinctl-gen DIR   (writes DIR/doc/man/*.1, DIR/completions/* and \
             DIR/docs/schema/*.schema.json)"
        );
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
