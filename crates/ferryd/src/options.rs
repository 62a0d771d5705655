//! ferryd's command line, named after qpidd's options so the papers' command lines work.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use clap::{ArgAction, Parser};
use ferry_auth::Mechanism;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum YesNo {
    Yes,
    No,
}

impl YesNo {
    pub fn on(self) -> bool {
        self == YesNo::Yes
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "ferryd",
    version,
    about = "Ferry AMQP message broker (0-10 and 0-9-1)",
    // Config-file settings come first in the argument list; a later command-line
    // occurrence must replace them, not be an error.
    args_override_self = true
)]
pub struct Options {
    /// TCP port to listen on; 0 picks a free port and prints it on stdout.
    #[arg(long, default_value_t = 5672)]
    pub port: u16,

    /// Address to listen on (loopback until authentication is mandatory).
    #[arg(long, default_value = "127.0.0.1")]
    pub interface: IpAddr,

    /// Threads serving connections (default: one per CPU).
    #[arg(long)]
    pub worker_threads: Option<usize>,

    /// Disable Nagle's algorithm on accepted sockets (on by default: replies are already
    /// batched, so Nagle only adds latency).
    #[arg(long, value_enum, num_args = 0..=1, default_value = "yes", default_missing_value = "yes")]
    pub tcp_nodelay: YesNo,

    /// Require authentication (SASL against the users file). `no` admits everyone:
    /// ANONYMOUS, or PLAIN with any credentials.
    #[arg(long, value_enum, default_value = "yes")]
    pub auth: YesNo,

    /// The users file (`ferry user` manages it). Default: `users` beside the --config file,
    /// else $FERRY_USERS_FILE, else $XDG_CONFIG_HOME/ferry/users (~/.config/ferry/users).
    /// While it does not exist, only the built-in guest/guest may log in, from loopback.
    #[arg(long, value_name = "FILE")]
    pub users_file: Option<PathBuf>,

    /// Offer SASL ANONYMOUS even with --auth yes.
    #[arg(long, value_enum, default_value = "no")]
    pub allow_anonymous: YesNo,

    /// The SASL mechanisms AMQP clients may use, comma-separated (RabbitMQ's
    /// auth_mechanisms): of EXTERNAL, SCRAM-SHA-256, PLAIN, AMQPLAIN, ANONYMOUS. Default:
    /// all of them, each where it applies (offered strongest first whatever the order here).
    /// Leaving SCRAM-SHA-256 out makes clients that pick it whenever offered use PLAIN
    /// (needed for users with a RabbitMQ password hash). Management's HTTP Basic logins are
    /// not affected.
    // Set, not append: the command line's list replaces a config file's.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = mechanism,
        action = ArgAction::Set
    )]
    pub sasl_mechanisms: Vec<Mechanism>,

    /// TLS port (both protocols) when --ssl-cert-file is given; 0 picks a free one and prints
    /// it on stdout (after the --port 0 line, if any).
    #[arg(long, default_value_t = 5671)]
    pub ssl_port: u16,

    /// PEM certificate (and chain) for the TLS listener; enables TLS. Reloaded on SIGHUP.
    #[arg(long, value_name = "FILE", requires = "ssl_key_file")]
    pub ssl_cert_file: Option<PathBuf>,

    /// PEM private key for --ssl-cert-file. Reloaded on SIGHUP.
    #[arg(long, value_name = "FILE", requires = "ssl_cert_file")]
    pub ssl_key_file: Option<PathBuf>,

    /// PEM CA certificates that sign client certificates; clients may then log in with SASL
    /// EXTERNAL as their certificate's subject CN. Reloaded on SIGHUP.
    #[arg(long, value_name = "FILE", requires = "ssl_cert_file")]
    pub ssl_ca_file: Option<PathBuf>,

    /// Refuse TLS clients without a certificate signed by --ssl-ca-file.
    #[arg(long, value_enum, num_args = 0..=1, default_value = "no", default_missing_value = "yes")]
    pub ssl_require_client_authentication: YesNo,

    /// Accept only TLS clients: connections to the plain --port are closed at once.
    #[arg(long, value_enum, num_args = 0..=1, default_value = "no", default_missing_value = "yes",
          requires = "ssl_cert_file")]
    pub require_encryption: YesNo,

    /// Serve management: the QMF agent (qpid-config, qpid-stat) on AMQP 0-10, and
    /// RabbitMQ's HTTP API, Prometheus metrics and the web console on --mgmt-port.
    #[arg(long, value_enum, default_value = "no")]
    pub mgmt_enable: YesNo,

    /// Management HTTP port; 0 picks a free one and prints it on stdout (after the AMQP
    /// port lines, if any).
    #[arg(long, default_value_t = 15672)]
    pub mgmt_port: u16,

    /// Address the management HTTP API listens on.
    #[arg(long, default_value = "127.0.0.1")]
    pub mgmt_interface: IpAddr,

    /// Also serve Prometheus `/metrics` on this port of --mgmt-interface, without a login,
    /// as RabbitMQ's rabbitmq_prometheus listener does (15692 there); 0 picks a free port
    /// and prints it after the management port. Needs --mgmt-enable yes.
    #[arg(long, value_name = "PORT")]
    pub prometheus_port: Option<u16>,

    /// How often management samples counters for its rates and charts, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub mgmt_sample_interval: u64,

    /// Stamp each message received over AMQP 0-10 or 0-9-1 with the time of receipt
    /// (0-10 delivery-properties.timestamp, 0-9-1's timestamp property; seconds), as qpidd
    /// does; management's setTimestampConfig turns it on and off while running.
    #[arg(long, value_enum, num_args = 0..=1, default_value = "no", default_missing_value = "yes")]
    pub enable_timestamp: YesNo,

    /// Seconds a distributed transaction branch (0-10 dtx) may stay incomplete before it
    /// is rolled back, unless dtx.set-timeout says otherwise (0: no timeout).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub dtx_default_timeout: u32,

    /// The longest timeout dtx.set-timeout may set, in seconds (0: no limit).
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    pub dtx_max_timeout: u32,

    /// Most simultaneous connections; further ones are refused.
    #[arg(long, default_value_t = 500)]
    pub max_connections: usize,

    /// Largest message a client may send, in bytes.
    #[arg(long, default_value_t = 100 * 1024 * 1024)]
    pub max_message_size: usize,

    /// Log filter, qpidd-style (`info+`, `debug+`, `trace+`, `error`) or a tracing filter
    /// (`ferry_server=debug`). May be repeated.
    #[arg(long = "log-enable", action = ArgAction::Append)]
    pub log_enable: Vec<String>,

    /// Write logs to stderr.
    #[arg(long, value_enum, default_value = "yes")]
    pub log_to_stderr: YesNo,

    /// Write logs to this file (appended).
    #[arg(long)]
    pub log_to_file: Option<PathBuf>,

    /// Access control list in qpidd's format; re-read on SIGHUP (a bad file keeps the rules
    /// in force).
    #[arg(long)]
    pub acl_file: Option<PathBuf>,

    /// Most connections one authenticated user may hold (0: no limit). ACL `quota
    /// connections` rules override it per user.
    #[arg(long, alias = "max-connections-per-user", default_value_t = 0)]
    pub connection_limit_per_user: u32,

    /// Most connections from one client address (0: no limit).
    #[arg(long, alias = "max-connections-per-ip", default_value_t = 0)]
    pub connection_limit_per_ip: u32,

    /// Most queues one user may have created and not deleted (0: no limit). ACL `quota
    /// queues` rules override it per user.
    #[arg(long, default_value_t = 0)]
    pub max_queues_per_user: u32,

    /// Deliveries a session (0-10) or channel (0-9-1) with unlimited credit (0-10) or no
    /// prefetch (0-9-1) may leave unacknowledged before the broker waits for acknowledgements
    /// (0: no limit). Finite credit or prefetch is its own bound.
    #[arg(long, default_value_t = 10_000)]
    pub session_max_unacked: u32,

    /// RabbitMQ's consumer timeout, in milliseconds: an AMQP 0-9-1 channel whose oldest
    /// delivery has waited this long for its acknowledgement is closed with
    /// PRECONDITION_FAILED and its deliveries requeued (0: never).
    #[arg(long, value_name = "MS", default_value_t = 1_800_000)]
    pub consumer_timeout: u64,

    /// Producer flow control: while a queue a publisher sends to has consumers and more than
    /// this many bytes ready in memory (`16MiB`), the publisher waits for them instead of
    /// growing the queue without bound: an AMQP 1.0 publisher gets no new link credit, an
    /// AMQP 0-10 or 0-9-1 connection that only publishes is not read from. 0 turns it off.
    #[arg(long, value_name = "SIZE", default_value = "16MiB", value_parser = parse_bytes)]
    pub backlog_hold: u64,

    /// Subscriptions per 0-10 session and consumers per 0-9-1 channel (0: no limit).
    #[arg(long, default_value_t = 1024)]
    pub max_consumers_per_session: u32,

    /// Sessions (0-10) or channels (0-9-1) per connection (RabbitMQ's default, which its
    /// clients' tests assume).
    #[arg(long, default_value_t = 2047, value_parser = clap::value_parser!(u16).range(1..))]
    pub channel_max: u16,

    /// Heartbeat interval in seconds (RabbitMQ's `heartbeat`): proposed to 0-9-1 clients,
    /// the longest a 0-9-1 or 0-10 client may ask for (one may still turn heartbeats off),
    /// and the AMQP 1.0 idle timeout ferryd announces.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u16).range(1..))]
    pub heartbeat: u16,

    /// Milliseconds a new connection has to send its protocol header, and again to log in
    /// and open the connection; slower ones are closed.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_negotiate_time: u64,

    /// Pause publishers when queues hold more than this: bytes (`512MiB`, `2GB`) or a
    /// fraction of memory (`0.4`): the machine's, or its cgroup's limit if lower (containers);
    /// 0 turns the alarm off.
    #[arg(long, default_value = "0.4", value_parser = crate::memory::parse)]
    pub memory_high_watermark: crate::memory::Mark,

    /// Resume publishers once queues hold this much or less (default: 80% of the high-water
    /// mark); bytes or a fraction of memory.
    #[arg(long, value_parser = crate::memory::parse)]
    pub memory_low_watermark: Option<crate::memory::Mark>,

    /// Read options from a qpidd.conf-style file of `name=value` lines; the command line wins.
    #[arg(long)]
    pub config: Option<PathBuf>,

    /// Directory of the durable store (default: $XDG_DATA_HOME/ferry, else
    /// ~/.local/share/ferry). Locked: one broker per directory.
    #[arg(long, value_name = "DIR", overrides_with = "no_data_dir")]
    pub data_dir: Option<PathBuf>,

    /// Run memory-only: durable queues and persistent messages do not survive a restart.
    #[arg(long, overrides_with = "data_dir")]
    pub no_data_dir: bool,

    /// Size of the store's journal segment files, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 32 << 20)]
    pub store_segment_size: u64,

    /// Flow to disk: content of persistent messages durable queues keep in memory, bytes
    /// (`512MiB`) or a fraction of memory as for the watermark (`0.25`); beyond it (and a small
    /// read-ahead per queue) contents stay in the journal only and are read back for
    /// delivery, so a queue can hold more than memory. 0 keeps everything in memory.
    #[arg(long, default_value = "0.25", value_parser = crate::memory::parse)]
    pub store_memory_budget: crate::memory::Mark,

    /// Pause publishers while the data directory's file system has less free space than
    /// this (`50MB`, `1GiB`; RabbitMQ's disk_free_limit); 0 turns the disk alarm off.
    #[arg(long, value_name = "SIZE", default_value = "50MB", value_parser = parse_bytes)]
    pub disk_free_limit: u64,

    /// Join a cluster of this name: replicated queues (0-9-1 `x-queue-type: quorum`,
    /// `qpid.replicated`) are kept on a majority of its nodes (docs/CLUSTER.md). Needs
    /// --node-id, --cluster-peers, --cluster-secret-file and a data directory.
    #[arg(long, value_name = "NAME", requires_all = ["node_id", "cluster_secret_file"])]
    pub cluster_name: Option<String>,

    /// This node's id in the cluster (1, 2, ...; unique, never reused).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub node_id: Option<u64>,

    /// The cluster's initial members' cluster addresses, `host:port,...` (ids 1, 2, ... in
    /// that order) or `id=host:port,...`. This node is among them, or is added later with
    /// `ferry cluster add-node`.
    #[arg(long, value_name = "PEERS", default_value = "")]
    pub cluster_peers: String,

    /// Port of the cluster traffic (Raft, management); default: this node's entry in
    /// --cluster-peers, else --port + 1000.
    #[arg(long)]
    pub cluster_port: Option<u16>,

    /// File holding the secret every member proves it knows before any cluster traffic
    /// is accepted (mode 0600).
    #[arg(long, value_name = "FILE")]
    pub cluster_secret_file: Option<PathBuf>,

    /// Raft's election timeout in milliseconds (between this and twice this); heartbeats
    /// go at a fifth of it. A leader that has not heard from a majority for twice this
    /// stops serving.
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(50..))]
    pub cluster_election_timeout: u64,
}

/// `--cluster-peers`: `(id, address)` pairs.
pub fn parse_peers(text: &str) -> Result<Vec<(u64, String)>, String> {
    let mut out = Vec::new();
    for (i, item) in text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
    {
        let (id, addr) = match item.split_once('=') {
            Some((id, addr)) => (
                id.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("bad node id in {item:?}"))?,
                addr.trim(),
            ),
            None => (i as u64 + 1, item),
        };
        if id == 0 {
            return Err(format!("{item:?}: node ids start at 1"));
        }
        if addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .is_none()
        {
            return Err(format!("{item:?}: expected host:port"));
        }
        if out.iter().any(|(other, _)| *other == id) {
            return Err(format!("node id {id} appears twice"));
        }
        out.push((id, addr.to_owned()));
    }
    Ok(out)
}

/// A SASL mechanism ferryd has, by its name (any case).
fn mechanism(name: &str) -> Result<Mechanism, String> {
    Mechanism::from_name(name.trim().as_bytes()).ok_or_else(|| {
        let known: Vec<&str> = Mechanism::ALL.iter().map(|m| m.name()).collect();
        format!(
            "no SASL mechanism {name:?} (ferryd has {})",
            known.join(", ")
        )
    })
}

/// A size in bytes, in the watermarks' units; not a fraction.
fn parse_bytes(text: &str) -> Result<u64, String> {
    match crate::memory::parse(text)? {
        crate::memory::Mark::Bytes(n) => Ok(n),
        crate::memory::Mark::Fraction(_) => Err(format!("{text:?}: give a size in bytes")),
    }
}

impl Options {
    /// The store's directory; `None` when running memory-only (or when no default exists).
    pub fn data_dir(&self) -> Option<PathBuf> {
        if self.no_data_dir {
            return None;
        }
        self.data_dir.clone().or_else(|| {
            default_data_dir(
                std::env::var_os("XDG_DATA_HOME").map(PathBuf::from),
                std::env::var_os("HOME").map(PathBuf::from),
            )
        })
    }
}

/// The per-user data directory of the XDG base directory specification.
fn default_data_dir(xdg_data_home: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    xdg_data_home
        .filter(|p| p.is_absolute())
        .or_else(|| home.map(|h| h.join(".local/share")))
        .map(|base| base.join("ferry"))
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: expected name=value")]
    Syntax { path: PathBuf, line: usize },
}

/// Finds `--config FILE` (or `--config=FILE`) in the raw arguments before clap runs, so the
/// file's settings can be placed ahead of the real arguments and be overridden by them.
pub fn config_path(args: &[String]) -> Option<PathBuf> {
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--config" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    None
}

/// Turns `name=value` lines into `--name=value` arguments. `#` starts a comment; a bare
/// `name` (or `name=`) is a switch. `yes`/`no`/`true`/`false` values are accepted as in qpidd.
pub fn config_file_args(path: &Path, text: &str) -> Result<Vec<String>, ConfigFileError> {
    let mut args = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (name, value) = match line.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (line, ""),
        };
        if name.is_empty() || name.contains(char::is_whitespace) || name == "config" {
            return Err(ConfigFileError::Syntax {
                path: path.to_path_buf(),
                line: index + 1,
            });
        }
        let value = match value {
            "true" => "yes",
            "false" => "no",
            other => other,
        };
        if value.is_empty() {
            args.push(format!("--{name}"));
        } else {
            args.push(format!("--{name}={value}"));
        }
    }
    Ok(args)
}

/// The full argument list: program name, config-file settings, then the command line.
pub fn merged_args(args: Vec<String>) -> Result<Vec<String>, ConfigFileError> {
    let Some(path) = config_path(&args) else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigFileError::Read {
        path: path.clone(),
        source,
    })?;
    let from_file = config_file_args(&path, &text)?;
    let mut merged = Vec::with_capacity(args.len() + from_file.len());
    let mut rest = args.into_iter();
    merged.extend(rest.next());
    merged.extend(from_file);
    merged.extend(rest);
    Ok(merged)
}

/// The users file ferryd uses: `--users-file`, else `users` beside `--config`, else the
/// per-user default (see `ferry_auth::default_users_file`).
pub fn users_file(options: &Options) -> Option<PathBuf> {
    if let Some(path) = &options.users_file {
        return Some(path.clone());
    }
    if let Some(config) = &options.config {
        return Some(config.with_file_name("users"));
    }
    ferry_auth::default_users_file()
}

/// Maps qpidd's `--log-enable` rules (`info+`, `debug+:Broker`) to a tracing filter; anything
/// that is not qpidd syntax is passed through as a tracing directive.
pub fn log_filter(rules: &[String]) -> String {
    if rules.is_empty() {
        return "info".to_string();
    }
    let mut directives = Vec::new();
    for rule in rules {
        let level = rule.split(':').next().unwrap_or(rule).trim_end_matches('+');
        let mapped = match level {
            "trace" => Some("trace"),
            "debug" => Some("debug"),
            "info" | "notice" => Some("info"),
            "warning" => Some("warn"),
            "error" | "critical" => Some("error"),
            _ => None,
        };
        match mapped {
            Some(level) => directives.push(level.to_string()),
            None => directives.push(rule.clone()),
        }
    }
    directives.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_qpidd_style_options() {
        let o = Options::try_parse_from(strings(&[
            "ferryd",
            "--port",
            "0",
            "--worker-threads",
            "2",
            "--tcp-nodelay",
            "--auth",
            "no",
            "--mgmt-enable",
            "yes",
        ]))
        .unwrap();
        assert_eq!(o.port, 0);
        assert_eq!(o.worker_threads, Some(2));
        assert!(o.tcp_nodelay.on());
        assert!(!o.auth.on());
        assert!(!o.enable_timestamp.on(), "off unless asked for");
        assert_eq!(
            (o.dtx_default_timeout, o.dtx_max_timeout),
            (60, 3600),
            "qpidd's"
        );
        for on in [&["--enable-timestamp"][..], &["--enable-timestamp", "yes"]] {
            let o = Options::try_parse_from([&["ferryd"][..], on].concat()).unwrap();
            assert!(o.enable_timestamp.on(), "{on:?}");
        }
    }

    #[test]
    fn limits_take_qpidd_names_and_aliases() {
        let o = Options::try_parse_from(strings(&[
            "ferryd",
            "--acl-file",
            "/etc/ferry/ferry.acl",
            "--max-connections-per-user",
            "3",
            "--connection-limit-per-ip",
            "4",
            "--max-queues-per-user",
            "5",
        ]))
        .unwrap();
        assert_eq!(
            o.acl_file.as_deref(),
            Some(Path::new("/etc/ferry/ferry.acl"))
        );
        assert_eq!(o.connection_limit_per_user, 3);
        assert_eq!(o.connection_limit_per_ip, 4);
        assert_eq!(o.max_queues_per_user, 5);
    }

    #[test]
    fn sasl_mechanisms_are_a_list_of_known_names() {
        let o = Options::try_parse_from(strings(&["ferryd"])).unwrap();
        assert!(o.sasl_mechanisms.is_empty(), "all of them");
        let o = Options::try_parse_from(strings(&[
            "ferryd",
            "--sasl-mechanisms",
            "plain,AMQPLAIN,EXTERNAL",
        ]))
        .unwrap();
        assert_eq!(
            o.sasl_mechanisms,
            [Mechanism::Plain, Mechanism::AmqPlain, Mechanism::External]
        );
        let e =
            Options::try_parse_from(strings(&["ferryd", "--sasl-mechanisms", "PLAIN,CRAM-MD5"]))
                .unwrap_err()
                .to_string();
        assert!(e.contains("CRAM-MD5") && e.contains("SCRAM-SHA-256"), "{e}");
        // A config file's list is replaced by the command line's, not added to.
        let mut args = config_file_args(
            Path::new("/etc/ferry/ferryd.conf"),
            "sasl-mechanisms = PLAIN, AMQPLAIN\n",
        )
        .unwrap();
        args.insert(0, "ferryd".into());
        args.extend(strings(&["--sasl-mechanisms", "SCRAM-SHA-256"]));
        let o = Options::try_parse_from(args).unwrap();
        assert_eq!(o.sasl_mechanisms, [Mechanism::ScramSha256]);
    }

    #[test]
    fn auth_is_on_by_default_and_the_users_file_sits_beside_the_config() {
        let o = Options::try_parse_from(strings(&["ferryd"])).unwrap();
        assert!(o.auth.on());
        assert!(!o.allow_anonymous.on());
        let o = Options::try_parse_from(strings(&["ferryd", "--config", "/etc/ferry/ferryd.conf"]))
            .unwrap();
        assert_eq!(users_file(&o), Some(PathBuf::from("/etc/ferry/users")));
        let o = Options::try_parse_from(strings(&[
            "ferryd",
            "--config",
            "/etc/ferry/ferryd.conf",
            "--users-file",
            "/srv/u",
        ]))
        .unwrap();
        assert_eq!(users_file(&o), Some(PathBuf::from("/srv/u")));
    }

    fn with_tls(extra: &str) -> Options {
        let args = [
            "ferryd",
            "--ssl-cert-file",
            "c.pem",
            "--ssl-key-file",
            "k.pem",
            extra,
        ];
        Options::try_parse_from(strings(&args)).unwrap()
    }

    #[test]
    fn tls_options_come_together() {
        let o = with_tls("--ssl-require-client-authentication");
        assert_eq!(o.ssl_port, 5671);
        assert!(o.ssl_require_client_authentication.on());
        assert!(Options::try_parse_from(strings(&["ferryd", "--ssl-cert-file", "c.pem"])).is_err());
        assert!(Options::try_parse_from(strings(&["ferryd", "--ssl-ca-file", "ca.pem"])).is_err());
        assert!(!o.require_encryption.on());
        assert!(
            Options::try_parse_from(strings(&["ferryd", "--require-encryption"])).is_err(),
            "only TLS clients, but no TLS"
        );
        assert!(with_tls("--require-encryption").require_encryption.on());
    }

    #[test]
    fn disk_free_limit_is_a_size() {
        let o = Options::try_parse_from(strings(&["ferryd"])).unwrap();
        assert_eq!(o.disk_free_limit, 50_000_000, "RabbitMQ's default");
        let o = Options::try_parse_from(strings(&["ferryd", "--disk-free-limit", "1GiB"])).unwrap();
        assert_eq!(o.disk_free_limit, 1 << 30);
        assert!(Options::try_parse_from(strings(&["ferryd", "--disk-free-limit", "0.5"])).is_err());
    }

    #[test]
    fn rejects_unknown_option() {
        assert!(Options::try_parse_from(strings(&["ferryd", "--bogus"])).is_err());
        assert!(Options::try_parse_from(strings(&["ferryd", "--port", "70000"])).is_err());
    }

    #[test]
    fn config_file_lines_become_arguments() {
        let text =
            "# comment\nport=5673\n\nauth = false\ntcp-nodelay\nlog-enable=debug+ # trailing\n";
        let args = config_file_args(Path::new("x.conf"), text).unwrap();
        assert_eq!(
            args,
            strings(&[
                "--port=5673",
                "--auth=no",
                "--tcp-nodelay",
                "--log-enable=debug+"
            ])
        );
        assert!(config_file_args(Path::new("x.conf"), "bad name=1").is_err());
    }

    #[test]
    fn command_line_overrides_config_file() {
        let dir = std::env::temp_dir().join(format!("ferryd-opt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ferryd.conf");
        std::fs::write(&path, "port=6000\nmax-connections=7\n").unwrap();
        let args = merged_args(strings(&[
            "ferryd",
            "--config",
            path.to_str().unwrap(),
            "--port",
            "6001",
        ]))
        .unwrap();
        let o = Options::try_parse_from(args).unwrap();
        assert_eq!(o.port, 6001);
        assert_eq!(o.max_connections, 7);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn data_dir_defaults_to_the_user_data_directory_and_can_be_turned_off() {
        let o = Options::try_parse_from(strings(&["ferryd", "--data-dir", "/srv/ferry"])).unwrap();
        assert_eq!(o.data_dir(), Some(PathBuf::from("/srv/ferry")));
        let o = Options::try_parse_from(strings(&["ferryd", "--no-data-dir"])).unwrap();
        assert_eq!(o.data_dir(), None);
        // The later of the two wins, so a config file's data-dir can be overridden.
        let o = Options::try_parse_from(strings(&["ferryd", "--data-dir=/x", "--no-data-dir"]))
            .unwrap();
        assert_eq!(o.data_dir(), None);
        assert_eq!(
            default_data_dir(Some("/xdg".into()), Some("/home/u".into())),
            Some(PathBuf::from("/xdg/ferry"))
        );
        assert_eq!(
            default_data_dir(Some("relative".into()), Some("/home/u".into())),
            Some(PathBuf::from("/home/u/.local/share/ferry"))
        );
        assert_eq!(default_data_dir(None, None), None);
    }

    #[test]
    fn qpidd_log_rules_map_to_tracing_levels() {
        assert_eq!(log_filter(&[]), "info");
        assert_eq!(log_filter(&strings(&["debug+"])), "debug");
        assert_eq!(log_filter(&strings(&["warning+:Broker"])), "warn");
        assert_eq!(
            log_filter(&strings(&["ferry_server=trace"])),
            "ferry_server=trace"
        );
    }
}

#[cfg(test)]
mod cluster_tests {
    use super::parse_peers;

    #[test]
    fn peers_in_order_or_with_ids() {
        assert_eq!(
            parse_peers("a:1, b:2").unwrap(),
            vec![(1, "a:1".to_owned()), (2, "b:2".to_owned())]
        );
        assert_eq!(
            parse_peers("3=a:1,7=b:2").unwrap()[1],
            (7, "b:2".to_owned())
        );
        assert!(parse_peers("a").is_err());
        assert!(parse_peers("0=a:1").is_err());
        assert!(parse_peers("1=a:1,1=b:2").is_err());
        assert!(parse_peers("").unwrap().is_empty());
    }
}
