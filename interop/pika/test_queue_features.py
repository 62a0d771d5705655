"""Priority queues, x-expires, exchange-to-exchange bindings and x-death headers."""

import time

import pika
import pytest

from conftest import drain


def test_priority_queue_delivers_highest_first(ch, name):
    ch.queue_declare(name, arguments={"x-max-priority": 9})
    for body, priority in [(b"low", 1), (b"high", 9), (b"mid", 5), (b"high-2", 9), (b"none", None)]:
        ch.basic_publish("", name, body, pika.BasicProperties(priority=priority))
    assert drain(ch, name, timeout=0.5) == [b"high", b"high-2", b"mid", b"low", b"none"]
    ch.queue_delete(name)


def test_priority_queue_requeues_in_place(ch, name):
    ch.queue_declare(name, arguments={"x-max-priority": 5})
    for body, priority in [(b"a", 5), (b"b", 5), (b"c", 1)]:
        ch.basic_publish("", name, body, pika.BasicProperties(priority=priority))
    m, _, body = ch.basic_get(name)
    assert body == b"a"
    ch.basic_publish("", name, b"d", pika.BasicProperties(priority=5))
    ch.basic_nack(m.delivery_tag, requeue=True)
    assert drain(ch, name, timeout=0.5) == [b"a", b"b", b"d", b"c"]
    ch.queue_delete(name)


def test_invalid_priority_and_expires_are_406(conn, name):
    for args in ({"x-max-priority": 256}, {"x-expires": 0}, {"x-expires": -1}):
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
            ch.queue_declare(name, arguments=args)
        assert e.value.reply_code == 406, args


def test_x_expires_deletes_an_unused_queue(connect, name):
    ch = connect().channel()
    ch.queue_declare(name, arguments={"x-expires": 300})
    ch.basic_publish("", name, b"gone-with-the-queue")
    time.sleep(0.15)
    ch.basic_get(name)  # a basic.get renews the lease (and takes the message)
    time.sleep(0.2)
    ch.queue_declare(name, passive=True)  # still there: used 0.2 s ago
    time.sleep(0.6)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare(name, passive=True)
    assert e.value.reply_code == 404


def test_x_expires_waits_while_consumed(connect, name):
    ch = connect().channel()
    ch.queue_declare(name, arguments={"x-expires": 200})
    tag = ch.basic_consume(name, lambda *a: None)
    ch.connection.sleep(0.5)
    ch.queue_declare(name, passive=True)
    ch.basic_cancel(tag)
    time.sleep(0.5)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker):
        ch.queue_declare(name, passive=True)


def test_exchange_to_exchange_bindings(ch, name):
    src, dst = name + "-src", name + "-dst"
    ch.exchange_declare(src, "topic")
    ch.exchange_declare(dst, "direct")
    ch.queue_declare(name)
    ch.exchange_bind(destination=dst, source=src, routing_key="logs.#")
    ch.queue_bind(name, dst, "logs.error")
    ch.basic_publish(src, "logs.error", b"routed")
    ch.basic_publish(src, "logs.info", b"dst-misses")
    ch.basic_publish(src, "audit.error", b"src-misses")
    assert drain(ch, name, timeout=0.5) == [b"routed"]
    # A cycle does not loop, and a second path does not duplicate.
    ch.exchange_bind(destination=src, source=dst, routing_key="logs.error")
    ch.queue_bind(name, src, "logs.error")
    ch.basic_publish(src, "logs.error", b"once")
    assert drain(ch, name, timeout=0.5) == [b"once"]
    ch.exchange_unbind(destination=dst, source=src, routing_key="logs.#")
    ch.queue_unbind(name, src, "logs.error")
    ch.basic_publish(src, "logs.error", b"unbound")
    assert drain(ch, name, timeout=0.5) == []
    ch.queue_delete(name)
    ch.exchange_delete(src)
    ch.exchange_delete(dst)


def test_auto_delete_source_goes_with_its_last_exchange_binding(ch, name):
    src, dst = name + "-src", name + "-dst"
    ch.exchange_declare(src, "fanout", auto_delete=True)
    ch.exchange_declare(dst, "fanout")
    ch.exchange_bind(destination=dst, source=src)
    ch.exchange_unbind(destination=dst, source=src)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.exchange_declare(src, "fanout", passive=True)
    assert e.value.reply_code == 404


def test_exchange_bindings_under_one_key_are_told_apart_by_their_arguments(ch, name):
    # As RabbitMQ's queue bindings, its exchange-to-exchange bindings count their arguments:
    # a headers source bound to one destination twice under the same key forwards what
    # either matches, and an unbind names the one it removes.
    src, dst = name + "-src", name + "-dst"
    ch.exchange_declare(src, "headers", auto_delete=True)
    ch.exchange_declare(dst, "fanout")
    ch.queue_declare(name)
    ch.queue_bind(name, dst)
    pdf = {"x-match": "all", "format": "pdf"}
    report = {"x-match": "all", "type": "report"}
    ch.exchange_bind(destination=dst, source=src, arguments=pdf)
    ch.exchange_bind(destination=dst, source=src, arguments=report)

    def send(*headers):
        for i, h in enumerate(headers):
            ch.basic_publish(src, "", b"%d" % i, pika.BasicProperties(headers=h))

    send({"format": "pdf"}, {"type": "report"}, {"format": "pdf", "type": "report"}, {"x": 1})
    assert drain(ch, name, timeout=0.5) == [b"0", b"1", b"2"]
    # Without the arguments the unbind names no binding: both stay.
    ch.exchange_unbind(destination=dst, source=src)
    ch.exchange_unbind(destination=dst, source=src, arguments=pdf)
    send({"format": "pdf"}, {"type": "report"})
    assert drain(ch, name, timeout=0.5) == [b"1"]
    # The last one goes, and the auto-delete source with it.
    ch.exchange_unbind(destination=dst, source=src, arguments=report)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.exchange_declare(src, "headers", passive=True)
    assert e.value.reply_code == 404


def test_dead_letters_carry_x_death(ch, name):
    dlq = name + "-dlq"
    ch.queue_declare(dlq)
    ch.queue_declare(name, arguments={"x-dead-letter-exchange": "",
                                      "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", name, b"bad", pika.BasicProperties(headers={"app": "kept"},
                                                            expiration="60000"))
    m, _, _ = ch.basic_get(name)
    ch.basic_reject(m.delivery_tag, requeue=False)
    m, props, body = ch.basic_get(dlq, auto_ack=True)
    assert body == b"bad"
    assert props.expiration is None
    h = props.headers
    assert h["app"] == "kept"
    [death] = h["x-death"]
    assert death["queue"] == name and death["reason"] == "rejected"
    assert death["count"] == 1 and death["exchange"] == ""
    assert death["routing-keys"] == [name]
    assert death["original-expiration"] == "60000"
    assert h["x-first-death-queue"] == name
    assert h["x-first-death-reason"] == "rejected"
    assert h["x-first-death-exchange"] == ""
    # A message dead-lettered for length (drop-head) says maxlen.
    ch.queue_purge(dlq)
    short = name + "-short"
    ch.queue_declare(short, arguments={"x-max-length": 1, "x-dead-letter-exchange": "",
                                       "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", short, b"first")
    ch.basic_publish("", short, b"second")
    _, props, body = ch.basic_get(dlq, auto_ack=True)
    assert body == b"first" and props.headers["x-death"][0]["reason"] == "maxlen"
    for q in (name, dlq, short):
        ch.queue_delete(q)


def test_a_message_back_more_often_than_x_delivery_limit_is_dead_lettered(ch, name):
    # RabbitMQ's poison-message handling (quorum queues' x-delivery-limit).
    dlq = name + "-dlq"
    ch.queue_declare(dlq)
    ch.queue_declare(name, arguments={"x-delivery-limit": 2, "x-dead-letter-exchange": "",
                                      "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", name, b"poison")
    for attempt in range(3):
        m, props, body = ch.basic_get(name)
        assert body == b"poison", attempt
        assert m.redelivered == (attempt > 0)
        # Returns so far, as RabbitMQ's quorum queues count them; none on the first.
        assert (props.headers or {}).get("x-delivery-count") == (attempt or None)
        ch.basic_nack(m.delivery_tag, requeue=True)
    # Returned a third time, over the limit of 2: no longer on its queue.
    assert ch.basic_get(name) == (None, None, None)
    m, props, body = ch.basic_get(dlq, auto_ack=True)
    assert body == b"poison"
    [death] = props.headers["x-death"]
    assert death["queue"] == name and death["reason"] == "delivery_limit"
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare(name + "-bad", arguments={"x-delivery-limit": "many"})
    assert e.value.reply_code == 406
    for q in (name, dlq):
        ch.connection.channel().queue_delete(q)


def test_a_quorum_queue_gives_up_after_rabbitmq_4s_default_of_20_returns(ch, name):
    ch.queue_declare(name, durable=True, arguments={"x-queue-type": "quorum"})
    ch.basic_publish("", name, b"poison")
    for attempt in range(21):
        m, props, body = ch.basic_get(name)
        assert body == b"poison", attempt
        assert (props.headers or {}).get("x-delivery-count") == (attempt or None)
        ch.basic_nack(m.delivery_tag, requeue=True)
    # The 21st return is over the limit: dropped (no dead letter exchange).
    assert ch.basic_get(name) == (None, None, None)
    ch.queue_delete(name)
