"""Wire-level 0-9-1 behaviour that client libraries depend on without showing it (issue 16).

Each test sends the exact frame sequence a client library sends (see wire091.py) and checks
the broker answers as RabbitMQ does: crossing channel.close, heartbeats at half the
negotiated interval, and a clean end to a connection closed while input still arrives.
"""

import os
import threading
import time

import pytest

from wire091 import (
    CHANNEL_CLOSE, CHANNEL_CLOSE_OK, CHANNEL_OPEN_OK, CONNECTION_CLOSE, CONNECTION_CLOSE_OK,
    QUEUE_DECLARE_OK, Wire, basic_publish, basic_qos, channel_close, channel_close_ok,
    channel_open, connection_close, heartbeat, queue_declare,
)


@pytest.fixture
def port():
    return int(os.environ["FERRY_PORT"])


@pytest.fixture
def wire(port):
    opened = []

    def open_wire(**kw):
        c = Wire(port, **kw)
        opened.append(c)
        return c

    yield open_wire
    for c in opened:
        c.close()


def declared_queue(ok_frame):
    """The queue name in a queue.declare-ok."""
    n = ok_frame.payload[4]
    return ok_frame.payload[5:5 + n].decode()


def assert_connection_usable(c, channel):
    """A synchronous method on another channel is answered: the connection survived."""
    c.send(queue_declare(channel, "", exclusive=True))
    c.expect(channel, QUEUE_DECLARE_OK)


# -- Crossing channel.close ---------------------------------------------------------------


def test_crossing_channel_close_is_answered_with_close_ok(wire, name):
    """The client closes a channel while the broker's own channel.close (404 for a publish
    to a missing exchange) is on its way: pika and the Java client then answer the broker's
    close with close-ok and wait for the close-ok to their own close. RabbitMQ answers the
    crossing close with close-ok, keeps the channel closing until its own close is
    acknowledged, and never closes the connection."""
    c = wire()
    c.send(channel_open(1), channel_open(2))
    c.expect(1, CHANNEL_OPEN_OK)
    c.expect(2, CHANNEL_OPEN_OK)
    # Sent together: the broker reads our close after it has sent its 404.
    c.send(basic_publish(1, "missing-" + name, "k", b"nowhere"), channel_close(1, 200, "client close"))
    f = c.expect(1, CHANNEL_CLOSE)
    assert f.reply[0] == 404, f
    c.send(channel_close_ok(1))
    c.expect(1, CHANNEL_CLOSE_OK)
    assert_connection_usable(c, 2)
    # Channel 1 is closed on both sides and may be opened again.
    c.send(channel_open(1))
    c.expect(1, CHANNEL_OPEN_OK)
    assert_connection_usable(c, 1)


def test_frames_for_a_closing_channel_are_ignored(wire, name):
    """Until its channel.close is acknowledged the broker ignores everything else the client
    sent on that channel: here publishes pipelined behind the failing one, and a basic.qos
    and a queue.declare that get no reply."""
    c = wire()
    c.send(channel_open(1), channel_open(2))
    c.expect(1, CHANNEL_OPEN_OK)
    c.expect(2, CHANNEL_OPEN_OK)
    missing = "missing-" + name
    c.send(*[basic_publish(1, missing, "k", b"%d" % i) for i in range(20)],
           basic_qos(1, 10), queue_declare(1, "ignored-" + name))
    f = c.expect(1, CHANNEL_CLOSE)
    assert f.reply[0] == 404, f
    c.send(channel_close_ok(1))
    assert_connection_usable(c, 2)
    c.send(channel_open(1))
    c.expect(1, CHANNEL_OPEN_OK)


# -- Heartbeats ---------------------------------------------------------------------------

HEARTBEAT_S = 2
WATCH_S = 10
# RabbitMQ sends a heartbeat every interval/2 in which it wrote nothing else.
MAX_GAP_S = 0.75 * HEARTBEAT_S


def watch_arrivals(c, seconds, send_every, make_frames):
    """For `seconds`, sends make_frames() every `send_every` s and records when each frame
    from the broker arrives, in seconds from the start. Returns (arrivals, end)."""
    arrivals = []
    start = time.monotonic()
    next_send = 0.0
    while (now := time.monotonic() - start) < seconds:
        if now >= next_send:
            c.send(*make_frames())
            next_send = now + send_every
        f = c.read_frame(timeout=max(0.0, min(next_send, seconds) - now))
        if f is not None:
            assert f.ids != CONNECTION_CLOSE, f"broker closed: {f}"
            arrivals.append(f.at - start)
    return arrivals, seconds


def assert_gaps_within(arrivals, end, what):
    # From the first frame on: before it the broker may still count the handshake's frames.
    assert len(arrivals) >= 2, f"{what}: only {len(arrivals)} frames from the broker in {end} s"
    times = arrivals + [end]
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert max(gaps) <= MAX_GAP_S, (
        f"{what}: heartbeat {HEARTBEAT_S} s, a gap of {max(gaps):.2f} s with nothing from the "
        f"broker (at most {MAX_GAP_S} s expected); frames at "
        + ", ".join(f"{t:.2f}" for t in arrivals) + f" s of {end} s watched")


def test_heartbeats_at_half_the_interval_on_an_idle_connection(wire):
    c = wire(heartbeat=HEARTBEAT_S)
    # Our own heartbeats keep the broker from timing us out; they must not count as its output.
    arrivals, end = watch_arrivals(c, WATCH_S, HEARTBEAT_S / 4, lambda: [heartbeat()])
    assert_gaps_within(arrivals, end, "idle connection")


def test_heartbeats_at_half_the_interval_while_the_client_publishes(wire, name):
    """The client writes all the time (publishes to a queue nobody consumes), the broker has
    nothing to say but heartbeats: reading must not delay them."""
    c = wire(heartbeat=HEARTBEAT_S)
    c.send(channel_open(1))
    c.expect(1, CHANNEL_OPEN_OK)
    c.send(queue_declare(1, "", exclusive=True))
    q = declared_queue(c.expect(1, QUEUE_DECLARE_OK))
    pub = basic_publish(1, "", q, b"x" * 100)
    arrivals, end = watch_arrivals(c, WATCH_S, 0.02, lambda: [pub])
    assert_gaps_within(arrivals, end, "publishing connection")


# -- connection.close while the client still sends ----------------------------------------


def test_connection_close_while_publishes_arrive_is_not_reset(wire):
    """A client's publishes may still be arriving when the broker answers connection.close
    (here: 1 MB of publishes, connection.close, 4 MB more, in one write). RabbitMQ replies
    close-ok, then reads and discards input until the client closes its socket (or the
    heartbeat interval, at most 30 s, passes). Closing at once on unread input resets the
    connection: the client sees ECONNRESET (and may lose the close-ok) instead of a clean
    close. Real clients close their socket when the close-ok arrives; until then (1 s here)
    the broker may close cleanly (EOF) or wait, but not reset."""
    c = wire()
    c.send(channel_open(1))
    c.expect(1, CHANNEL_OPEN_OK)
    c.send(queue_declare(1, "", exclusive=True))
    q = declared_queue(c.expect(1, QUEUE_DECLARE_OK))
    pub = basic_publish(1, "", q, b"x" * 1000)
    sent = {}

    def write():
        try:
            c.sock.sendall(pub * 1000 + connection_close() + pub * 4000)
            sent["ok"] = True
        except OSError as e:
            sent["error"] = e

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        c.expect(0, CONNECTION_CLOSE_OK)
    except ConnectionResetError as e:
        pytest.fail(f"connection reset by the broker before its connection.close-ok: {e}")
    except EOFError:
        pytest.fail("the broker closed the socket without a connection.close-ok")
    writer.join(timeout=10)
    assert "error" not in sent, f"sending the publishes behind connection.close failed: {sent['error']!r}"
    assert sent.get("ok"), "the broker stopped reading: 5 MB not sent within 10 s"
    try:
        f = c.read_frame(timeout=1)
        assert f is None, f"after connection.close-ok the broker sent {f}"
    except EOFError:
        pass  # a clean close
    except ConnectionResetError as e:
        pytest.fail(f"connection reset by the broker after its connection.close-ok, before the "
                    f"client closed ({e})")
