//! A minimal blocking HTTP/1.1 client for the management tests: one request per
//! connection (`Connection: close`), so a test sees exactly what ferryd sent, and can send
//! what no ordinary client would.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// Asserts the status, showing the body when it differs.
    pub fn expect(self, status: u16) -> Reply {
        assert_eq!(self.status, status, "body: {}", self.text());
        self
    }
}

#[derive(Clone)]
pub struct Http {
    pub addr: SocketAddr,
    auth: Option<String>,
}

impl Http {
    /// As guest/guest.
    pub fn new(addr: SocketAddr) -> Http {
        Http::as_user(addr, "guest", "guest")
    }

    pub fn as_user(addr: SocketAddr, user: &str, password: &str) -> Http {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Http {
            addr,
            auth: Some(format!("Basic {token}")),
        }
    }

    pub fn anonymous(addr: SocketAddr) -> Http {
        Http { addr, auth: None }
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], b"")
    }

    pub fn delete(&self, path: &str) -> Reply {
        self.request("DELETE", path, &[], b"")
    }

    pub fn put(&self, path: &str, body: &Value) -> Reply {
        self.request("PUT", path, &[], body.to_string().as_bytes())
    }

    pub fn post(&self, path: &str, body: &Value) -> Reply {
        self.request("POST", path, &[], body.to_string().as_bytes())
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        let typed = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        if !body.is_empty() && !typed {
            head.push_str("Content-Type: application/json\r\n");
        }
        if let Some(auth) = &self.auth {
            head.push_str(&format!("Authorization: {auth}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut raw = head.into_bytes();
        raw.extend_from_slice(body);
        let reply = exchange(self.addr, &raw).expect("HTTP exchange");
        parse(&reply)
            .unwrap_or_else(|| panic!("not an HTTP reply: {:?}", String::from_utf8_lossy(&reply)))
    }
}

/// Sends `raw` and reads until the server closes; `None` if it could not connect.
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    s.write_all(raw).ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    Some(out)
}

/// Parses a whole response (status line, headers, body; chunked bodies joined).
pub fn parse(raw: &[u8]) -> Option<Reply> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked {
        body = dechunk(&body)?;
    }
    Some(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&raw[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(raw.get(..size)?);
        raw = raw.get(size + 2..)?;
    }
}

/// Percent-encodes a path segment (everything but RFC 3986's unreserved characters).
pub fn seg(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
