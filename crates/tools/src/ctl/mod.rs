//! `ferry ctl`: ferryd's management over its HTTP API (RabbitMQ's paths, so most commands
//! work against RabbitMQ too): list objects, declare, delete, purge, bind, unbind, close
//! connections, export and import definitions.

pub mod client;
pub mod table;

use std::io::{Read, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};

use crate::ToolError;
use client::{seg, Client, CtlError};

/// The only virtual host, as a path segment.
const VHOST: &str = "%2F";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct CtlOpts {
    /// Management API host.
    #[arg(long, default_value = "127.0.0.1", global = true)]
    pub host: String,
    /// Management API port (ferryd's --mgmt-port).
    #[arg(long, default_value_t = 15672, global = true)]
    pub port: u16,
    #[arg(long, default_value = "guest", global = true)]
    pub user: String,
    #[arg(long, default_value = "guest", global = true)]
    pub password: String,
    /// How to print what the API returns.
    #[arg(long, value_enum, default_value = "table", global = true)]
    pub format: Format,
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Listed {
    Queues,
    Exchanges,
    Bindings,
    Connections,
    Channels,
    Consumers,
    Users,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DestinationType {
    Queue,
    Exchange,
}

#[derive(Debug, Clone, Subcommand)]
pub enum CtlCmd {
    /// The broker at a glance: versions, totals, rates.
    Overview,
    /// Lists queues, exchanges, bindings, connections, channels, consumers or users.
    List {
        what: Listed,
        /// Only names containing this (case-insensitive; the destination for bindings,
        /// the queue for consumers).
        #[arg(long)]
        name: Option<String>,
    },
    /// Declares a queue or an exchange.
    Declare {
        #[command(subcommand)]
        what: Declared,
    },
    /// Deletes a queue or an exchange.
    Delete {
        #[command(subcommand)]
        what: Deleted,
    },
    /// Removes a queue's ready messages.
    Purge {
        /// The queue.
        queue: String,
    },
    /// Binds a queue (or an exchange) to an exchange.
    Bind(BindingArgs),
    /// Removes a binding.
    Unbind(BindingArgs),
    /// Closes a connection (its name as `list connections` shows it).
    Close {
        name: String,
        /// What the client is told.
        #[arg(long, default_value = "closed by ferry ctl")]
        reason: String,
    },
    /// Writes the definitions (exchanges, queues, bindings, users) as JSON.
    Export {
        /// The file to write; standard output if absent.
        file: Option<PathBuf>,
    },
    /// Declares the exchanges, queues and bindings of a definitions file (`-`: stdin).
    Import { file: PathBuf },
}

#[derive(Debug, Clone, Subcommand)]
pub enum Declared {
    Queue {
        name: String,
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        durable: bool,
        #[arg(long)]
        auto_delete: bool,
        /// Queue arguments as a JSON object, e.g. '{"x-max-length": 1000}'.
        #[arg(long)]
        arguments: Option<String>,
    },
    Exchange {
        name: String,
        /// direct, fanout, topic or headers.
        #[arg(long = "type", default_value = "direct")]
        kind: String,
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        durable: bool,
        #[arg(long)]
        auto_delete: bool,
        /// Exchange arguments as a JSON object.
        #[arg(long)]
        arguments: Option<String>,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum Deleted {
    Queue {
        name: String,
        /// Only if it has no consumers.
        #[arg(long)]
        if_unused: bool,
        /// Only if it holds no messages.
        #[arg(long)]
        if_empty: bool,
    },
    Exchange {
        name: String,
        /// Only if it has no bindings.
        #[arg(long)]
        if_unused: bool,
    },
}

#[derive(Debug, Clone, Args)]
pub struct BindingArgs {
    /// The exchange messages come from.
    #[arg(long)]
    pub source: String,
    /// The queue (or exchange) they go to.
    #[arg(long)]
    pub destination: String,
    #[arg(long, value_enum, default_value = "queue")]
    pub destination_type: DestinationType,
    #[arg(long, default_value = "")]
    pub routing_key: String,
    /// Binding arguments as a JSON object (headers exchanges).
    #[arg(long)]
    pub arguments: Option<String>,
}

fn arguments(text: Option<&str>) -> Result<Value, CtlError> {
    match text {
        None => Ok(json!({})),
        Some(t) => match serde_json::from_str::<Value>(t) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(CtlError::Invalid(format!(
                "--arguments must be a JSON object, not {t}"
            ))),
        },
    }
}

/// Columns `list` shows for each kind of object.
fn columns(what: Listed) -> (&'static str, &'static [(&'static str, &'static str)]) {
    match what {
        Listed::Queues => (
            "queues",
            &[
                ("name", "name"),
                ("durable", "durable"),
                ("auto_delete", "auto_delete"),
                ("messages", "messages"),
                ("ready", "messages_ready"),
                ("unacked", "messages_unacknowledged"),
                ("consumers", "consumers"),
                ("publish/s", "message_stats.publish_details.rate"),
            ],
        ),
        Listed::Exchanges => (
            "exchanges",
            &[
                ("name", "name"),
                ("type", "type"),
                ("durable", "durable"),
                ("auto_delete", "auto_delete"),
                ("publish_in/s", "message_stats.publish_in_details.rate"),
            ],
        ),
        Listed::Bindings => (
            "bindings",
            &[
                ("source", "source"),
                ("destination", "destination"),
                ("type", "destination_type"),
                ("routing_key", "routing_key"),
                ("arguments", "arguments"),
            ],
        ),
        Listed::Connections => (
            "connections",
            &[
                ("name", "name"),
                ("user", "user"),
                ("protocol", "protocol"),
                ("channels", "channels"),
                ("recv_oct", "recv_oct"),
                ("send_oct", "send_oct"),
            ],
        ),
        Listed::Channels => (
            "channels",
            &[
                ("name", "name"),
                ("user", "user"),
                ("consumers", "consumer_count"),
                ("unacked", "messages_unacknowledged"),
                ("prefetch", "prefetch_count"),
            ],
        ),
        Listed::Consumers => (
            "consumers",
            &[
                ("queue", "queue.name"),
                ("consumer_tag", "consumer_tag"),
                ("ack_required", "ack_required"),
                ("prefetch", "prefetch_count"),
                ("connection", "channel_details.connection_name"),
            ],
        ),
        Listed::Users => ("users", &[("name", "name"), ("tags", "tags")]),
    }
}

const OVERVIEW_ROWS: &[(&str, &str)] = &[
    ("product", "product_name"),
    ("version", "product_version"),
    ("node", "node"),
    ("connections", "object_totals.connections"),
    ("channels", "object_totals.channels"),
    ("exchanges", "object_totals.exchanges"),
    ("queues", "object_totals.queues"),
    ("consumers", "object_totals.consumers"),
    ("messages", "queue_totals.messages"),
    ("ready", "queue_totals.messages_ready"),
    ("unacked", "queue_totals.messages_unacknowledged"),
    ("published", "message_stats.publish"),
    ("publish/s", "message_stats.publish_details.rate"),
    ("delivered", "message_stats.deliver_get"),
    ("deliver/s", "message_stats.deliver_get_details.rate"),
    ("acked", "message_stats.ack"),
    ("alarms", "ferry.alarms"),
];

/// Runs a command, writing what it shows to `out`.
pub fn execute(opts: &CtlOpts, out: &mut dyn Write) -> Result<(), CtlError> {
    let c = Client::new(&opts.host, opts.port, &opts.user, &opts.password);
    let text = run(opts, &c)?;
    out.write_all(text.as_bytes())
        .map_err(|source| CtlError::Io {
            context: "writing the output".into(),
            source,
        })
}

fn done(opts: &CtlOpts, message: String) -> String {
    match opts.format {
        Format::Table => format!("{message}\n"),
        Format::Json => format!("{}\n", json!({ "ok": true, "message": message })),
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

fn run(opts: &CtlOpts, c: &Client) -> Result<String, CtlError> {
    match &opts.cmd {
        CtlCmd::Overview => {
            let v = c.get("/api/overview")?;
            Ok(match opts.format {
                Format::Table => table::render_pairs(&v, OVERVIEW_ROWS),
                Format::Json => pretty(&v),
            })
        }
        CtlCmd::List { what, name } => {
            let (path, cols) = columns(*what);
            let mut url = format!("/api/{path}");
            if let Some(n) = name {
                url.push_str(&format!("?name={}", seg(n)));
            }
            let v = c.get(&url)?;
            let items = v.as_array().cloned().unwrap_or_default();
            Ok(match opts.format {
                Format::Table => table::render(&items, cols),
                Format::Json => pretty(&Value::Array(items)),
            })
        }
        CtlCmd::Declare { what } => match what {
            Declared::Queue {
                name,
                durable,
                auto_delete,
                arguments: args,
            } => {
                let body = json!({"durable": durable, "auto_delete": auto_delete, "arguments": arguments(args.as_deref())?});
                c.put(&format!("/api/queues/{VHOST}/{}", seg(name)), &body)?;
                Ok(done(opts, format!("queue {name} declared")))
            }
            Declared::Exchange {
                name,
                kind,
                durable,
                auto_delete,
                arguments: args,
            } => {
                let body = json!({"type": kind, "durable": durable, "auto_delete": auto_delete, "arguments": arguments(args.as_deref())?});
                c.put(&format!("/api/exchanges/{VHOST}/{}", seg(name)), &body)?;
                Ok(done(opts, format!("exchange {name} declared")))
            }
        },
        CtlCmd::Delete { what } => match what {
            Deleted::Queue {
                name,
                if_unused,
                if_empty,
            } => {
                let path = format!(
                    "/api/queues/{VHOST}/{}?if-unused={if_unused}&if-empty={if_empty}",
                    seg(name)
                );
                c.delete(&path, &[])?;
                Ok(done(opts, format!("queue {name} deleted")))
            }
            Deleted::Exchange { name, if_unused } => {
                let path = format!("/api/exchanges/{VHOST}/{}?if-unused={if_unused}", seg(name));
                c.delete(&path, &[])?;
                Ok(done(opts, format!("exchange {name} deleted")))
            }
        },
        CtlCmd::Purge { queue } => {
            c.delete(&format!("/api/queues/{VHOST}/{}/contents", seg(queue)), &[])?;
            Ok(done(opts, format!("queue {queue} purged")))
        }
        CtlCmd::Bind(b) => {
            let body = json!({"routing_key": b.routing_key, "arguments": arguments(b.arguments.as_deref())?});
            c.post(&binding_path(b), &body)?;
            Ok(done(
                opts,
                format!(
                    "{} bound to {} with key '{}'",
                    b.destination, b.source, b.routing_key
                ),
            ))
        }
        CtlCmd::Unbind(b) => {
            let wanted = arguments(b.arguments.as_deref())?;
            let bindings = c.get(&binding_path(b))?;
            let found = bindings
                .as_array()
                .into_iter()
                .flatten()
                .find(|x| x["routing_key"] == b.routing_key.as_str() && x["arguments"] == wanted)
                .and_then(|x| x["properties_key"].as_str())
                .ok_or_else(|| {
                    CtlError::Invalid(format!(
                        "no binding of {} to {} with key '{}'",
                        b.destination, b.source, b.routing_key
                    ))
                })?;
            c.delete(&format!("{}/{}", binding_path(b), seg(found)), &[])?;
            Ok(done(
                opts,
                format!(
                    "{} unbound from {} (key '{}')",
                    b.destination, b.source, b.routing_key
                ),
            ))
        }
        CtlCmd::Close { name, reason } => {
            c.delete(
                &format!("/api/connections/{}", seg(name)),
                &[("X-Reason", reason.as_str())],
            )?;
            Ok(done(opts, format!("connection {name} closed")))
        }
        CtlCmd::Export { file } => {
            let v = c.get("/api/definitions")?;
            let text = pretty(&v);
            match file {
                None => Ok(text),
                Some(path) => {
                    std::fs::write(path, text).map_err(|source| CtlError::Io {
                        context: format!("writing {}", path.display()),
                        source,
                    })?;
                    Ok(done(
                        opts,
                        format!("definitions written to {}", path.display()),
                    ))
                }
            }
        }
        CtlCmd::Import { file } => {
            let text = read_input(file)?;
            // Checked here, so a wrong file is reported as such rather than as a 400.
            serde_json::from_str::<Value>(&text)
                .map_err(|e| CtlError::Invalid(format!("{} is not JSON: {e}", file.display())))?;
            c.post_raw("/api/definitions", text)?;
            Ok(done(
                opts,
                format!("definitions imported from {}", file.display()),
            ))
        }
    }
}

fn binding_path(b: &BindingArgs) -> String {
    let kind = match b.destination_type {
        DestinationType::Queue => "q",
        DestinationType::Exchange => "e",
    };
    format!(
        "/api/bindings/{VHOST}/e/{}/{kind}/{}",
        seg(&b.source),
        seg(&b.destination)
    )
}

fn read_input(file: &PathBuf) -> Result<String, CtlError> {
    let io = |source| CtlError::Io {
        context: format!("reading {}", file.display()),
        source,
    };
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(io)?;
        Ok(text)
    } else {
        std::fs::read_to_string(file).map_err(io)
    }
}

pub fn command(opts: &CtlOpts) -> Result<(), ToolError> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    execute(opts, &mut out)?;
    Ok(())
}
