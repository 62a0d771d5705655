"""Queues, exchanges, properties, outcomes and addresses with python-qpid-proton's
BlockingConnection."""

import time

import pytest
from proton import Message
from proton.reactor import AtMostOnce, Copy, DynamicNodeProperties, Selector
from proton.utils import LinkDetached, SendException

from conftest import depth


def test_a_queue_round_trip_keeps_properties(conn, queue, amqp091):
    sender = conn.create_sender(queue)
    sent = Message(
        body="hello",
        id="m-1",
        correlation_id=42,
        subject="greeting",
        reply_to="replies",
        content_type="text/plain",
        durable=True,
        priority=7,
        properties={"colour": "blue", "count": 3, "ok": True},
        annotations={"x-opt-origin": "proton"},
    )
    sender.send(sent)
    assert depth(amqp091, queue) == 1
    receiver = conn.create_receiver(queue)
    got = receiver.receive(timeout=5)
    receiver.accept()
    assert got.body == "hello"
    assert (got.id, got.correlation_id, got.subject) == ("m-1", 42, "greeting")
    assert (got.reply_to, got.content_type) == ("replies", "text/plain")
    assert got.durable and got.priority == 7
    assert got.properties == {"colour": "blue", "count": 3, "ok": True}
    assert got.annotations["x-opt-origin"] == "proton"
    assert got.delivery_count == 0
    assert depth(amqp091, queue) == 0


def test_topics_route_by_subject_and_binding_key(conn):
    news = conn.create_receiver("amq.topic/news.*")
    everything = conn.create_receiver("amq.topic")
    by_subject = conn.create_sender("amq.topic")
    by_subject.send(Message(subject="news.today", body="n1"))
    by_subject.send(Message(subject="sport.today", body="s1"))
    keyed = conn.create_sender("amq.topic/news.tomorrow")
    keyed.send(Message(body="n2"))
    assert [news.receive(timeout=5).body for _ in range(2)] == ["n1", "n2"]
    assert sorted(everything.receive(timeout=5).body for _ in range(3)) == ["n1", "n2", "s1"]
    news.accept()
    everything.accept()
    with pytest.raises(Exception):
        news.receive(timeout=0.5)


def test_a_fanout_exchange_copies_to_every_receiver(conn):
    a = conn.create_receiver("amq.fanout")
    b = conn.create_receiver("/exchange/amq.fanout")
    conn.create_sender("amq.fanout").send(Message(body="both"))
    assert a.receive(timeout=5).body == "both"
    assert b.receive(timeout=5).body == "both"
    a.accept()
    b.accept()


def test_large_messages_cross_many_frames(conn, queue):
    body = bytes(range(256)) * 8192  # 2 MiB
    conn.create_sender(queue).send(Message(body=body))
    receiver = conn.create_receiver(queue)
    got = receiver.receive(timeout=10)
    receiver.accept()
    assert got.body == body


def test_many_messages_with_credit(conn, queue, amqp091):
    sender = conn.create_sender(queue)
    for i in range(500):
        sender.send(Message(body=f"m{i}"))
    receiver = conn.create_receiver(queue, credit=100)
    bodies = []
    for _ in range(500):
        bodies.append(receiver.receive(timeout=5).body)
        receiver.accept()
    assert bodies == [f"m{i}" for i in range(500)]
    assert depth(amqp091, queue) == 0


def test_ttl_expires_messages(conn, queue, amqp091):
    conn.create_sender(queue).send(Message(body="brief", ttl=0.1))
    time.sleep(0.3)
    assert depth(amqp091, queue) == 0


def test_outcomes(conn, queue, amqp091):
    conn.create_sender(queue).send(Message(body="m"))
    receiver = conn.create_receiver(queue)
    first = receiver.receive(timeout=5)
    assert first.delivery_count == 0
    receiver.release(delivered=False)  # released: not counted
    again = receiver.receive(timeout=5)
    assert again.delivery_count == 0
    # Proton's "delivered" release is modified without delivery-failed: back on the
    # queue, and (as the spec says) not counted either.
    receiver.release(delivered=True)
    third = receiver.receive(timeout=5)
    assert third.delivery_count == 0
    receiver.reject()
    time.sleep(0.2)
    assert depth(amqp091, queue) == 0


def test_at_most_once_receivers_get_settled_deliveries(conn, queue, amqp091):
    conn.create_sender(queue).send(Message(body="once"))
    receiver = conn.create_receiver(queue, options=AtMostOnce())
    assert receiver.receive(timeout=5).body == "once"
    time.sleep(0.2)
    assert depth(amqp091, queue) == 0


def test_browsing_leaves_messages_queued(conn, queue, amqp091):
    conn.create_sender(queue).send(Message(body="stay"))
    browser = conn.create_receiver(queue, options=Copy())
    assert browser.receive(timeout=5).body == "stay"
    browser.accept()
    assert depth(amqp091, queue) == 1


def test_request_reply_over_a_dynamic_queue(connect, queue):
    client, service = connect(), connect()
    replies = client.create_receiver(None, dynamic=True)
    reply_to = replies.remote_source.address
    assert reply_to
    client.create_sender(queue).send(Message(body="ping", reply_to=reply_to, correlation_id="c1"))
    requests = service.create_receiver(queue)
    request = requests.receive(timeout=5)
    requests.accept()
    # The service answers through the anonymous relay: the address is in the message.
    service.create_sender(None).send(
        Message(address=request.reply_to, body="pong", correlation_id=request.correlation_id)
    )
    reply = replies.receive(timeout=5)
    replies.accept()
    assert (reply.body, reply.correlation_id) == ("pong", "c1")


def test_dynamic_nodes_go_with_their_link(conn, amqp091091):
    import pika

    receiver = conn.create_receiver(
        None, dynamic=True, options=DynamicNodeProperties({"lifetime-policy": "delete-on-close"})
    )
    address = receiver.remote_source.address
    # The queue exists, exclusive to the 1.0 connection ...
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        amqp091091.channel().queue_declare(address, passive=True)
    assert e.value.reply_code == 405
    receiver.close()
    time.sleep(0.2)
    # ... until its link closes.
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        amqp091091.channel().queue_declare(address, passive=True)
    assert e.value.reply_code == 404


def test_the_relay_refuses_unknown_addresses(conn):
    sender = conn.create_sender(None)
    with pytest.raises(SendException):
        sender.send(Message(address="no-such-node", body="lost"))


def test_unknown_addresses_refuse_the_link(conn):
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver("no-such-queue")
    assert "not-found" in str(e.value)


def test_selectors_pick_what_a_receiver_gets(conn, queue, amqp091):
    # qpidd's own broker_1_0 selector test, through Proton's Selector filter: a receiver gets
    # what its selector matches; the rest stays queued.
    sender = conn.create_sender(queue)
    for sequence, colour, creature in [
        (1, "red", "dog"),
        (2, "black", "cat"),
        (3, "red", "squirrel"),
        (4, "grey", "squirrel"),
    ]:
        sender.send(
            Message(
                body="%s.%s" % (colour, creature),
                properties={"sequence": sequence, "colour": colour},
            )
        )
    selector = "colour IN ('red', 'grey') AND (sequence > 3 OR sequence = 1)"
    receiver = conn.create_receiver(queue, options=Selector(selector))
    got = []
    for _ in range(2):
        got.append(receiver.receive(timeout=5).body)
        receiver.accept()
    assert got == ["red.dog", "grey.squirrel"]
    receiver.close()
    assert depth(amqp091, queue) == 2
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver(queue, options=Selector("colour = "))
    assert "invalid-field" in str(e.value)
