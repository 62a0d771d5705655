"""Fixtures: a ferryd on 127.0.0.1:$FERRY_PORT (run.sh starts one), proton connections, and
a pika channel to declare the queues 1.0 cannot (AMQP 1.0 has no queue declare)."""

import os
import uuid

import pika
import pytest
from proton.utils import BlockingConnection

PORT = int(os.environ["FERRY_PORT"])
URL = f"amqp://127.0.0.1:{PORT}"


@pytest.fixture
def connect():
    opened = []

    def open_connection(**kwargs):
        c = BlockingConnection(URL, timeout=10, **kwargs)
        opened.append(c)
        return c

    yield open_connection
    for c in opened:
        try:
            c.close()
        except Exception:
            pass


@pytest.fixture
def conn(connect):
    return connect()


@pytest.fixture
def amqp091091():
    """A pika connection (0-9-1), for what 1.0 has no words for."""
    c = pika.BlockingConnection(
        pika.ConnectionParameters(
            host="127.0.0.1",
            port=PORT,
            credentials=pika.PlainCredentials("guest", "guest"),
        )
    )
    yield c
    c.close()


@pytest.fixture
def amqp091(amqp091091):
    """A pika channel."""
    return amqp091091.channel()


@pytest.fixture
def name():
    """A unique name for queues, so tests never share state."""
    return "p-" + uuid.uuid4().hex[:12]


@pytest.fixture
def queue(amqp091, name):
    """A fresh queue (declared over 0-9-1), deleted afterwards."""
    amqp091.queue_declare(name)
    yield name
    amqp091.queue_delete(name)


def depth(channel, queue):
    return channel.queue_declare(queue, passive=True).method.message_count
