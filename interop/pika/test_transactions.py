"""AMQP 0-9-1 transactions (tx.select / commit / rollback) with RabbitMQ's semantics."""

import pika
import pytest


def count(ch, queue):
    return ch.queue_declare(queue, passive=True).method.message_count


def test_publishes_take_effect_at_commit(connect, name):
    ch = connect().channel()
    observer = connect().channel()
    ch.queue_declare(name)
    ch.tx_select()
    ch.basic_publish("", name, b"one")
    ch.basic_publish("", name, b"two")
    assert count(observer, name) == 0
    ch.tx_commit()
    assert count(observer, name) == 2
    ch.basic_publish("", name, b"rolled-back")
    ch.tx_rollback()
    ch.tx_commit()
    assert count(observer, name) == 2
    ch.queue_delete(name)


def test_acks_take_effect_at_commit_and_rollback_keeps_them_unacked(connect, name):
    setup = connect().channel()
    setup.queue_declare(name)
    for body in (b"a", b"b"):
        setup.basic_publish("", name, body)
    conn = connect()
    ch = conn.channel()
    ch.tx_select()
    a, _, _ = ch.basic_get(name)
    b, _, _ = ch.basic_get(name)
    ch.basic_ack(b.delivery_tag, multiple=True)
    ch.tx_rollback()
    # Rolled back: both still unacknowledged (not redelivered meanwhile).
    assert count(setup, name) == 0
    ch.basic_ack(a.delivery_tag)
    ch.tx_commit()
    ch.basic_ack(b.delivery_tag)  # acked but never committed
    ch.close()
    m, _, body = setup.basic_get(name, auto_ack=True)
    assert body == b"b" and m.redelivered
    assert setup.basic_get(name, auto_ack=True) == (None, None, None)
    setup.queue_delete(name)


def test_rejects_inside_a_transaction_dead_letter_at_commit(connect, name):
    ch = connect().channel()
    ch.exchange_declare(name + "-dlx", "fanout")
    dead = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(dead, name + "-dlx")
    ch.queue_declare(name, arguments={"x-dead-letter-exchange": name + "-dlx"})
    ch.basic_publish("", name, b"bad")
    ch.tx_select()
    m, _, _ = ch.basic_get(name)
    ch.basic_reject(m.delivery_tag, requeue=False)
    assert count(ch, dead) == 0
    ch.tx_commit()
    assert count(ch, dead) == 1
    ch.queue_delete(name)
    ch.exchange_delete(name + "-dlx")


def test_transactions_and_confirms_exclude_each_other(connect):
    conn = connect()
    ch = conn.channel()
    ch.tx_select()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.confirm_delivery()
    assert e.value.reply_code == 406
    ch = conn.channel()
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.tx_select()
    assert e.value.reply_code == 406
    assert conn.is_open
