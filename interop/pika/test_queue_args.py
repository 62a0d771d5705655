"""RabbitMQ queue arguments: TTL, dead-lettering, length limits."""

import time

import pika

from conftest import drain


def test_rejected_messages_are_dead_lettered(ch, name):
    ch.exchange_declare(name + "-dlx", "fanout")
    dead = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(dead, name + "-dlx")
    ch.queue_declare(name, arguments={"x-dead-letter-exchange": name + "-dlx"})
    ch.basic_publish("", name, b"bad")
    m, _, _ = ch.basic_get(name)
    ch.basic_reject(m.delivery_tag, requeue=False)
    m, _, body = ch.basic_get(dead, auto_ack=True)
    assert body == b"bad"
    ch.queue_delete(name)
    ch.exchange_delete(name + "-dlx")


def test_dead_letter_exchange_may_come_later_and_go(ch, name):
    # As in RabbitMQ: the dead letter exchange is looked up when a message dies.
    dlx = name + "-late-dlx"
    ch.queue_declare(name, arguments={"x-dead-letter-exchange": dlx})

    def reject(body):
        ch.basic_publish("", name, body)
        m, _, _ = ch.basic_get(name)
        ch.basic_reject(m.delivery_tag, requeue=False)

    reject(b"dropped: no exchange yet")
    ch.exchange_declare(dlx, "fanout")
    dead = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(dead, dlx)
    reject(b"dead-lettered")
    ch.exchange_delete(dlx)
    reject(b"dropped: exchange deleted")
    assert drain(ch, dead, timeout=0.5) == [b"dead-lettered"]
    assert ch.queue_declare(name, passive=True).method.message_count == 0
    ch.queue_delete(name)


def test_per_message_expiration(ch, name):
    ch.queue_declare(name)
    ch.basic_publish("", name, b"short", pika.BasicProperties(expiration="100"))
    ch.basic_publish("", name, b"long", pika.BasicProperties(expiration="60000"))
    time.sleep(0.3)
    assert drain(ch, name, timeout=0.5) == [b"long"]
    ch.queue_delete(name)


def test_queue_ttl_and_dead_letter_routing_key(ch, name):
    ch.exchange_declare(name + "-dlx", "direct")
    dead = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(dead, name + "-dlx", "dead")
    ch.queue_declare(name, arguments={"x-message-ttl": 100,
                                      "x-dead-letter-exchange": name + "-dlx",
                                      "x-dead-letter-routing-key": "dead"})
    ch.basic_publish("", name, b"soon-gone")
    time.sleep(0.3)
    assert ch.queue_declare(name, passive=True).method.message_count == 0
    # As in RabbitMQ, an expired message is dead-lettered, under the configured key.
    m, _, body = None, None, None
    for _ in range(30):
        m, _, body = ch.basic_get(dead, auto_ack=True)
        if m is not None:
            break
        time.sleep(0.1)
    assert body == b"soon-gone" and m.routing_key == "dead"
    # Rejection dead-letters under the configured key.
    ch.queue_purge(name)
    ch.queue_delete(name)
    ch.queue_declare(name, arguments={"x-dead-letter-exchange": name + "-dlx",
                                      "x-dead-letter-routing-key": "dead"})
    ch.basic_publish("", name, b"rejected")
    m, _, _ = ch.basic_get(name)
    ch.basic_nack(m.delivery_tag, requeue=False)
    m, _, body = ch.basic_get(dead, auto_ack=True)
    assert body == b"rejected" and m.routing_key == "dead"
    ch.queue_delete(name)
    ch.exchange_delete(name + "-dlx")


def test_max_length_drops_head_by_default(ch, name):
    ch.queue_declare(name, arguments={"x-max-length": 2})
    for b in [b"1", b"2", b"3"]:
        ch.basic_publish("", name, b)
    assert drain(ch, name, timeout=0.5) == [b"2", b"3"]
    ch.queue_delete(name)


def test_max_length_counts_ready_messages_only(ch, name):
    # As in RabbitMQ: unacknowledged messages do not count towards x-max-length.
    ch.queue_declare(name, arguments={"x-max-length": 2})
    for b in [b"1", b"2"]:
        ch.basic_publish("", name, b)
    held = [ch.basic_get(name)[0] for _ in range(2)]
    for b in [b"3", b"4", b"5"]:
        ch.basic_publish("", name, b)
    assert drain(ch, name, timeout=0.5) == [b"4", b"5"]
    for m in held:
        ch.basic_ack(m.delivery_tag)
    ch.queue_delete(name)


def test_max_length_bytes_counts_bodies_only(ch, name):
    # As in RabbitMQ: properties and headers do not count towards x-max-length-bytes.
    ch.queue_declare(name, arguments={"x-max-length-bytes": 10})
    props = pika.BasicProperties(content_type="text/plain", headers={"padding": "x" * 40})
    for b in [b"11111", b"22222", b"33333"]:
        ch.basic_publish("", name, b, properties=props)
    assert drain(ch, name, timeout=0.5) == [b"22222", b"33333"]
    ch.queue_delete(name)


def test_single_active_consumer(connect, name):
    conn = connect()
    ch = conn.channel()
    ch.queue_declare(name, arguments={"x-single-active-consumer": True})
    got = {"a": 0, "b": 0}
    ch.basic_consume(name, lambda c, m, p, b: got.__setitem__("a", got["a"] + 1), auto_ack=True)
    ch.basic_consume(name, lambda c, m, p, b: got.__setitem__("b", got["b"] + 1), auto_ack=True)
    for i in range(10):
        ch.basic_publish("", name, b"%d" % i)
    deadline = time.time() + 3
    while got["a"] + got["b"] < 10 and time.time() < deadline:
        conn.process_data_events(time_limit=0.1)
    assert got == {"a": 10, "b": 0}
    ch.queue_delete(name)
