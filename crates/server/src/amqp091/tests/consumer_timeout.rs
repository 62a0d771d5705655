//! RabbitMQ's consumer timeout: a channel whose oldest delivery waits too long for its
//! acknowledgement is closed with 406, and what it held goes back to its queue.

use std::time::Duration;

use ferry_amqp091::BasicCancel;

use super::*;

async fn with_timeout(timeout: Duration) -> Client {
    let config = ServerConfig {
        consumer_timeout: Some(timeout),
        ..ServerConfig::default()
    };
    let mut c = open_with(config, 0).await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    c
}

fn closed_for_timeout(out: &[(u16, Method)]) -> Option<String> {
    out.iter().find_map(|(ch, m)| match m {
        Method::ChannelClose(close)
            if *ch == 1 && close.reply_code == reply::PRECONDITION_FAILED =>
        {
            Some(String::from_utf8_lossy(close.reply_text.as_bytes()).into_owned())
        }
        _ => None,
    })
}

#[tokio::test]
async fn an_unacknowledged_delivery_closes_its_channel_after_the_timeout() {
    let mut c = with_timeout(SECOND).await;
    c.publish(1, "", "q", b"kept");
    let got = c.consume(1, consumer("q", "slow"));
    assert_eq!(delivered(&got).len(), 1);
    assert_eq!(closed_for_timeout(&methods(c.advance(SECOND / 2))), None);
    let text = closed_for_timeout(&methods(c.advance(SECOND)))
        .expect("closed within the timeout and one check interval");
    assert_eq!(
        text,
        "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. \
         Timeout value used: 1000 ms"
    );
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 1, "requeued");
    assert!(!c.conn.is_finished(), "only the channel");
}

#[tokio::test]
async fn deliveries_acknowledged_in_time_keep_the_channel_open() {
    let mut c = with_timeout(SECOND).await;
    c.consume(1, consumer("q", "steady"));
    for _ in 0..6 {
        c.publish(1, "", "q", b"m");
        let tag = c
            .take()
            .iter()
            .find_map(|i| match &i.method {
                Method::BasicDeliver(d) => Some(d.delivery_tag),
                _ => None,
            })
            .expect("a delivery");
        assert_eq!(closed_for_timeout(&methods(c.advance(SECOND / 2))), None);
        c.ack(1, tag, false);
    }
    // Six seconds of traffic, each delivery acknowledged after half of the timeout.
    assert_eq!(closed_for_timeout(&methods(c.advance(2 * SECOND))), None);
    // No-ack deliveries are never waited for.
    c.call(
        1,
        BasicCancel {
            consumer_tag: short("steady"),
            nowait: false,
        },
    );
    c.consume(
        1,
        BasicConsume {
            no_ack: true,
            ..consumer("q", "fire-and-forget")
        },
    );
    c.publish(1, "", "q", b"x");
    assert_eq!(closed_for_timeout(&methods(c.advance(3 * SECOND))), None);
}

#[tokio::test]
async fn acknowledgements_waiting_behind_a_resource_alarm_do_not_time_out() {
    let broker = ferry_core::BrokerConfig {
        memory_watermarks: Some(ferry_core::Watermarks {
            high: 1000,
            low: 100,
        }),
        ..ferry_core::BrokerConfig::default()
    };
    let config = ServerConfig {
        consumer_timeout: Some(SECOND),
        ..ServerConfig::default()
    };
    let services = crate::shell::testing::services_with(config, broker);
    let mut c = open_on(&services, &[]).await;
    open_channel(&mut c, 1);
    c.declare_queue(1, "q");
    c.consume(1, consumer("q", "both"));
    c.publish(1, "", "q", &[1; 600]);
    c.publish(1, "", "q", &[2; 600]);
    let tags: Vec<u64> = c
        .take()
        .iter()
        .filter_map(|i| match &i.method {
            Method::BasicDeliver(d) => Some(d.delivery_tag),
            _ => None,
        })
        .collect();
    assert_eq!(tags, [1, 2]);
    assert!(services.broker.alarms().blocked());
    c.poll_flow();
    // Acknowledged in time, but the alarm keeps the ack unread.
    c.ack(1, 2, true);
    assert!(c.pending_input() > 0);
    assert_eq!(closed_for_timeout(&methods(c.advance(3 * SECOND))), None);
}
