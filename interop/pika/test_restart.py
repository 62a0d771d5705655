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


def test_bindings_told_apart_by_their_arguments_survive_a_restart(tmp_path):
    # A durable queue, and a quorum queue (kept in the replicated log), each bound to a
    # headers exchange twice under one key with other criteria, and once more then unbound.
    data = str(tmp_path / "data")
    pdf = {"x-match": "all", "format": "pdf"}
    report = {"x-match": "all", "type": "report"}
    memo = {"x-match": "all", "type": "memo"}
    queues = {"classic": {}, "quorum": {"x-queue-type": "quorum"}}
    with ferryd("--data-dir", data) as port:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        ch = conn.channel()
        ch.exchange_declare("docs", "headers", durable=True)
        for q, args in queues.items():
            ch.queue_declare(q, durable=True, arguments=args)
            for criteria in (pdf, report, memo):
                ch.queue_bind(q, "docs", arguments=criteria)
            ch.queue_unbind(q, "docs", arguments=memo)
        conn.close()
    with ferryd("--data-dir", data) as port:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        ch = conn.channel()
        ch.confirm_delivery()
        for i, h in enumerate([{"format": "pdf"}, {"type": "report"}, {"type": "memo"}]):
            ch.basic_publish("docs", "", b"%d" % i, pika.BasicProperties(headers=h))
        for q in queues:
            got = []
            while True:
                m, _, body = ch.basic_get(q, auto_ack=True)
                if m is None:
                    break
                got.append(body)
            assert got == [b"0", b"1"], q
        conn.close()


def test_exchange_bindings_told_apart_by_their_arguments_survive_a_restart(tmp_path):
    # The same with exchange-to-exchange bindings between durable exchanges.
    data = str(tmp_path / "data")
    pdf = {"x-match": "all", "format": "pdf"}
    report = {"x-match": "all", "type": "report"}
    memo = {"x-match": "all", "type": "memo"}
    with ferryd("--data-dir", data) as port:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        ch = conn.channel()
        ch.exchange_declare("docs", "headers", durable=True)
        ch.exchange_declare("filed", "fanout", durable=True)
        ch.queue_declare("filed", durable=True)
        ch.queue_bind("filed", "filed")
        for criteria in (pdf, report, memo):
            ch.exchange_bind(destination="filed", source="docs", arguments=criteria)
        ch.exchange_unbind(destination="filed", source="docs", arguments=memo)
        conn.close()
    with ferryd("--data-dir", data) as port:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        ch = conn.channel()
        ch.confirm_delivery()
        for i, h in enumerate([{"format": "pdf"}, {"type": "report"}, {"type": "memo"}]):
            ch.basic_publish("docs", "", b"%d" % i, pika.BasicProperties(headers=h))
        got = []
        while True:
            m, _, body = ch.basic_get("filed", auto_ack=True)
            if m is None:
                break
            got.append(body)
        assert got == [b"0", b"1"]
        conn.close()
