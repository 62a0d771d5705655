"""RabbitMQ's consumer timeout (ferryd --consumer-timeout): a channel whose delivery waits
too long for its acknowledgement is closed with PRECONDITION_FAILED and the delivery goes back
to its queue, as pika users meet it on RabbitMQ. Starts its own ferryd (FERRYD_BIN) with a
one-second timeout."""

import time
import uuid

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from own_ferryd import start_ferryd


@pytest.fixture
def port():
    yield from start_ferryd("--consumer-timeout", "1000")


@pytest.fixture
def default_port():
    """ferryd with its default timeout, RabbitMQ's half hour."""
    yield from start_ferryd()


def consume_until_closed(conn, ch, queue, arguments=None, limit=10):
    """Consumes without acknowledging until the broker closes the channel; returns what came
    and how long after the first delivery the close came."""
    got = []
    first = []
    ch.basic_consume(queue, lambda c, m, p, body: (got.append(body),
                                                    first.append(time.monotonic())),
                     arguments=arguments)
    conn.call_later(limit, ch.stop_consuming)
    with pytest.raises(ChannelClosedByBroker) as closed:
        ch.start_consuming()
    assert closed.value.reply_code == 406
    return got, time.monotonic() - first[0], closed.value.reply_text


def test_an_unacknowledged_delivery_times_out_its_channel(port):
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    queue = "t-" + uuid.uuid4().hex[:12]
    ch = conn.channel()
    ch.queue_declare(queue)
    ch.basic_publish("", queue, b"held")
    got = []
    ch.basic_consume(queue, lambda c, m, p, body: got.append(body))
    # pika raises the broker's channel.close from the blocking consume loop.
    conn.call_later(10, ch.stop_consuming)
    with pytest.raises(ChannelClosedByBroker) as closed:
        ch.start_consuming()
    assert got == [b"held"]
    assert closed.value.reply_code == 406
    assert "delivery acknowledgement on channel 1 timed out" in closed.value.reply_text
    # The connection carries on, and the delivery is back on its queue.
    other = conn.channel()
    method, _props, body = other.basic_get(queue)
    assert body == b"held" and method.redelivered
    other.basic_ack(method.delivery_tag)
    conn.close()


def test_acknowledging_in_time_keeps_the_channel(port):
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    queue = "t-" + uuid.uuid4().hex[:12]
    ch = conn.channel()
    ch.queue_declare(queue)
    for i in range(4):
        ch.basic_publish("", queue, b"m%d" % i)
        method, _props, _body = next(ch.consume(queue, inactivity_timeout=5))
        conn.process_data_events(time_limit=0.5)
        ch.basic_ack(method.delivery_tag)
    conn.process_data_events(time_limit=1.5)
    assert ch.is_open
    ch.cancel()
    conn.close()


def test_a_queue_s_x_consumer_timeout_comes_before_the_broker_s(default_port):
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", default_port))
    queue = "t-" + uuid.uuid4().hex[:12]
    ch = conn.channel()
    ch.queue_declare(queue, arguments={"x-consumer-timeout": 1000})
    ch.basic_publish("", queue, b"held")
    got, after, text = consume_until_closed(conn, ch, queue)
    assert got == [b"held"]
    assert text.endswith("Timeout value used: 1000 ms"), text
    assert after < 5, after
    conn.close()


def test_a_consumer_s_x_consumer_timeout_comes_before_its_queue_s(port):
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    queue = "t-" + uuid.uuid4().hex[:12]
    ch = conn.channel()
    ch.queue_declare(queue, arguments={"x-consumer-timeout": 500})
    ch.basic_publish("", queue, b"held")
    got, after, text = consume_until_closed(conn, ch, queue,
                                            arguments={"x-consumer-timeout": 3000})
    assert got == [b"held"]
    assert text.endswith("Timeout value used: 3000 ms"), text
    assert after >= 3, after
    conn.close()


def test_a_bad_x_consumer_timeout_is_refused(port):
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as closed:
        ch.queue_declare("t-" + uuid.uuid4().hex[:12], arguments={"x-consumer-timeout": -1})
    assert closed.value.reply_code == 406
    conn.close()
