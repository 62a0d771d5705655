#!/usr/bin/env python3
"""Writes the interop vectors that tests/proton_vectors.rs checks, using Qpid
Proton (python-qpid-proton, the Python binding of proton-c) as the reference
implementation:

  proton_values.txt    name, then the encoding of one value (proton.Data)
  proton_messages.txt  name, then Message.encode() of one message
  proton_frames.txt    the octets a proton client and a proton server send
                       each other over a whole connection (SASL, open, begin,
                       attach, flow, transfer, disposition, detach, end,
                       close), one line per write, "c2s" or "s2c" first

Each line is "<name> <hex>". The Rust test only reads these files; Python is
needed just to regenerate them:

  python3 -m venv /tmp/proton-venv
  /tmp/proton-venv/bin/pip install python-qpid-proton==0.40.0
  /tmp/proton-venv/bin/python crates/amqp1/tests/vectors/gen_proton_vectors.py

The expected values are written out by hand in the Rust test, from what this
script asks proton to encode, so that the two are checked against each other.
"""

import os
import uuid

from proton import (
    UNDESCRIBED,
    Array,
    Collector,
    Condition,
    Connection,
    Data,
    Delivery,
    Described,
    Message,
    Terminus,
    Transport,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

HERE = os.path.dirname(os.path.abspath(__file__))
UUID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def encode(obj):
    d = Data()
    d.put_object(obj)
    return d.encode()


VALUES = [
    ("null", None),
    ("true", True),
    ("false", False),
    ("ubyte", ubyte(7)),
    ("ushort", ushort(300)),
    ("uint_zero", uint(0)),
    ("uint_small", uint(255)),
    ("uint_big", uint(70000)),
    ("ulong_zero", ulong(0)),
    ("ulong_small", ulong(5)),
    ("ulong_big", ulong(1 << 40)),
    ("byte", byte(-1)),
    ("short", short(-300)),
    ("int_small", int32(-5)),
    ("int_big", int32(1 << 20)),
    ("long_small", -3),
    ("long_big", 1 << 40),
    ("float", float32(1.5)),
    ("double", -2.25),
    ("decimal32", decimal32(0x01020304)),
    ("decimal64", decimal64(0x0102030405060708)),
    ("decimal128", decimal128(bytes(range(16)))),
    ("char", char("é")),
    ("char_astral", char("\U0001F600")),
    ("timestamp", timestamp(1700000000123)),
    ("uuid", UUID),
    ("binary", b"\x00\x01\xff"),
    ("binary_long", bytes(i % 256 for i in range(300))),
    ("string", "grüße"),
    ("string_long", "a" * 300),
    ("symbol", symbol("amqp:accepted:list")),
    ("symbol_long", symbol("s" * 256)),
    ("list_empty", []),
    ("list_mixed", [1, "a", None, True]),
    ("list_long", [uint(i) for i in range(300)]),
    ("map", {"k": 1, symbol("s"): None}),
    ("map_nested", {"outer": {"inner": [1, 2]}}),
    ("array_int", Array(UNDESCRIBED, Data.INT, 1, 2, 3)),
    ("array_symbol", Array(UNDESCRIBED, Data.SYMBOL, symbol("a"), symbol("bc"))),
    ("array_bool", Array(UNDESCRIBED, Data.BOOL, True, False)),
    ("array_ulong", Array(UNDESCRIBED, Data.ULONG, 0, 1 << 33)),
    ("array_empty", Array(UNDESCRIBED, Data.STRING)),
    ("described_ulong", Described(ulong(0x24), [])),
    ("described_symbol", Described(symbol("x:y"), [1, "a"])),
    ("array_described", Array(symbol("d"), Data.INT, 4, 5)),
]

FULL = Message(
    id=uuid.UUID(int=1),
    correlation_id="corr",
    user_id=b"guest",
    address="queue-a",
    reply_to="reply-q",
    subject="subj",
    content_type="text/plain",
    content_encoding="utf-8",
    expiry_time=1700000001.5,
    creation_time=1700000000.25,
    group_id="g",
    group_sequence=3,
    reply_to_group_id="rg",
    durable=True,
    priority=9,
    ttl=60.0,
    first_acquirer=True,
    delivery_count=2,
    instructions={symbol("x-opt-delivery"): "di"},
    annotations={symbol("x-opt-annot"): 42, ulong(77): "by-number"},
    properties={"colour": "red", "n": 5},
    body={"k": [1, 2]},
)

MESSAGES = [
    ("string_body", Message(body="hello")),
    ("binary_value_body", Message(body=b"hello")),
    ("data_body", Message(body=b"hello", inferred=True)),
    ("sequence_body", Message(body=[1, 2], inferred=True)),
    ("no_body", Message(body=None)),
    ("ulong_id", Message(id=ulong(12345), body=None)),
    ("binary_id", Message(id=b"\x01\x02", correlation_id=uuid.UUID(int=2), body=None)),
    ("full", FULL),
]


def pump(client, server, log):
    moved = True
    while moved:
        moved = False
        for src, dst, name in ((client, server, "c2s"), (server, client, "s2c")):
            n = src.pending()
            if n > 0:
                out = src.peek(n)
                src.pop(n)
                log.append((name, out))
                dst.push(out)
                moved = True


def links(conn):
    link = conn.link_head(0)
    while link:
        yield link
        link = link.next(0)


def connection_frames():
    """A proton client and server talking: SASL ANONYMOUS, then a session
    with a sending link (two messages, one larger than the frame size), a
    receiving link with source options, and a coordinator link; the server
    accepts, rejects, declares, detaches with an error, ends and closes."""
    log = []
    client = Connection()
    client.container = "client-1"
    client.hostname = "ferry.example"
    client.offered_capabilities = [symbol("cap-a")]
    client.properties = {symbol("product"): "proton-vectors"}
    ct = Transport()
    ct.max_frame_size = 512
    ct.idle_timeout = 30.0
    ct.sasl().allowed_mechs("ANONYMOUS")
    ct.bind(client)

    server = Connection()
    server.container = "server-1"
    st = Transport(Transport.SERVER)
    st.max_frame_size = 1024
    st.sasl().allowed_mechs("ANONYMOUS")
    st.bind(server)
    events = Collector()
    server.collect(events)

    client.open()
    ssn = client.session()
    ssn.open()
    snd = ssn.sender("link-1")
    snd.target.address = "queue-a"
    snd.source.address = "src"
    snd.open()
    rcv = ssn.receiver("link-2")
    rcv.source.address = "queue-b"
    rcv.source.durability = Terminus.DELIVERIES
    rcv.source.expiry_policy = Terminus.EXPIRE_NEVER
    rcv.source.distribution_mode = Terminus.DIST_MODE_COPY
    rcv.source.timeout = 60
    rcv.source.capabilities.put_array(False, Data.SYMBOL)
    rcv.source.capabilities.enter()
    rcv.source.capabilities.put_symbol("queue")
    rcv.source.capabilities.exit()
    rcv.open()
    rcv.flow(10)
    txn = ssn.sender("txn-ctl")
    txn.target.type = Terminus.COORDINATOR
    txn.target.capabilities.put_array(False, Data.SYMBOL)
    txn.target.capabilities.enter()
    txn.target.capabilities.put_symbol("amqp:local-transactions")
    txn.target.capabilities.exit()
    txn.open()
    pump(ct, st, log)

    server.open()
    server.session_head(0).open()
    for link in links(server):
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.open()
        if link.is_receiver:
            link.flow(5)
    pump(ct, st, log)

    hello = Message(
        body=b"hello", inferred=True, durable=True, id=ulong(7), address="queue-a", subject="greeting"
    )
    snd.delivery(b"tag-1")
    snd.send(hello.encode())
    snd.advance()
    snd.delivery(b"tag-2")
    snd.send(Message(body=b"x" * 1500, inferred=True).encode())
    snd.advance()
    txn.delivery(b"txn-tag")
    txn.send(Message(body=Described(ulong(0x31), [])).encode())
    txn.advance()
    pump(ct, st, log)

    receivers = [l for l in links(server) if l.is_receiver]
    for link in receivers:
        while link.current:
            d = link.current
            while link.recv(4096):
                pass
            if d.tag == "tag-1":
                d.update(Delivery.ACCEPTED)
            elif d.tag == "tag-2":
                d.local.condition = Condition("amqp:invalid-field", "too big")
                d.update(Delivery.REJECTED)
            else:
                # declared(txn-id)
                d.local.data = [b"txn-1"]
                d.update(0x33)
            # Settling the current delivery also advances the link.
            d.settle()
    pump(ct, st, log)

    for link in receivers:
        if link.name == "link-1":
            link.close()
            link.condition = Condition("amqp:resource-deleted", "queue gone")
    for link in links(server):
        if link.name == "link-1":
            link.condition = Condition("amqp:resource-deleted", "queue gone")
            link.close()
    pump(ct, st, log)
    server.session_head(0).close()
    server.condition = Condition("connection:forced", "shutting down")
    server.close()
    pump(ct, st, log)
    return log


def main():
    with open(os.path.join(HERE, "proton_values.txt"), "w") as f:
        for name, obj in VALUES:
            f.write(f"{name} {encode(obj).hex()}\n")
    with open(os.path.join(HERE, "proton_messages.txt"), "w") as f:
        for name, msg in MESSAGES:
            f.write(f"{name} {msg.encode().hex()}\n")
    with open(os.path.join(HERE, "proton_frames.txt"), "w") as f:
        for name, chunk in connection_frames():
            f.write(f"{name} {chunk.hex()}\n")


if __name__ == "__main__":
    main()
