#!/usr/bin/env python3
"""Checks ferry's encodings (ferry_*.txt, written by tests/proton_vectors.rs)
with Qpid Proton:

  ferry_values.txt    each value, decoded by proton.Data and encoded again,
                      must equal proton's own encoding of the same value
                      (gen_proton_vectors.VALUES)
  ferry_messages.txt  likewise with proton.Message
  ferry_frames.txt    ferry's client side is pushed into a proton server
                      transport, ferry's server side into a proton client
                      transport; neither may report an error, and what they
                      saw (containers, links, the delivered message, the
                      disposition, the close) must be what ferry sent

Setup as in gen_proton_vectors.py; run:

  /tmp/proton-venv/bin/python crates/amqp1/tests/vectors/check_ferry_vectors.py

Prints one line per check and exits non-zero on the first failure.
"""

import os
import sys

from proton import Collector, Connection, Data, Delivery, Message, Transport

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_proton_vectors import HERE, MESSAGES, VALUES, encode  # noqa: E402

FAILED = []


def check(what, ok, detail=""):
    print(("ok    " if ok else "FAIL  ") + what + (f"  ({detail})" if detail and not ok else ""))
    if not ok:
        FAILED.append(what)


def read(name):
    with open(os.path.join(HERE, name)) as f:
        return [(n, bytes.fromhex(h)) for n, h in (line.split() for line in f if line.strip())]


def check_values():
    ferry = dict(read("ferry_values.txt"))
    for name, obj in VALUES:
        d = Data()
        d.decode(ferry[name])
        again = Data()
        again.put_object(d.get_object())
        check(f"value {name}", again.encode() == encode(obj), ferry[name].hex())


def check_messages():
    ferry = dict(read("ferry_messages.txt"))
    for name, msg in MESSAGES:
        m = Message()
        m.decode(ferry[name])
        check(f"message {name}", m.encode() == msg.encode(), ferry[name].hex())


def stream(direction):
    return b"".join(b for n, b in read("ferry_frames.txt") if n == direction)


def units(data):
    """Splits a stream into protocol headers and frames."""
    out = []
    while data:
        n = 8 if data.startswith(b"AMQP") else int.from_bytes(data[:4], "big")
        out.append(data[:n])
        data = data[n:]
    return out


def check_ferry_client():
    """A proton server reads what a ferry client sends."""
    server = Connection()
    server.container = "proton-server"
    events = Collector()
    server.collect(events)
    t = Transport(Transport.SERVER)
    t.sasl().allowed_mechs("ANONYMOUS")
    t.bind(server)
    frames = units(stream("c2s"))
    # Up to the attach (headers, sasl-init, open, begin, attach), then the
    # server opens its ends and gives credit, as an application would before
    # taking transfers, then the rest.
    for unit in frames[:6]:
        t.push(unit)
    server.open()
    server.session_head(0).open()
    server.link_head(0).open()
    server.link_head(0).flow(1)
    t.pop(t.pending())
    for unit in frames[6:]:
        t.push(unit)
    check("server: no transport error", t.condition is None, t.condition)
    check("server: authenticated", t.authenticated)
    check("server: remote container", server.remote_container == "ferry-client", server.remote_container)
    check("server: remote hostname", server.remote_hostname == "proton.example")
    check(
        "server: offered capabilities",
        list(server.remote_offered_capabilities or []) == ["ferry-cap"],
        server.remote_offered_capabilities,
    )
    check("server: idle timeout", t.remote_idle_timeout == 10.0, t.remote_idle_timeout)
    link = server.link_head(0)
    check("server: link attached", link is not None and link.name == "ferry-sender")
    check("server: target address", link.remote_target.address == "queue-x", link.remote_target.address)
    check("server: source address", link.remote_source.address == "ferry-src")
    check("server: target expiry", link.remote_target.expiry_policy == 3)  # EXPIRE_NEVER
    d = link.current
    body = b""
    while d is not None:
        chunk = link.recv(4096)
        if not chunk:
            break
        body += chunk
    full = dict(MESSAGES)["full"]
    check("server: delivery tag", d is not None and d.tag == "ferry-1", d and d.tag)
    check("server: delivery complete", d is not None and not d.partial)
    got = Message()
    got.decode(body)
    check("server: message", got.encode() == full.encode())
    check("server: link closed", link.state & link.REMOTE_CLOSED)
    check("server: session ended", server.session_head(0).state & server.REMOTE_CLOSED)
    check("server: connection closed", server.state & server.REMOTE_CLOSED)
    cond = server.remote_condition
    check(
        "server: close error",
        cond is not None and cond.name == "connection:forced" and cond.description == "bye",
        cond,
    )


def check_ferry_server():
    """A proton client reads what a ferry server sends."""
    client = Connection()
    client.container = "proton-client"
    t = Transport()
    t.sasl().allowed_mechs("ANONYMOUS")
    t.bind(client)
    client.open()
    ssn = client.session()
    ssn.open()
    rcv = ssn.receiver("proton-receiver")
    rcv.source.address = "queue-y"
    rcv.open()
    rcv.flow(10)
    t.pop(t.pending())
    data = stream("s2c")
    for i in range(0, len(data), 64):
        t.push(data[i : i + 64])
        t.pop(max(t.pending(), 0))
    check("client: no transport error", t.condition is None, t.condition)
    check("client: remote container", client.remote_container == "ferry-server", client.remote_container)
    check("client: remote properties", dict(client.remote_properties or {}) == {"product": "ferry"})
    check("client: remote channel max", t.remote_channel_max == 255, t.remote_channel_max)
    check("client: remote max frame", t.remote_max_frame_size == 65536, t.remote_max_frame_size)
    check("client: link source", rcv.remote_source.address == "queue-y", rcv.remote_source.address)
    check("client: link max message size", rcv.remote_max_message_size == 1 << 20)
    check("client: sender settle mode", rcv.remote_snd_settle_mode == rcv.SND_UNSETTLED)
    d = rcv.current
    check("client: delivery", d is not None and d.tag == "d-0", d and d.tag)
    body = rcv.recv(4096)
    m = Message()
    m.decode(body)
    check("client: message body", m.body == b"from ferry", m.body)
    check("client: message id", m.id == "m-1", m.id)
    check("client: delivery count", m.delivery_count == 1)
    check("client: remote state", d.remote_state == Delivery.MODIFIED, d.remote_state)
    check("client: modified.delivery-failed", d.remote.failed)
    check("client: settled by peer", d.settled)
    cond = client.remote_condition
    check("client: close error", cond is not None and cond.name == "connection:forced", cond)


def main():
    check_values()
    check_messages()
    check_ferry_client()
    check_ferry_server()
    print(f"{len(FAILED)} failed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
