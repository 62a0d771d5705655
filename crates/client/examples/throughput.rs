//! Publishes N messages of a given size to a queue on a running broker, then consumes
//! them, printing the rate of each phase.
//!
//! `cargo run --release -p ferry-client --example throughput -- 127.0.0.1:5672 1000000 256`

use std::time::Instant;

use ferry_client::{
    ConnectOptions, Connection, FlowMode, OutgoingMessage, QueueDeclareOptions, SubscribeOptions,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:5672".into());
    let count: u32 = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let size: usize = args.next().map_or(Ok(256), |a| a.parse())?;

    let conn = Connection::connect(addr.as_str(), ConnectOptions::default()).await?;
    let session = conn.session().await?;
    let queue = format!("throughput-{}", std::process::id());
    let options = QueueDeclareOptions {
        auto_delete: true,
        ..Default::default()
    };
    session.queue_declare(&queue, options).await?;

    let message = OutgoingMessage::builder()
        .routing_key(&queue)
        .body(vec![b'x'; size])
        .build()?;
    let start = Instant::now();
    for _ in 0..count {
        session.transfer("", &message).await?;
    }
    session.sync().await?;
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "published {count} x {size} B in {elapsed:.2}s: {:.0} msg/s",
        f64::from(count) / elapsed
    );

    let consumer = conn.session().await?;
    let mut sub = consumer
        .subscribe(
            &queue,
            "throughput",
            SubscribeOptions {
                flow_mode: FlowMode::Window,
                message_credit: 5000,
                ..Default::default()
            },
        )
        .await?;
    let start = Instant::now();
    for _ in 0..count {
        if sub.next().await.is_none() {
            return Err("subscription ended early".into());
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "consumed {count} in {elapsed:.2}s: {:.0} msg/s",
        f64::from(count) / elapsed
    );
    consumer.close().await?;
    session.close().await?;
    conn.close().await?;
    Ok(())
}
