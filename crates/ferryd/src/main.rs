//! ferryd: the Ferry broker daemon.

mod acl;
mod alloc;
mod cluster;
mod disk;
mod fdlimit;
mod memory;
mod mgmt;
mod options;
mod qmf;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use std::sync::Arc;

use ferry_core::{Broker, BrokerConfig, DtxTimeouts};
use ferry_server::{AuthMode, Server, ServerConfig, Shutdown, TlsSettings};
use ferry_store::{Store, StoreConfig};
use options::Options;
use tracing::{error, info, warn};

fn main() -> ExitCode {
    alloc::keep_freed_memory();
    let args = match options::merged_args(std::env::args().collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("ferryd: {e}");
            return ExitCode::from(2);
        }
    };
    let options = match Options::try_parse_from(args) {
        Ok(o) => o,
        Err(e) => {
            // clap prints help/version to stdout with success, errors to stderr.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if let Err(message) = init_logging(&options) {
        eprintln!("ferryd: {message}");
        return ExitCode::from(2);
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(n) = options.worker_threads {
        runtime.worker_threads(n.max(1));
    }
    let runtime = match runtime.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferryd: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(options))
}

async fn serve(options: Options) -> ExitCode {
    if let Some((before, after)) = fdlimit::raise() {
        info!("open files limit raised from {before} to {after}");
    }
    if let Some(limit) = fdlimit::current() {
        if limit < options.max_connections as u64 + 64 {
            warn!(
                "open files limit {limit} is below --max-connections {}: connections beyond it \
                 will fail to be accepted",
                options.max_connections
            );
        }
    }
    let mut config = ServerConfig {
        interface: options.interface,
        port: options.port,
        tcp_nodelay: options.tcp_nodelay.on(),
        tls: match (&options.ssl_cert_file, &options.ssl_key_file) {
            (Some(cert_file), Some(key_file)) => Some(TlsSettings {
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
                ca_file: options.ssl_ca_file.clone(),
                require_client_auth: options.ssl_require_client_authentication.on(),
            }),
            _ => None,
        },
        ssl_port: options.ssl_port,
        require_encryption: options.require_encryption.on(),
        auth: if options.auth.on() {
            AuthMode::Required
        } else {
            AuthMode::None
        },
        users_file: options::users_file(&options),
        allow_anonymous: options.allow_anonymous.on(),
        sasl_mechanisms: (!options.sasl_mechanisms.is_empty())
            .then(|| options.sasl_mechanisms.clone()),
        max_connections: options.max_connections.max(1),
        max_message_size: options.max_message_size,
        connection_limit_per_user: options.connection_limit_per_user,
        connection_limit_per_ip: options.connection_limit_per_ip,
        max_queues_per_user: options.max_queues_per_user,
        session_max_unacked: options.session_max_unacked,
        consumer_timeout: (options.consumer_timeout > 0)
            .then(|| std::time::Duration::from_millis(options.consumer_timeout)),
        backlog_hold_bytes: match options.backlog_hold {
            0 => u64::MAX,
            bytes => bytes,
        },
        max_consumers_per_session: options.max_consumers_per_session,
        channel_max: options.channel_max,
        heartbeat_max: options.heartbeat,
        handshake_timeout: std::time::Duration::from_millis(options.max_negotiate_time),
        ..ServerConfig::default()
    };
    let acl = match options.acl_file.as_deref().map(acl::load).transpose() {
        Ok(acl) => acl,
        Err(e) => {
            eprintln!("ferryd: {e}");
            return ExitCode::from(2);
        }
    };
    let memory_watermarks = match memory::watermarks(
        options.memory_high_watermark,
        options.memory_low_watermark,
        memory::total_memory(),
    ) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("ferryd: {e}");
            return ExitCode::from(2);
        }
    };
    let persistent_memory_budget =
        match memory::budget(options.store_memory_budget, memory::total_memory()) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("ferryd: --store-memory-budget: {e}");
                return ExitCode::from(2);
            }
        };
    let broker_config = BrokerConfig {
        memory_watermarks,
        persistent_memory_budget,
        backlog_hold: (options.backlog_hold > 0).then_some(options.backlog_hold),
        receive_timestamps: options.enable_timestamp.on(),
        dtx_timeouts: DtxTimeouts {
            default: options.dtx_default_timeout,
            max: options.dtx_max_timeout,
        },
        binding_filters: Some(ferry_server::binding_filters()),
        ..BrokerConfig::default()
    };
    let (broker, store, cluster) = match open_store(&options, broker_config).await {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("ferryd: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(cluster) = &cluster {
        config.gate = Some(cluster::gate(cluster));
    }
    if let (Some(_), Some(dir)) = (&store, options.data_dir()) {
        disk::watch(broker.clone(), dir, options.disk_free_limit);
    }
    let server = match Server::bind(config, broker.clone(), acl.clone()).await {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            eprintln!("ferryd: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!(
                "ferryd: cannot listen on {}:{}: {e}",
                options.interface, options.port
            );
            return ExitCode::FAILURE;
        }
    };
    let addr = match server.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ferryd: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(cluster) = &cluster {
        cluster.set_amqp_addr(addr.to_string());
    }
    let tls_addr = match server.tls_local_addr().transpose() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ferryd: {e}");
            return ExitCode::FAILURE;
        }
    };
    let management = match mgmt::bind(&options, &server).await {
        Ok(m) => m,
        Err(e) => {
            eprintln!("ferryd: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Before the port is printed: a SIGHUP sent as soon as it is must not stop the broker.
    reload_on_sighup(server.tls(), acl);
    // Before the port is printed too: clients may ask for management as soon as it is.
    let _qmf = options
        .mgmt_enable
        .on()
        .then(|| qmf::start(&broker, &options, addr.port()));
    let mut out = std::io::stdout();
    if options.port == 0 {
        // As qpidd does: scripts and tests read the chosen port from the first stdout line.
        let _ = writeln!(out, "{}", addr.port());
    }
    if let (Some(tls_addr), 0) = (tls_addr, options.ssl_port) {
        // The TLS port follows, on a line of its own.
        let _ = writeln!(out, "{}", tls_addr.port());
    }
    if let (Some(m), 0) = (&management, options.mgmt_port) {
        // Then the management port, on a line of its own.
        let _ = writeln!(out, "{}", m.local_addr().port());
    }
    if let (Some(addr), Some(0)) = (
        management.as_ref().and_then(|m| m.prometheus_addr()),
        options.prometheus_port,
    ) {
        // Then the Prometheus port.
        let _ = writeln!(out, "{}", addr.port());
    }
    let _ = out.flush();
    match memory_watermarks {
        Some(w) => info!(
            "memory alarm at {} bytes held by queues, cleared at {}",
            w.high, w.low
        ),
        None => warn!("--memory-high-watermark 0: publishers are never paused for memory"),
    }
    info!("ferryd listening on {addr}");
    if let Some(tls_addr) = tls_addr {
        info!("ferryd listening for TLS on {tls_addr}");
    }
    let (stop, shutdown) = Shutdown::new();
    if let Some(m) = management {
        mgmt::spawn(m, shutdown.clone());
    }
    tokio::spawn(async move {
        wait_for_signal().await;
        info!("shutting down");
        let _ = stop.send(true);
    });
    server.run(shutdown).await;
    if let Some(cluster) = cluster {
        cluster.shutdown().await;
    }
    if let Some(store) = store {
        // Everything appended (settlements of the last moments included) reaches the disk.
        store.close();
    }
    ExitCode::SUCCESS
}

type Opened = (
    Arc<Broker>,
    Option<Arc<Store>>,
    Option<Arc<ferry_cluster::Cluster>>,
);

/// The broker, over the durable store of `--data-dir` (recovered first) unless memory-only;
/// in a cluster, over the cluster journal, with the started cluster node.
async fn open_store(options: &Options, broker_config: BrokerConfig) -> Result<Opened, String> {
    let Some(dir) = options.data_dir() else {
        if options.cluster_name.is_some() {
            return Err("a cluster node needs a data directory (--data-dir)".into());
        }
        if !options.no_data_dir {
            warn!("no data directory (neither --data-dir, XDG_DATA_HOME nor HOME): memory-only");
        }
        return Ok((Broker::new(broker_config), None, None));
    };
    let config = StoreConfig {
        segment_size: options.store_segment_size,
        memory_budget: broker_config.persistent_memory_budget,
        ..StoreConfig::default()
    };
    let (store, recovered) = Store::open(&dir, config).map_err(|e| e.to_string())?;
    let stats = recovered.stats.clone();
    let (broker, cluster) = if options.cluster_name.is_some() {
        let (broker, cluster) =
            cluster::open(options, broker_config, store.clone(), recovered).await?;
        (broker, Some(cluster))
    } else {
        let broker = Broker::with_journal(broker_config, store.clone());
        recovered.restore(&broker);
        (broker, None)
    };
    info!(
        dir = %dir.display(),
        segments = stats.segments,
        records = stats.records,
        queues = stats.queues,
        messages = stats.messages,
        on_disk = stats.messages_on_disk,
        in_doubt = stats.transactions_in_doubt,
        mib_read = stats.bytes_read >> 20,
        ms = stats.elapsed.as_millis() as u64,
        "store recovered"
    );
    Ok((broker, Some(store), cluster))
}

/// SIGHUP re-reads the TLS certificate, key and CA files (new connections use them) and the
/// ACL file. (It is handled even without either: its default action would stop the broker.)
/// The handler is installed before this returns.
fn reload_on_sighup(
    tls: Option<std::sync::Arc<ferry_server::Tls>>,
    acl: Option<std::sync::Arc<ferry_acl::SharedAcl>>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        error!("cannot install the SIGHUP handler");
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            // Reading files and building TLS and ACL state is blocking work: keep it off the
            // worker threads that serve connections.
            let (tls, acl) = (tls.clone(), acl.clone());
            let reloaded = tokio::task::spawn_blocking(move || {
                match tls.as_ref().map(|t| t.reload()) {
                    Some(Ok(())) => info!("SIGHUP: TLS certificate, key and CA files reloaded"),
                    Some(Err(e)) => {
                        error!("SIGHUP: TLS files not reloaded, keeping the previous ones: {e}")
                    }
                    None if acl.is_none() => info!("SIGHUP: nothing to reload"),
                    None => {}
                }
                if let Some(acl) = &acl {
                    acl::reload(acl);
                }
            })
            .await;
            if let Err(e) = reloaded {
                error!("SIGHUP: reload failed: {e}");
            }
        }
    });
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            error!("cannot install signal handlers; stop ferryd with SIGKILL");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

fn init_logging(options: &Options) -> Result<(), String> {
    use tracing_subscriber::{fmt, EnvFilter};
    let mut filter = match std::env::var("RUST_LOG") {
        Ok(f) if !f.is_empty() => f,
        _ => options::log_filter(&options.log_enable),
    };
    // The Raft library logs every failed RPC to an unreachable peer, twice a second; the
    // cluster's own log lines say what matters. `--log-enable openraft=warn` brings it back.
    if !filter.contains("openraft") {
        filter.push_str(",openraft=off");
    }
    let filter = EnvFilter::try_new(&filter).map_err(|e| format!("bad --log-enable: {e}"))?;
    if let Some(path) = &options.log_to_file {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
        fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .init();
    } else if options.log_to_stderr.on() {
        use std::io::IsTerminal;
        fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .init();
    } else {
        fmt()
            .with_env_filter(filter)
            .with_writer(std::io::sink)
            .init();
    }
    Ok(())
}
