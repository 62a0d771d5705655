"""Access control as pika sees it: requests the suite's ACL (interop/lib/ferryd.acl) refuses
close the channel with ACCESS_REFUSED (403); the connection and other channels carry on."""

import uuid

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker


def unique(prefix):
    return prefix + uuid.uuid4().hex[:8]


def assert_refused(excinfo):
    assert excinfo.value.reply_code == 403, excinfo.value
    assert "ACCESS_REFUSED" in excinfo.value.reply_text, excinfo.value
    assert "ACL denied" in excinfo.value.reply_text, excinfo.value


def test_denied_queue_declare_is_access_refused(conn):
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as e:
        ch.queue_declare(unique("acl-denied-"))
    assert_refused(e)
    # Only the channel was closed.
    ok = conn.channel()
    ok.queue_declare(unique("acl-allowed-"), auto_delete=True)


def test_denied_publish_is_access_refused(conn):
    ch = conn.channel()
    ch.confirm_delivery()
    # Allowed: another routing key on the same exchange.
    ch.basic_publish("", unique("acl-allowed."), b"fine")
    with pytest.raises(ChannelClosedByBroker) as e:
        ch.basic_publish("", unique("acl-no-publish."), b"refused")
    assert_refused(e)
    assert conn.is_open


def test_denied_consume_is_access_refused(conn, name):
    ch = conn.channel()
    queue = unique("acl-no-consume-")
    ch.queue_declare(queue, auto_delete=True)
    with pytest.raises(ChannelClosedByBroker) as e:
        ch.basic_consume(queue, lambda *args: None)
    assert_refused(e)
    # A permitted consumer on a new channel still gets its messages.
    ok = conn.channel()
    ok.queue_declare(name, auto_delete=True)
    ok.basic_publish("", name, b"hello")
    method, _props, body = next(ok.consume(name, inactivity_timeout=5))
    assert body == b"hello"
    ok.cancel()
