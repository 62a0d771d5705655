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


def test_per_message_expiration(ch, name):
    ch.queue_declare(name)
    ch.basic_publish("", name, b"short", pika.BasicProperties(expiration="100"))
    ch.basic_publish("", name, b"long", pika.BasicProperties(expiration="60000"))
    time.sleep(0.3)
    assert drain(ch, name, timeout=0.5) == [b"long"]
    ch.queue_delete(name)
