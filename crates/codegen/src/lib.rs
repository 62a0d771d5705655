//! Generator for `ferry-amqp010`'s `generated.rs`: reads the AMQP 0-10 spec XML and writes
//! the domain enums, structs, controls and commands with their encoders and decoders.

mod emit;
mod model;
mod names;
mod resolve;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("spec: {0}")]
    Spec(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("rustfmt: {0}")]
    Rustfmt(String),
}

/// The workspace root, from this crate's location in it.
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The spec's file name in the specs directory.
pub const SPEC_FILE: &str = "amqp-0-10-qpid-errata.stripped.xml";
pub const DEFAULT_OUT: &str = "crates/amqp010/src/generated.rs";

/// Where the AMQP specifications are: `$FERRY_SPECS_DIR`, else `shared/specs` beside the
/// workspace (they are reference data kept outside the project).
pub fn specs_dir() -> PathBuf {
    match std::env::var_os("FERRY_SPECS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join("../shared/specs"),
    }
}

/// Whether a test that needs the specs must fail without them rather than skip:
/// `scripts/test.sh` sets `FERRY_REQUIRE_SPECS`, so the full suite never passes with those
/// checks silently skipped.
pub fn specs_required() -> bool {
    std::env::var_os("FERRY_REQUIRE_SPECS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Unformatted Rust source for the spec text `xml`; `source_name` is named in the header.
pub fn generate(xml: &str, source_name: &str) -> Result<String, Error> {
    let spec = model::parse(xml)?;
    emit::Emitter::new(&spec)?.run(source_name)
}

/// Runs rustfmt over `source` from `dir`, so the same `rustfmt.toml` applies as for
/// `cargo fmt` on a file in that directory.
pub fn rustfmt(source: &str, dir: &Path) -> Result<String, Error> {
    let rustfmt = std::env::var_os("RUSTFMT").unwrap_or_else(|| "rustfmt".into());
    let mut child = Command::new(rustfmt)
        .args(["--edition", "2021", "--emit", "stdout"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Rustfmt(e.to_string()))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| Error::Rustfmt("no stdin".into()))?;
    // Write from another thread: rustfmt may fill its stdout pipe before reading all input.
    let input = source.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child
        .wait_with_output()
        .map_err(|e| Error::Rustfmt(e.to_string()))?;
    writer
        .join()
        .map_err(|_| Error::Rustfmt("writer thread panicked".into()))?
        .map_err(|e| Error::Rustfmt(e.to_string()))?;
    if !output.status.success() {
        return Err(Error::Rustfmt(
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ));
    }
    String::from_utf8(output.stdout).map_err(|e| Error::Rustfmt(e.to_string()))
}

/// Reads `spec_path` and returns the formatted source destined for `out_path`.
pub fn generate_file(spec_path: &Path, out_path: &Path) -> Result<String, Error> {
    let xml = std::fs::read_to_string(spec_path).map_err(|source| Error::Io {
        path: spec_path.to_path_buf(),
        source,
    })?;
    let name = spec_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let raw = generate(&xml, &name)?;
    let dir = out_path
        .parent()
        .filter(|p| p.is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_else(workspace_root);
    rustfmt(&raw, &dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"<amqp major="0" minor="10" port="5672">
      <type name="uint8" code="0x02" fixed-width="1"/>
      <type name="uint16" code="0x12" fixed-width="2"/>
      <type name="str8" code="0x85" variable-width="1"/>
      <type name="bit" code="0xf1" fixed-width="0"/>
      <class name="demo" code="0x9">
        <domain name="mode" type="uint8"><enum>
          <choice name="on" value="1"/><choice name="off" value="2"/>
        </enum></domain>
        <domain name="label" type="str8"/>
        <struct name="thing" size="2" pack="1" code="0x3">
          <field name="flag" type="bit"/>
          <field name="name" type="label"/>
        </struct>
        <command name="poke" code="0x4">
          <field name="mode" type="mode"/>
          <field name="thing" type="thing"/>
          <result type="thing"/>
        </command>
      </class>
    </amqp>"#;

    #[test]
    fn resolves_domains_structs_and_ops() {
        let src = generate(MINI, "mini.xml").unwrap();
        assert!(src.contains("pub enum Mode"), "{src}");
        assert!(src.contains("On = 1"));
        assert!(src.contains("pub struct Thing"));
        assert!(src.contains("pub name: Option<Str>"));
        assert!(src.contains("pub flag: bool"));
        assert!(src.contains("pub struct DemoPoke"));
        assert!(src.contains("pub thing: Option<Thing>"));
        assert!(src.contains("pub mode: Option<Mode>"));
        assert!(src.contains("codec::put_sized(out, 2,"));
        assert!(src.contains("(0x09, 0x04) => Self::DemoPoke"));
        assert!(src.contains("matches!(self, Self::DemoPoke(_))"));
    }

    #[test]
    fn unknown_field_type_is_an_error() {
        let bad = MINI.replace("type=\"label\"", "type=\"nonesuch\"");
        assert!(matches!(generate(&bad, "x"), Err(Error::Spec(_))));
    }

    #[test]
    fn too_many_fields_for_pack_width_is_an_error() {
        let fields: String = (0..9)
            .map(|i| format!("<field name=\"f{i}\" type=\"bit\"/>"))
            .collect();
        let bad = MINI.replace("<field name=\"flag\" type=\"bit\"/>", &fields);
        assert!(matches!(generate(&bad, "x"), Err(Error::Spec(_))));
    }

    /// The committed `generated.rs` must be exactly what the generator makes of the spec.
    #[test]
    fn committed_output_is_current() {
        let root = workspace_root();
        let spec = specs_dir().join(SPEC_FILE);
        if !spec.exists() {
            assert!(
                !specs_required(),
                "{} not found: set FERRY_SPECS_DIR to the AMQP specs directory",
                spec.display()
            );
            println!("skipped: spec not found at {}", spec.display());
            return;
        }
        let out = root.join(DEFAULT_OUT);
        let fresh = generate_file(&spec, &out).unwrap();
        let committed = std::fs::read_to_string(&out).unwrap_or_default();
        assert!(
            fresh == committed,
            "{} is stale: run `cargo run -p ferry-codegen`",
            out.display()
        );
    }
}
