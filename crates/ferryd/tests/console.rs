//! The web console's files, served by a real ferryd with `--auth yes`: the index at `/` and
//! every asset it loads (following the JavaScript modules' imports) come without login,
//! with their content types and cache headers; the API beside them still wants a login.

mod common;

use std::collections::BTreeSet;

use common::http::{Http, Reply};
use common::Ferryd;

/// `--auth yes` without a users file: only guest/guest, from loopback.
fn secured() -> Ferryd {
    let absent =
        std::env::temp_dir().join(format!("ferryd-console-{}-no-users", std::process::id()));
    let absent = absent.display().to_string();
    Ferryd::start_mgmt(&["--auth", "yes", "--users-file", &absent])
}

fn header<'a>(r: &'a Reply, name: &str) -> &'a str {
    r.header(name)
        .unwrap_or_else(|| panic!("no {name} header in {:?}", r.headers))
}

/// The `console/...` paths a page or stylesheet names in quotes.
fn asset_paths(text: &str) -> Vec<String> {
    text.split('"')
        .filter(|s| s.starts_with("console/"))
        .map(str::to_owned)
        .collect()
}

/// Relative module paths imported by a JavaScript module (`from './x.js'`).
fn imports(js: &str) -> Vec<String> {
    js.split("from '")
        .skip(1)
        .filter_map(|rest| rest.split_once('\''))
        .map(|(path, _)| path.to_owned())
        .filter(|p| p.starts_with("./") || p.starts_with("../"))
        .collect()
}

/// `base` is a file's URL path; `rel` a path relative to its directory.
fn resolve(base: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = base.split('/').collect();
    parts.pop();
    for seg in rel.split('/') {
        match seg {
            "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts.join("/")
}

#[test]
fn the_console_is_public_and_its_files_are_typed_and_cached() {
    let b = secured();
    let anon = Http::anonymous(b.mgmt_addr.unwrap());

    let index = anon.get("/").expect(200);
    assert_eq!(header(&index, "content-type"), "text/html; charset=utf-8");
    assert_eq!(header(&index, "cache-control"), "no-cache");
    assert_eq!(header(&index, "x-content-type-options"), "nosniff");
    assert_eq!(header(&index, "x-frame-options"), "DENY");
    let csp = header(&index, "content-security-policy");
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    let etag = header(&index, "etag").to_owned();
    let html = index.text();
    assert!(html.contains("<script type=\"module\""), "{html}");

    // Every file the index names, and every module those import, is served without login.
    let mut todo: Vec<String> = asset_paths(&html);
    assert!(todo.len() >= 3, "icon, stylesheet and script in {html}");
    let build = todo[0].split('/').nth(1).unwrap().to_owned();
    assert!(build.len() == 12 && build.bytes().all(|c| c.is_ascii_hexdigit()));
    let mut seen = BTreeSet::new();
    while let Some(path) = todo.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let r = anon.get(&format!("/{path}")).expect(200);
        assert_eq!(
            header(&r, "cache-control"),
            "public, max-age=31536000, immutable",
            "{path}"
        );
        assert_eq!(header(&r, "x-content-type-options"), "nosniff");
        let want = match path.rsplit('.').next().unwrap() {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "svg" => "image/svg+xml",
            other => panic!("unexpected asset type {other}: {path}"),
        };
        assert_eq!(header(&r, "content-type"), want, "{path}");
        assert!(!r.body.is_empty(), "{path} is empty");
        if path.ends_with(".js") {
            for rel in imports(&r.text()) {
                todo.push(resolve(&path, &rel));
            }
        }
    }
    assert!(
        seen.iter().filter(|p| p.ends_with(".js")).count() >= 10,
        "the modules are followed: {seen:?}"
    );
    assert!(seen.iter().any(|p| p.ends_with("/js/pages/queue.js")));

    // A browser that has it asks again with the ETag and gets 304 without a body.
    let again = anon.request("GET", "/", &[("If-None-Match", &etag)], b"");
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(header(&again, "etag"), etag);
    let head = anon.request("HEAD", "/", &[], b"");
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());

    // Without the build id a file is revalidated instead; unknown paths are 404s.
    let css = anon.get("/console/console.css").expect(200);
    assert_eq!(header(&css, "cache-control"), "no-cache");
    anon.get("/console/000000000000/console.css").expect(404);
    anon.get("/console/index.html").expect(404);
    anon.get("/console/../Cargo.toml").expect(404);
    anon.get("/console/js/nothing.js").expect(404);
    anon.get(&format!("/console/{build}/js/../../../Cargo.toml"))
        .expect(404);

    // The files are the same for everyone: nothing in them depends on who asks.
    let logged_in = Http::new(b.mgmt_addr.unwrap()).get("/").expect(200);
    assert_eq!(logged_in.body, html.as_bytes());
}

#[test]
fn the_api_beside_the_console_still_wants_a_login() {
    let b = secured();
    let addr = b.mgmt_addr.unwrap();
    let anon = Http::anonymous(addr);
    for path in ["/api/overview", "/api/queues", "/api/whoami", "/metrics"] {
        let r = anon.get(path);
        assert_eq!(r.status, 401, "{path}");
        assert!(header(&r, "www-authenticate").starts_with("Basic"));
    }
    // The console's own requests say they are scripted: no WWW-Authenticate, so the
    // browser keeps its password prompt away from the console's login form.
    let scripted = anon.request(
        "GET",
        "/api/overview",
        &[("X-Requested-With", "XMLHttpRequest")],
        b"",
    );
    assert_eq!(scripted.status, 401);
    assert_eq!(scripted.header("www-authenticate"), None);
    let wrong = Http::as_user(addr, "guest", "nope").request(
        "GET",
        "/api/whoami",
        &[("X-Requested-With", "XMLHttpRequest")],
        b"",
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.header("www-authenticate"), None);
    let guest = Http::new(addr).get("/api/whoami").expect(200);
    assert_eq!(guest.json()["name"], "guest");
}
