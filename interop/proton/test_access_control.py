"""Access control as proton sees it: requests the suite's ACL (interop/lib/ferryd.acl)
refuses fail the link (consume) or the delivery (publish) with amqp:unauthorized-access;
the connection carries on."""

import uuid

import pytest
from proton import Message
from proton.utils import LinkDetached, SendException


def test_consuming_a_forbidden_queue_refuses_the_link(conn, amqp091):
    name = "acl-no-consume-" + uuid.uuid4().hex[:8]
    amqp091.queue_declare(name, auto_delete=True)
    with pytest.raises(LinkDetached) as e:
        conn.create_receiver(name)
    assert "unauthorized-access" in str(e.value)
    # The connection is still good.
    receiver = conn.create_receiver(None, dynamic=True)
    conn.create_sender(receiver.remote_source.address).send(Message(body="fine"))
    assert receiver.receive(timeout=5).body == "fine"


def test_publishing_to_a_forbidden_key_rejects_the_message(conn, amqp091):
    name = "acl-no-publish." + uuid.uuid4().hex[:8]
    amqp091.queue_declare(name, auto_delete=True)
    sender = conn.create_sender(name)
    with pytest.raises(SendException):
        sender.send(Message(body="denied"))
    amqp091.queue_delete(name)
