"""A tiny hand-written AMQP 0-9-1 client for wire-level tests.

Client libraries hide the exact frames and their timing; these tests need both. Only what
the tests send is encoded; whatever arrives is kept as raw frames with their arrival time.

    c = Wire(port, heartbeat=2)         # socket, protocol header, handshake, connection.open
    c.send(channel_open(1))
    c.expect(1, CHANNEL_OPEN_OK)
"""

import socket
import struct
import time
from dataclasses import dataclass

METHOD, HEADER, BODY, HEARTBEAT = 1, 2, 3, 8
FRAME_END = b"\xce"

# (class-id, method-id)
CONNECTION_START, CONNECTION_START_OK = (10, 10), (10, 11)
CONNECTION_TUNE, CONNECTION_TUNE_OK = (10, 30), (10, 31)
CONNECTION_OPEN, CONNECTION_OPEN_OK = (10, 40), (10, 41)
CONNECTION_CLOSE, CONNECTION_CLOSE_OK = (10, 50), (10, 51)
CHANNEL_OPEN, CHANNEL_OPEN_OK = (20, 10), (20, 11)
CHANNEL_CLOSE, CHANNEL_CLOSE_OK = (20, 40), (20, 41)
EXCHANGE_DECLARE_OK = (40, 11)
QUEUE_DECLARE_OK = (50, 11)
BASIC_QOS_OK = (60, 11)

NAMES = {
    CONNECTION_CLOSE: "connection.close", CONNECTION_CLOSE_OK: "connection.close-ok",
    CHANNEL_OPEN_OK: "channel.open-ok", CHANNEL_CLOSE: "channel.close",
    CHANNEL_CLOSE_OK: "channel.close-ok", QUEUE_DECLARE_OK: "queue.declare-ok",
    EXCHANGE_DECLARE_OK: "exchange.declare-ok", BASIC_QOS_OK: "basic.qos-ok",
}


def shortstr(s):
    b = s.encode()
    return struct.pack(">B", len(b)) + b


def longstr(b):
    return struct.pack(">I", len(b)) + b


def table(d):
    """Field table with string values only: all the tests need."""
    body = b"".join(shortstr(k) + b"S" + longstr(v.encode()) for k, v in d.items())
    return longstr(body)


def frame(ftype, channel, payload):
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + FRAME_END


def method(channel, ids, args=b""):
    return frame(METHOD, channel, struct.pack(">HH", *ids) + args)


def heartbeat():
    return frame(HEARTBEAT, 0, b"")


def close_args(code, text):
    return struct.pack(">H", code) + shortstr(text) + struct.pack(">HH", 0, 0)


def connection_close(code=200, text="bye"):
    return method(0, CONNECTION_CLOSE, close_args(code, text))


def channel_open(ch):
    return method(ch, CHANNEL_OPEN, shortstr(""))


def channel_close(ch, code=200, text="bye"):
    return method(ch, CHANNEL_CLOSE, close_args(code, text))


def channel_close_ok(ch):
    return method(ch, CHANNEL_CLOSE_OK)


def queue_declare(ch, name="", exclusive=False):
    bits = 0b100 if exclusive else 0  # passive, durable, exclusive, auto-delete, no-wait
    return method(ch, (50, 10), struct.pack(">H", 0) + shortstr(name) + bytes([bits]) + table({}))


def basic_qos(ch, prefetch_count):
    return method(ch, (60, 10), struct.pack(">IHB", 0, prefetch_count, 0))


def basic_publish(ch, exchange, routing_key, body):
    """basic.publish, its content header (no properties) and one body frame."""
    pub = method(ch, (60, 40), struct.pack(">H", 0) + shortstr(exchange) + shortstr(routing_key) + b"\0")
    header = frame(HEADER, ch, struct.pack(">HHQH", 60, 0, len(body), 0))
    return pub + header + frame(BODY, ch, body)


@dataclass
class Frame:
    type: int
    channel: int
    payload: bytes
    at: float  # time.monotonic() when its last byte was read

    @property
    def ids(self):
        return struct.unpack_from(">HH", self.payload) if self.type == METHOD else None

    @property
    def reply(self):
        """(reply-code, reply-text) of a connection.close or channel.close."""
        code, n = struct.unpack_from(">HB", self.payload, 4)
        return code, self.payload[7:7 + n].decode(errors="replace")

    def __str__(self):
        if self.type == HEARTBEAT:
            return "heartbeat"
        if self.type != METHOD:
            return f"frame type {self.type} on channel {self.channel}"
        name = NAMES.get(self.ids, "method %d.%d" % self.ids)
        extra = " %d %r" % self.reply if self.ids in (CONNECTION_CLOSE, CHANNEL_CLOSE) else ""
        return f"{name}{extra} on channel {self.channel}"


class Wire:
    """One 0-9-1 connection over a plain socket, opened as guest on vhost '/'."""

    def __init__(self, port, heartbeat=0, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""
        self.closed = False  # connection.close-ok or a broker's connection.close seen, or EOF
        self.sock.sendall(b"AMQP\x00\x00\x09\x01")
        self.expect(0, CONNECTION_START)
        self.send(method(0, CONNECTION_START_OK, table({"product": "ferry wire091 test"})
                         + shortstr("PLAIN") + longstr(b"\0guest\0guest") + shortstr("en_US")))
        tune = self.expect(0, CONNECTION_TUNE)
        channel_max, frame_max, _ = struct.unpack_from(">HIH", tune.payload, 4)
        self.frame_max = frame_max
        self.send(method(0, CONNECTION_TUNE_OK, struct.pack(">HIH", channel_max, frame_max, heartbeat)),
                  method(0, CONNECTION_OPEN, shortstr("/") + shortstr("") + b"\0"))
        self.expect(0, CONNECTION_OPEN_OK)

    def send(self, *frames):
        self.sock.sendall(b"".join(frames))

    def read_frame(self, timeout=None):
        """The next frame, or None when none arrives within `timeout`; EOFError on EOF."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            if len(self.buf) >= 7:
                ftype, ch, size = struct.unpack_from(">BHI", self.buf)
                if len(self.buf) >= 8 + size:
                    payload, end = self.buf[7:7 + size], self.buf[7 + size:8 + size]
                    assert end == FRAME_END, f"bad frame end {end!r}"
                    self.buf = self.buf[8 + size:]
                    f = Frame(ftype, ch, payload, time.monotonic())
                    self.closed |= f.ids in (CONNECTION_CLOSE, CONNECTION_CLOSE_OK)
                    return f
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not data:
                self.closed = True
                raise EOFError("the broker closed the socket")
            self.buf += data

    def expect(self, channel, ids, timeout=None):
        """Skips heartbeats; fails on anything else than method `ids` on `channel`."""
        while True:
            f = self.read_frame(timeout)
            name = NAMES.get(ids, "method %d.%d" % ids)
            assert f is not None, f"no {name} on channel {channel} within {timeout or self.timeout} s"
            if f.type == HEARTBEAT:
                continue
            assert (f.type, f.channel, f.ids) == (METHOD, channel, ids), \
                f"expected {name} on channel {channel}, got {f}"
            return f

    def close(self):
        """connection.close, close-ok, then the socket; tolerant of a broker that went away."""
        if self.closed:
            self.sock.close()
            return
        try:
            self.send(connection_close())
            while (f := self.read_frame(5)) is not None and f.ids != CONNECTION_CLOSE_OK:
                pass
        except (OSError, EOFError):
            pass
        self.sock.close()
