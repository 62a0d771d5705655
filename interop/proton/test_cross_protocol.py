"""AMQP 1.0 (proton) and 0-9-1 (pika) on one queue: properties mapped as
docs/PROTOCOL-MAPPING.md says."""

import pika
from proton import Message


def test_proton_to_pika(conn, queue, amqp091):
    conn.create_sender(queue).send(
        Message(
            body=b"from 1.0",
            id="m-7",
            correlation_id="c-7",
            reply_to="answers",
            content_type="application/octet-stream",
            durable=True,
            priority=6,
            ttl=60,
            properties={"colour": "red", "n": 5},
        )
    )
    method, props, body = amqp091.basic_get(queue, auto_ack=True)
    assert body == b"from 1.0"
    assert props.message_id == "m-7"
    assert props.correlation_id == "c-7"
    assert props.reply_to == "answers"
    assert props.content_type == "application/octet-stream"
    assert props.delivery_mode == 2 and props.priority == 6
    assert props.expiration == "60000"
    assert props.headers["colour"] == "red" and props.headers["n"] == 5


def test_proton_text_reaches_pika_as_plain_text(conn, queue, amqp091):
    conn.create_sender(queue).send(Message(body="text body"))
    _, props, body = amqp091.basic_get(queue, auto_ack=True)
    assert body == b"text body"
    assert props.content_type == "text/plain"


def test_pika_to_proton(conn, queue, amqp091):
    amqp091.basic_publish(
        "",
        queue,
        b"from 0-9-1",
        pika.BasicProperties(
            message_id="m-8",
            correlation_id="c-8",
            reply_to="answers",
            content_type="text/plain",
            delivery_mode=2,
            priority=3,
            headers={"colour": "green", "n": 9},
        ),
    )
    receiver = conn.create_receiver(queue)
    got = receiver.receive(timeout=5)
    receiver.accept()
    assert got.body == b"from 0-9-1"
    assert (got.id, got.correlation_id, got.reply_to) == ("m-8", "c-8", "answers")
    assert got.content_type == "text/plain"
    assert got.durable and got.priority == 3
    assert got.properties == {"colour": "green", "n": 9}
