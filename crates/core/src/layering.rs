//! Keeps the layering the crate doc declares true: outside test code, every `crate::` path
//! in a top-level module must lead to a module on a lower layer. The layers are read from
//! the numbered list under `# Layers` in lib.rs's doc, so that list is the one place they
//! are declared.
//!
//! The sources are read as tokens, not parsed: comments, string and character literals are
//! skipped, and so is every item under `#[cfg(test)]` (tests may use any layer). Modules are
//! found by following `mod name;` declarations from lib.rs, so test-only files are never
//! read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Punct(char),
}

fn is_ident(t: Option<&Token>, name: &str) -> bool {
    matches!(t, Some(Token::Ident(s)) if s == name)
}

fn is_punct(t: Option<&Token>, c: char) -> bool {
    t == Some(&Token::Punct(c))
}

/// The tokens of Rust source text, without comments and literals.
fn tokens(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            // Block comments nest.
            let mut depth = 0;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&chars, i + 1);
        } else if (c == 'r' || (c == 'b' && at(i + 1) == 'r'))
            && matches!(at(i + usize::from(c == 'b') + 1), '"' | '#')
        {
            // A raw string: r"..", r#".."#, br"..".
            let mut j = i + usize::from(c == 'b') + 1;
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) != '"' {
                // `r#ident`, a raw identifier.
                out.push(Token::Ident(c.to_string()));
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#') {
                    j += hashes + 1;
                    break;
                }
                j += 1;
            }
            i = j;
        } else if c == 'b' && at(i + 1) == '"' {
            i = skip_string(&chars, i + 2);
        } else if c == '\'' || (c == 'b' && at(i + 1) == '\'') {
            // A character literal ('x', '\n', b'x') or a lifetime ('a).
            let j = i + usize::from(c == 'b') + 1;
            if at(j) == '\\' {
                let mut k = j + 2;
                while k < chars.len() && chars[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
            } else if at(j + 1) == '\'' {
                i = j + 2;
            } else {
                // A lifetime: skip the quote, the name follows as an identifier.
                i = j;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else {
            if !c.is_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// Index just past the string whose content starts at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// `tokens` without the items under `#[cfg(test)]`.
fn code_tokens(src: &str) -> Vec<Token> {
    let all = tokens(src);
    let cfg_test: Vec<Token> = tokens("#[cfg(test)]");
    let mut out = Vec::new();
    let mut i = 0;
    while i < all.len() {
        if all[i..].starts_with(&cfg_test) {
            i = skip_item(&all, i + cfg_test.len());
        } else {
            out.push(all[i].clone());
            i += 1;
        }
    }
    out
}

/// Index just past the item starting at `i` (its attributes included): a `;` or a closing
/// brace at bracket depth 0 ends it.
fn skip_item(t: &[Token], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < t.len() {
        match &t[i] {
            Token::Punct('(' | '[' | '{') => depth += 1,
            Token::Punct(')' | ']') => depth = depth.saturating_sub(1),
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            Token::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The names after `mod` in `mod name;` declarations.
fn declared_modules(t: &[Token]) -> Vec<String> {
    t.windows(3)
        .filter_map(|w| match w {
            [Token::Ident(m), Token::Ident(name), Token::Punct(';')] if m == "mod" => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect()
}

/// For each `crate::` path, the name right after `crate::` (each first name, for a
/// `crate::{..}` group).
fn crate_paths(t: &[Token]) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..t.len() {
        if !(is_ident(t.get(i), "crate") && is_punct(t.get(i + 1), ':')) {
            continue;
        }
        match t.get(i + 3) {
            Some(Token::Ident(name)) => out.push(name.clone()),
            Some(Token::Punct('{')) => {
                let mut depth = 0usize;
                let mut expect_name = true;
                for tok in &t[i + 3..] {
                    match tok {
                        Token::Punct('{') => depth += 1,
                        Token::Punct('}') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        Token::Punct(',') if depth == 1 => expect_name = true,
                        Token::Ident(name) if depth == 1 && expect_name => {
                            out.push(name.clone());
                            expect_name = false;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// What lib.rs makes of names at the crate root: the module each re-exported name comes
/// from (`pub use module::{A, B};`), or `None` for items lib.rs defines itself.
fn root_names(lib: &[Token]) -> HashMap<String, Option<String>> {
    let mut names = HashMap::new();
    for (i, tok) in lib.iter().enumerate() {
        match tok {
            Token::Ident(kw) if kw == "use" && is_ident(lib.get(i.wrapping_sub(1)), "pub") => {
                let Some(Token::Ident(module)) = lib.get(i + 1) else {
                    continue;
                };
                let end = lib[i..]
                    .iter()
                    .position(|t| *t == Token::Punct(';'))
                    .map_or(lib.len(), |p| i + p);
                // The last name of each path: the one followed by `,`, `}` or `;`.
                for w in lib[i + 2..=end.min(lib.len() - 1)].windows(2) {
                    if let [Token::Ident(name), Token::Punct(',' | '}' | ';')] = w {
                        names.insert(name.clone(), Some(module.clone()));
                    }
                }
            }
            Token::Ident(kw)
                if matches!(
                    kw.as_str(),
                    "type" | "struct" | "enum" | "fn" | "trait" | "const" | "static"
                ) =>
            {
                if let Some(Token::Ident(name)) = lib.get(i + 1) {
                    names.insert(name.clone(), None);
                }
            }
            _ => {}
        }
    }
    names
}

/// The layer of each module named in the numbered list under `# Layers` in lib.rs's doc:
/// `1. `a`, `b`: ...` puts `a` and `b` on layer 1.
fn declared_layers(lib_src: &str) -> Vec<Vec<String>> {
    let doc = lib_src
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(str::trim);
    let mut layers = Vec::new();
    let mut in_section = false;
    for line in doc {
        if let Some(heading) = line.strip_prefix('#') {
            in_section = heading.trim() == "Layers";
            continue;
        }
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        if !in_section || number.parse::<usize>().is_err() {
            continue;
        }
        let mut names = Vec::new();
        let mut rest = rest;
        while let Some(after) = rest.strip_prefix('`') {
            let Some((name, tail)) = after.split_once('`') else {
                break;
            };
            names.push(name.to_owned());
            rest = tail.strip_prefix(", ").unwrap_or("");
        }
        layers.push(names);
    }
    layers
}

/// The file of module `name` declared in a file whose modules live in `dir`, and the
/// directory of its own modules.
fn module_file(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let flat = dir.join(format!("{name}.rs"));
    let file = if flat.exists() {
        flat
    } else {
        dir.join(name).join("mod.rs")
    };
    (file, dir.join(name))
}

/// `file` and every file of the module tree below it, whose own modules live in `dir`.
fn module_files(file: PathBuf, dir: &Path, out: &mut Vec<PathBuf>) {
    let src = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    out.push(file);
    for name in declared_modules(&code_tokens(&src)) {
        let (child, child_dir) = module_file(dir, &name);
        module_files(child, &child_dir, out);
    }
}

/// The `crate::` edges between top-level modules that go against the layers; also any
/// module missing from the layer list, and any path the layers cannot place.
fn violations(src_dir: &Path) -> (Vec<String>, usize) {
    let lib_path = src_dir.join("lib.rs");
    let lib_src = std::fs::read_to_string(&lib_path).unwrap_or_else(|e| panic!("lib.rs: {e}"));
    let lib = code_tokens(&lib_src);
    let layers = declared_layers(&lib_src);
    let layer_of: HashMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(n, names)| names.iter().map(move |m| (m.as_str(), n + 1)))
        .collect();
    let roots = root_names(&lib);
    let mut problems = Vec::new();
    let top: Vec<String> = declared_modules(&lib);
    for m in &top {
        if !layer_of.contains_key(m.as_str()) {
            problems.push(format!("module {m} is on no layer of the crate doc"));
        }
    }
    for m in layers.iter().flatten() {
        if !top.contains(m) {
            problems.push(format!("the crate doc layers {m}, which is not a module"));
        }
    }
    if layer_of.len() != layers.iter().flatten().count() {
        problems.push("the crate doc puts a module on two layers".to_owned());
    }
    let mut edges = 0;
    for m in &top {
        let mut files = Vec::new();
        let (file, dir) = module_file(src_dir, m);
        module_files(file, &dir, &mut files);
        for file in files {
            let src = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
            let shown = file.strip_prefix(src_dir).unwrap_or(&file).display();
            for name in crate_paths(&code_tokens(&src)) {
                let target = if top.contains(&name) {
                    name.clone()
                } else {
                    match roots.get(&name) {
                        Some(Some(module)) => module.clone(),
                        Some(None) => continue,
                        None => {
                            problems
                                .push(format!("{shown}: crate::{name} is no module or root name"));
                            continue;
                        }
                    }
                };
                if target == *m {
                    continue;
                }
                edges += 1;
                let (from, to) = (layer_of.get(m.as_str()), layer_of.get(target.as_str()));
                if let (Some(from), Some(to)) = (from, to) {
                    if from <= to {
                        problems.push(format!(
                            "{shown}: {m} (layer {from}) uses crate::{name}, of {target} \
                             (layer {to})"
                        ));
                    }
                }
            }
        }
    }
    (problems, edges)
}

#[test]
fn imports_follow_the_layers_of_the_crate_doc() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (problems, edges) = violations(&src);
    assert!(
        problems.is_empty(),
        "imports against the layers declared in lib.rs:\n{}",
        problems.join("\n")
    );
    // A scanner that found nothing would pass vacuously.
    assert!(edges > 20, "only {edges} edges between modules found");
}

#[test]
fn only_code_outside_tests_counts() {
    let src = r###"
        // crate::a
        /* crate::b /* nested */ crate::c */
        /// crate::d
        let s = "crate::e \" crate::f"; let r = r##"crate::g "# crate::h"##; let c = '{';
        let b = b"crate::i"; let l: &'static str = "";
        #[cfg(test)]
        mod tests { use crate::j; fn f() { let x = [1; 2]; } }
        #[cfg(test)]
        use crate::k;
        use crate::{l::X, m, n::{self, Y}};
        fn f<'a>(x: &'a u8) { crate::o::p(); }
        mod q;
        #[cfg(test)]
        mod r;
    "###;
    let t = code_tokens(src);
    assert_eq!(crate_paths(&t), ["l", "m", "n", "o"]);
    assert_eq!(declared_modules(&t), ["q"]);
}

#[test]
fn layers_and_root_names_are_read_from_lib_rs() {
    let lib = "//! Doc.\n//!\n//! # Layers\n//!\n//! 1. `a`, `b`: words `c`.\n//! 2. `d`: more.\n//!\n//! # Other\n//!\n//! 3. `e`\n\npub use d::{X, y::Z as W};\npub use a::V;\npub type T = u64;\n";
    assert_eq!(declared_layers(lib), [vec!["a", "b"], vec!["d"]]);
    let roots = root_names(&code_tokens(lib));
    assert_eq!(roots.get("X"), Some(&Some("d".to_owned())));
    assert_eq!(roots.get("W"), Some(&Some("d".to_owned())));
    assert_eq!(roots.get("V"), Some(&Some("a".to_owned())));
    assert_eq!(roots.get("T"), Some(&None));
}
