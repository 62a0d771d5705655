//! RabbitMQ's consumer timeout: a channel whose oldest delivery waits too long for its
//! acknowledgement is closed with 406, and what it held goes back to its queue.

use std::time::Duration;

use ferry_amqp091::{BasicCancel, BasicGet};

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

fn timeout_arg(ms: i64) -> FieldTable {
    table(&[("x-consumer-timeout", FieldValue::I64(ms))])
}

/// A connection under the broker's timeout `broker_default`, with queue `q` declared with
/// `x-consumer-timeout` `queue_ms` (none if `None`) and one message in it.
async fn with_queue_timeout(broker_default: Option<Duration>, queue_ms: Option<i64>) -> Client {
    let config = ServerConfig {
        consumer_timeout: broker_default,
        ..ServerConfig::default()
    };
    let mut c = open_with(config, 0).await;
    open_channel(&mut c, 1);
    c.declare(
        1,
        QueueDeclare {
            arguments: queue_ms.map(timeout_arg).unwrap_or_default(),
            ..queue("q")
        },
    );
    c.publish(1, "", "q", b"held");
    c
}

const HALF_HOUR: Duration = Duration::from_secs(1800);

#[tokio::test]
async fn a_queue_s_timeout_comes_before_the_broker_s_and_brings_the_checks_forward() {
    let mut c = with_queue_timeout(Some(HALF_HOUR), Some(1000)).await;
    assert_eq!(delivered(&c.consume(1, consumer("q", "slow"))).len(), 1);
    // The broker's half hour alone would check once a minute.
    assert_eq!(closed_for_timeout(&methods(c.advance(SECOND / 2))), None);
    let text = closed_for_timeout(&methods(c.advance(2 * SECOND))).expect("closed");
    assert!(text.ends_with("Timeout value used: 1000 ms"), "{text}");
}

#[tokio::test]
async fn a_consumer_s_own_timeout_comes_before_its_queue_s() {
    let mut c = with_queue_timeout(Some(HALF_HOUR), Some(1000)).await;
    let longer = BasicConsume {
        arguments: timeout_arg(3000),
        ..consumer("q", "patient")
    };
    assert_eq!(delivered(&c.consume(1, longer)).len(), 1);
    assert_eq!(closed_for_timeout(&methods(c.advance(2 * SECOND))), None);
    let text = closed_for_timeout(&methods(c.advance(2 * SECOND))).expect("closed");
    assert!(text.ends_with("Timeout value used: 3000 ms"), "{text}");
}

#[tokio::test]
async fn zero_turns_the_timeout_off_for_a_consumer_or_a_queue() {
    let mut c = with_queue_timeout(Some(SECOND), Some(0)).await;
    assert_eq!(delivered(&c.consume(1, consumer("q", "q-off"))).len(), 1);
    assert_eq!(closed_for_timeout(&methods(c.advance(5 * SECOND))), None);

    let mut c = with_queue_timeout(Some(SECOND), Some(1000)).await;
    let off = BasicConsume {
        arguments: timeout_arg(0),
        ..consumer("q", "c-off")
    };
    assert_eq!(delivered(&c.consume(1, off)).len(), 1);
    assert_eq!(closed_for_timeout(&methods(c.advance(5 * SECOND))), None);
}

#[tokio::test]
async fn a_queue_s_timeout_holds_for_basic_get_even_with_the_broker_s_off() {
    let mut c = with_queue_timeout(None, Some(1000)).await;
    let got = c.request(
        1,
        BasicGet {
            queue: short("q"),
            ..Default::default()
        },
    );
    assert!(got
        .iter()
        .any(|i| matches!(i.method, Method::BasicGetOk(_))));
    let text = closed_for_timeout(&methods(c.advance(2 * SECOND))).expect("closed");
    assert!(text.ends_with("Timeout value used: 1000 ms"), "{text}");
    let q = c.conn.broker().queue("q").unwrap();
    assert_eq!(q.info().message_count, 1, "requeued");
}

#[tokio::test]
async fn a_bad_timeout_argument_is_refused_with_406() {
    let mut c = with_queue_timeout(None, None).await;
    let bad = BasicConsume {
        arguments: table(&[("x-consumer-timeout", long("soon"))]),
        ..consumer("q", "bad")
    };
    let got = c.call(1, bad);
    assert_channel_closed(&got, 1, reply::PRECONDITION_FAILED, (60, 20));
    open_channel(&mut c, 2);
    let got = c.call(
        2,
        QueueDeclare {
            arguments: timeout_arg(-1),
            ..queue("q2")
        },
    );
    assert_channel_closed(&got, 2, reply::PRECONDITION_FAILED, (50, 10));
}

#[tokio::test]
async fn a_cancelled_consumer_s_deliveries_keep_its_timeout() {
    // Off for the consumer, on for its queue: cancelling (a worker's warm shutdown) does not
    // put its unfinished deliveries under the queue's timeout.
    let mut c = with_queue_timeout(Some(SECOND), Some(1000)).await;
    let off = BasicConsume {
        arguments: timeout_arg(0),
        ..consumer("q", "finishing")
    };
    assert_eq!(delivered(&c.consume(1, off)).len(), 1);
    c.call(
        1,
        BasicCancel {
            consumer_tag: short("finishing"),
            nowait: false,
        },
    );
    assert_eq!(closed_for_timeout(&methods(c.advance(5 * SECOND))), None);

    // And the other way: its own short timeout still holds once it is cancelled.
    let mut c = with_queue_timeout(None, None).await;
    let short_lived = BasicConsume {
        arguments: timeout_arg(1000),
        ..consumer("q", "brief")
    };
    assert_eq!(delivered(&c.consume(1, short_lived)).len(), 1);
    c.call(
        1,
        BasicCancel {
            consumer_tag: short("brief"),
            nowait: false,
        },
    );
    let text = closed_for_timeout(&methods(c.advance(3 * SECOND))).expect("closed");
    assert!(text.ends_with("Timeout value used: 1000 ms"), "{text}");
}
