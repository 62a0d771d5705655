//! `ferry-codegen [spec.xml] [out.rs]`: regenerates `ferry-amqp010`'s protocol tables.
//! Defaults are relative to the workspace root; explicit paths to the current directory.

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
        .unwrap_or_else(|| root.join(ferry_codegen::DEFAULT_SPEC));
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
