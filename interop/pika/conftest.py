"""Fixtures: a ferryd on 127.0.0.1:$FERRY_PORT (run.sh starts one) and pika connections."""

import os
import uuid

import pika
import pytest


@pytest.fixture(scope="session")
def params():
    port = int(os.environ["FERRY_PORT"])
    return pika.ConnectionParameters(
        host="127.0.0.1",
        port=port,
        credentials=pika.PlainCredentials("guest", "guest"),
        heartbeat=30,
        blocked_connection_timeout=10,
    )


@pytest.fixture
def connect(params):
    opened = []

    def open_connection():
        c = pika.BlockingConnection(params)
        opened.append(c)
        return c

    yield open_connection
    for c in opened:
        if c.is_open:
            c.close()


@pytest.fixture
def conn(connect):
    return connect()


@pytest.fixture
def ch(conn):
    return conn.channel()


@pytest.fixture
def name():
    """A unique name for queues and exchanges, so tests never share state."""
    return "t-" + uuid.uuid4().hex[:12]


def drain(ch, queue, timeout=1.0, ack=True):
    """Consumes until the queue stays quiet for `timeout` seconds; returns the bodies."""
    got = []
    for method, _props, body in ch.consume(queue, inactivity_timeout=timeout):
        if method is None:
            break
        got.append(body)
        if ack:
            ch.basic_ack(method.delivery_tag)
    ch.cancel()
    return got
