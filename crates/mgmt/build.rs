//! Generates the web console's asset table (`$OUT_DIR/console_assets.rs`) from the files
//! under `console/`: each file's URL path, content type, ETag and bytes (by
//! `include_bytes!`), plus a build id that changes whenever any file does.
//!
//! Generated rather than written by hand so that adding a file to the console needs no
//! Rust edit, and rather than a crate (rust-embed and the like) because this is all a
//! crate would do for us here, in fifty lines, without a dependency.
//!
//! The index page is rewritten here: `@ASSETS@` becomes `console/<build id>`, so the
//! assets are fetched under a versioned path the server may let browsers cache for ever,
//! while the index itself is always revalidated.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

/// FNV-1a, 64 bits: stable across builds and platforms, enough to tell file versions apart
/// (this is a cache key, not a security measure).
fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        // RFC 9239: text/javascript is the one JavaScript type; modules need a JS type.
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        // An unknown type would be served wrong (or sniffed): refuse it at build time.
        _ => panic!(
            "console asset {} has no known content type: add it to build.rs",
            path.display()
        ),
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    // Sorted, so the table and the build id do not depend on directory order.
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("console");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=console");

    let mut files = Vec::new();
    walk(&root, &mut files);
    let mut build = FNV_START;
    let mut assets = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_str()
            .expect("UTF-8 asset paths")
            .replace('\\', "/");
        let bytes = fs::read(path).unwrap();
        fnv(&mut build, rel.as_bytes());
        fnv(&mut build, &bytes);
        // Directories are watched by mtime of their entries; list each file too so an
        // edit in place reruns the script.
        println!("cargo:rerun-if-changed={}", path.display());
        assets.push((rel, content_type(path), path.clone(), bytes));
    }
    let build_id = format!("{build:016x}")[..12].to_owned();

    let mut table = String::new();
    writeln!(table, "/// Changes whenever any console file does.").unwrap();
    writeln!(table, "pub const BUILD_ID: &str = {build_id:?};").unwrap();
    writeln!(table, "pub static ASSETS: &[Asset] = &[").unwrap();
    for (rel, ctype, path, bytes) in &assets {
        let (source, bytes) = if rel == "index.html" {
            let text = String::from_utf8(bytes.clone()).expect("index.html is UTF-8");
            let text = text.replace("@ASSETS@", &format!("console/{build_id}"));
            let generated = out_dir.join("index.html");
            fs::write(&generated, &text).unwrap();
            (generated, text.into_bytes())
        } else {
            (path.clone(), bytes.clone())
        };
        let mut h = FNV_START;
        fnv(&mut h, &bytes);
        writeln!(
            table,
            "    Asset {{ path: {rel:?}, content_type: {ctype:?}, etag: \"\\\"{h:016x}\\\"\", \
             body: include_bytes!({:?}) }},",
            source.to_str().expect("UTF-8 build paths")
        )
        .unwrap();
    }
    writeln!(table, "];").unwrap();
    fs::write(out_dir.join("console_assets.rs"), table).unwrap();
}
