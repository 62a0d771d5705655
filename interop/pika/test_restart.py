"""What a restart keeps, as pika users rely on it on RabbitMQ. Starts its own ferryd
(FERRYD_BIN) on a data directory of its own, stops it and starts it again there."""

import contextlib

import pika

from own_ferryd import start_ferryd

ferryd = contextlib.contextmanager(start_ferryd)


def return_once(port, queue, expected_count):
    """Gets the queue's message, checks its x-delivery-count, and puts it back as RabbitMQ
    users give up on an attempt: basic.nack with requeue."""
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    ch = conn.channel()
    m, props, body = ch.basic_get(queue)
    assert body == b"poison"
    assert (props.headers or {}).get("x-delivery-count") == expected_count
    ch.basic_nack(m.delivery_tag, requeue=True)
    conn.close()


def test_a_quorum_queues_delivery_count_survives_a_restart(tmp_path):
    # RabbitMQ's quorum queues keep the count in their log; a poison message must not get a
    # fresh set of attempts from every restart.
    data = str(tmp_path / "data")
    queue, dlq = "poison", "poison-dlq"
    with ferryd("--data-dir", data) as port:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(dlq, durable=True)
        ch.queue_declare(queue, durable=True, arguments={
            "x-queue-type": "quorum", "x-delivery-limit": 3,
            "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
        ch.basic_publish("", queue, b"poison", pika.BasicProperties(delivery_mode=2))
        conn.close()
        return_once(port, queue, None)
        return_once(port, queue, 1)
    with ferryd("--data-dir", data) as port:
        return_once(port, queue, 2)
        # Back a fourth time, one more than the limit: dead-lettered.
        return_once(port, queue, 3)
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        ch = conn.channel()
        assert ch.basic_get(queue) == (None, None, None)
        _, props, body = ch.basic_get(dlq, auto_ack=True)
        assert body == b"poison"
        assert props.headers["x-death"][0]["reason"] == "delivery_limit"
        conn.close()
