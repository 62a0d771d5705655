//! The management API over HTTP: requests with Basic credentials, RabbitMQ's error bodies
//! turned into messages, replies as JSON.

use std::time::Duration;

use base64::Engine;
use serde_json::Value;

/// What a management request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("cannot reach the management API at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{method} {path} failed: HTTP {status}: {reason}")]
    Http {
        method: &'static str,
        path: String,
        status: u16,
        reason: String,
    },
    #[error("{path}: the reply is not JSON: {reason}")]
    BadReply { path: String, reason: String },
    #[error("{0}")]
    Invalid(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// Largest reply read (a definitions export of a large broker).
const REPLY_LIMIT: u64 = 256 * 1024 * 1024;

pub struct Client {
    base: String,
    auth: String,
    agent: ureq::Agent,
}

/// Percent-encodes a path segment, as the API's names (vhost "/" included) need.
pub fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Client {
    pub fn new(host: &str, port: u16, user: &str, password: &str) -> Client {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        let agent = ureq::Agent::config_builder()
            // Error statuses are replies too: their bodies say why.
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Client {
            base: format!("http://{host}:{port}"),
            auth: format!("Basic {token}"),
            agent,
        }
    }

    pub fn get(&self, path: &str) -> Result<Value, CtlError> {
        let reply = self.send("GET", path, None, &[])?;
        parse(path, &reply)
    }

    pub fn put(&self, path: &str, body: &Value) -> Result<String, CtlError> {
        self.send("PUT", path, Some(body.to_string()), &[])
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<String, CtlError> {
        self.send("POST", path, Some(body.to_string()), &[])
    }

    pub fn post_raw(&self, path: &str, body: String) -> Result<String, CtlError> {
        self.send("POST", path, Some(body), &[])
    }

    pub fn delete(&self, path: &str, headers: &[(&str, &str)]) -> Result<String, CtlError> {
        self.send("DELETE", path, None, headers)
    }

    fn send(
        &self,
        method: &'static str,
        path: &str,
        body: Option<String>,
        headers: &[(&str, &str)],
    ) -> Result<String, CtlError> {
        let url = format!("{}{path}", self.base);
        let unreachable = |e: ureq::Error| CtlError::Unreachable {
            url: self.base.clone(),
            reason: e.to_string(),
        };
        let mut response = match (method, body) {
            ("GET", _) => self.with(self.agent.get(&url), headers).call(),
            ("DELETE", _) => self.with(self.agent.delete(&url), headers).call(),
            ("PUT", body) => self
                .with(self.agent.put(&url), headers)
                .header("Content-Type", "application/json")
                .send(body.unwrap_or_default()),
            (_, body) => self
                .with(self.agent.post(&url), headers)
                .header("Content-Type", "application/json")
                .send(body.unwrap_or_default()),
        }
        .map_err(unreachable)?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(REPLY_LIMIT)
            .read_to_string()
            .map_err(unreachable)?;
        if (200..300).contains(&status) {
            return Ok(text);
        }
        let reason = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["reason"].as_str().map(str::to_owned))
            .unwrap_or_else(|| text.trim().to_owned());
        Err(CtlError::Http {
            method,
            path: path.to_owned(),
            status,
            reason,
        })
    }

    fn with<B>(
        &self,
        mut req: ureq::RequestBuilder<B>,
        headers: &[(&str, &str)],
    ) -> ureq::RequestBuilder<B> {
        req = req.header("Authorization", &self.auth);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req
    }
}

fn parse(path: &str, text: &str) -> Result<Value, CtlError> {
    serde_json::from_str(text).map_err(|e| CtlError::BadReply {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(seg("/"), "%2F");
        assert_eq!(seg("a b->c"), "a%20b-%3Ec");
        assert_eq!(seg("plain.name_1~"), "plain.name_1~");
    }

    #[test]
    fn a_refused_connection_is_unreachable() {
        let c = Client::new("127.0.0.1", 1, "guest", "guest");
        assert!(matches!(
            c.get("/api/overview"),
            Err(CtlError::Unreachable { .. })
        ));
    }
}
