//! `ferry-codegen [spec.xml] [out.rs]`: regenerates `ferry-amqp010`'s protocol tables.
//! The spec defaults to `$FERRY_SPECS_DIR` or `../shared/specs` beside the workspace, the
//! output to its place in the workspace; explicit paths are relative to the current directory.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() > 2 || args.iter().any(|a| a == "-h" || a == "--help") {
        eprintln!("usage: ferry-codegen [spec.xml] [out.rs]");
        return ExitCode::FAILURE;
    }
    let root = ferry_codegen::workspace_root();
    let spec = args
        .first()
        .map(PathBuf::from)
        .unwrap_or_else(|| ferry_codegen::specs_dir().join(ferry_codegen::SPEC_FILE));
    let out = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(ferry_codegen::DEFAULT_OUT));
    let result = ferry_codegen::generate_file(&spec, &out).and_then(|source| {
        std::fs::write(&out, source).map_err(|source| ferry_codegen::Error::Io {
            path: out.clone(),
            source,
        })
    });
    match result {
        Ok(()) => {
            println!("wrote {}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ferry-codegen: {e}");
            ExitCode::FAILURE
        }
    }
}
