"""exchange.declare of an existing exchange must match it (issue 16): RabbitMQ compares type,
durable, auto-delete, internal and the alternate-exchange argument (no other argument), and
refuses a mismatch with 406 PRECONDITION_FAILED, closing only the channel."""

import pika
import pytest

# (first declare, redeclare): keyword arguments to exchange_declare; "AE1"/"AE2" name two
# alternate exchanges that exist (a missing alternate exchange is another question).
MISMATCHES = {
    "durable": ({}, {"durable": True}),
    "not-durable": ({"durable": True}, {}),
    "auto-delete": ({}, {"auto_delete": True}),
    "internal": ({}, {"internal": True}),
    "alternate-exchange-added": ({}, {"arguments": {"alternate-exchange": "AE1"}}),
    "alternate-exchange-changed": ({"arguments": {"alternate-exchange": "AE1"}},
                                   {"arguments": {"alternate-exchange": "AE2"}}),
    "alternate-exchange-dropped": ({"arguments": {"alternate-exchange": "AE1"}}, {}),
}


def with_names(kwargs, name):
    args = kwargs.get("arguments")
    if args and "alternate-exchange" in args:
        ae = {"AE1": name + "-ae1", "AE2": name + "-ae2"}[args["alternate-exchange"]]
        kwargs = dict(kwargs, arguments=dict(args, **{"alternate-exchange": ae}))
    return kwargs


@pytest.fixture
def exchanges(connect, name):
    """Declares the alternate exchanges; deletes them and `name` afterwards (on a connection
    of its own: the test's may have been closed)."""
    ch = connect().channel()
    ch.exchange_declare(name + "-ae1", "fanout")
    ch.exchange_declare(name + "-ae2", "fanout")
    yield
    for x in (name, name + "-ae1", name + "-ae2"):
        ch.exchange_delete(x)


@pytest.mark.parametrize("first,second", MISMATCHES.values(), ids=MISMATCHES.keys())
def test_redeclare_with_other_properties_is_406(conn, name, exchanges, first, second):
    ch = conn.channel()
    ch.exchange_declare(name, "direct", **with_names(first, name))
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.exchange_declare(name, "direct", **with_names(second, name))
    assert e.value.reply_code == 406, e.value
    assert conn.is_open
    # The exchange is as first declared: the same declaration still succeeds.
    conn.channel().exchange_declare(name, "direct", **with_names(first, name))


def test_equivalent_redeclare_succeeds(conn, name, exchanges):
    """The same properties again, and arguments RabbitMQ does not compare (anything but
    alternate-exchange) differing, are no mismatch."""
    ch = conn.channel()
    props = {"durable": True, "auto_delete": True, "internal": True}
    ch.exchange_declare(name, "topic", **props,
                        arguments={"alternate-exchange": name + "-ae1", "x-note": "a"})
    ch.exchange_declare(name, "topic", **props,
                        arguments={"alternate-exchange": name + "-ae1", "x-note": "b"})
    ch.exchange_declare(name, passive=True)
    assert ch.is_open
