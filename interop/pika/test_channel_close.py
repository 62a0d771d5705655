"""A client's channel.close crossing the broker's channel.close (issue 16), through pika.

The frame-level version is in test_wire_conformance.py."""

import pika


def test_channel_close_crossing_a_broker_close_keeps_the_connection(conn, name):
    """basic.publish to a missing exchange, then channel.close at once: pika sends its close
    before it reads the broker's 404 close, answers that with close-ok, and waits for the
    close-ok to its own close. RabbitMQ answers the crossing close with close-ok and keeps
    the connection; it must not close it for the client's close-ok (504 "channel is not
    open")."""
    bystander = conn.channel()
    bystander.queue_declare(name)
    ch = conn.channel()
    ch.basic_publish("missing-" + name, "k", b"nowhere")
    try:
        ch.close()
    except pika.exceptions.ChannelClosedByBroker as e:
        assert e.reply_code == 404  # pika may report the broker's close instead of its own
    assert ch.is_closed
    # Synchronous methods on the other channel: a connection.close would surface here.
    bystander.basic_publish("", name, b"still here")
    _, _, body = bystander.basic_get(name, auto_ack=True)
    assert body == b"still here"
    assert conn.is_open
    # The channel number is free again.
    again = conn.channel(channel_number=ch.channel_number)
    again.queue_declare(name, passive=True)
    bystander.queue_delete(name)
