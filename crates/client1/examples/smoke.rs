//! Sends and receives a few messages through a broker: `smoke HOST:PORT QUEUE [N]`.
use ferry_client1::*;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ClientError> {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).map_or("127.0.0.1:5672", String::as_str);
    let queue = args.get(2).map_or("smoke", String::as_str);
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10);
    let options = ConnectOptions {
        username: Some("guest".into()),
        password: Some("guest".into()),
        ..ConnectOptions::default()
    };
    let mut conn = Connection::connect(addr, &options).await?;
    println!("connected: {:?}", conn.peer());
    let tx = conn
        .attach_sender("tx", queue, SendMode::Unsettled { window: 100 })
        .await?;
    let rx = conn
        .attach_receiver("rx", queue, ReceiveOptions::default())
        .await?;
    let p = Publication::simple(false, None, 16);
    let t0 = std::time::Instant::now();
    let body = vec![b'x'; 16];
    for _ in 0..n {
        conn.send(tx, &p, &body).await?;
    }
    conn.wait_settled(tx).await?;
    conn.sync(tx).await?;
    println!("sent {n} in {:?}", t0.elapsed());
    for i in 0..n {
        let d = conn.next_delivery(rx).await?;
        assert_eq!(d.body()?.len(), 16, "{i}");
        conn.accept(d.delivery_id);
    }
    println!("received {n} in {:?}", t0.elapsed());
    conn.flush().await?;
    conn.close().await
}
