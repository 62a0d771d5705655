"""Fixtures: ferryd's AMQP port ($FERRY_PORT) and management port ($FERRY_MGMT_PORT)."""

import base64
import os
import urllib.request

import pika
import pytest


@pytest.fixture(scope="session")
def amqp():
    params = pika.ConnectionParameters(
        host="127.0.0.1",
        port=int(os.environ["FERRY_PORT"]),
        credentials=pika.PlainCredentials("guest", "guest"),
    )
    conn = pika.BlockingConnection(params)
    yield conn
    if conn.is_open:
        conn.close()


def fetch(path):
    """GET a management path as guest; returns (status, content type, text)."""
    url = f"http://127.0.0.1:{os.environ['FERRY_MGMT_PORT']}{path}"
    req = urllib.request.Request(url)
    token = base64.b64encode(b"guest:guest").decode()
    req.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode("utf-8")
