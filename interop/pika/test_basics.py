"""Work queues, pub/sub, RPC, confirms, returns, basic.get, qos against ferryd over 0-9-1."""

import threading
import time
import uuid

import pika
import pytest

from conftest import drain


def test_connection_properties(conn):
    props = conn._impl.server_properties
    assert props["product"] == b"ferryd" or props["product"] == "ferryd"
    caps = props["capabilities"]
    for cap in ["publisher_confirms", "basic.nack", "consumer_cancel_notify",
                "authentication_failure_close", "per_consumer_qos"]:
        assert caps[cap] is True


def test_work_queue_prefetch_and_manual_ack(connect, name):
    conn = connect()
    ch = conn.channel()
    ch.queue_declare(name)
    for i in range(10):
        ch.basic_publish("", name, b"job-%d" % i)
    ch.basic_qos(prefetch_count=2)
    held = []

    def on_message(chan, method, props, body):
        held.append(method.delivery_tag)

    ch.basic_consume(name, on_message)
    conn.process_data_events(time_limit=0.5)
    # Prefetch 2: two deliveries outstanding, no more until acked.
    assert len(held) == 2
    ch.basic_ack(held[-1], multiple=True)
    conn.process_data_events(time_limit=0.5)
    assert len(held) == 4
    ch.basic_ack(0, multiple=True)
    conn.process_data_events(time_limit=0.5)
    assert len(held) == 6
    ch.close()
    # Unacked messages go back to the queue when the channel closes.
    ch2 = conn.channel()
    got = drain(ch2, name)
    assert len(got) == 6  # 2 unacked + 4 never delivered
    ch2.queue_delete(name)


def test_competing_consumers_share_work(connect, name):
    c1, c2 = connect(), connect()
    a, b = c1.channel(), c2.channel()
    a.queue_declare(name)
    a.basic_qos(prefetch_count=1)
    b.basic_qos(prefetch_count=1)
    for i in range(20):
        a.basic_publish("", name, b"%d" % i)
    counts = {"a": 0, "b": 0}

    def handler(key, chan):
        def cb(_ch, method, _p, _body):
            counts[key] += 1
            chan.basic_ack(method.delivery_tag)
        return cb

    a.basic_consume(name, handler("a", a))
    b.basic_consume(name, handler("b", b))
    deadline = time.time() + 5
    while counts["a"] + counts["b"] < 20 and time.time() < deadline:
        c1.process_data_events(time_limit=0.05)
        c2.process_data_events(time_limit=0.05)
    assert counts["a"] + counts["b"] == 20
    assert counts["a"] > 0 and counts["b"] > 0
    a.queue_delete(name)


@pytest.mark.parametrize("kind", ["fanout", "topic", "headers", "direct"])
def test_pub_sub(ch, name, kind):
    ch.exchange_declare(name, kind)
    q1 = ch.queue_declare("", exclusive=True).method.queue
    q2 = ch.queue_declare("", exclusive=True).method.queue
    if kind == "fanout":
        ch.queue_bind(q1, name)
        ch.queue_bind(q2, name)
        sends = [("any", None, True, True)]
    elif kind == "topic":
        ch.queue_bind(q1, name, "stock.*.nyse")
        ch.queue_bind(q2, name, "stock.#")
        sends = [("stock.ibm.nyse", None, True, True), ("stock.x", None, False, True),
                 ("bond.x", None, False, False)]
    elif kind == "headers":
        ch.queue_bind(q1, name, arguments={"x-match": "all", "a": 1, "b": "two"})
        ch.queue_bind(q2, name, arguments={"x-match": "any", "a": 1, "c": 3})
        sends = [("", {"a": 1, "b": "two"}, True, True), ("", {"c": 3}, False, True),
                 ("", {"a": 2}, False, False)]
    else:
        ch.queue_bind(q1, name, "k1")
        ch.queue_bind(q2, name, "k2")
        sends = [("k1", None, True, False), ("k2", None, False, True)]
    for i, (key, headers, _, _) in enumerate(sends):
        ch.basic_publish(name, key, b"%d" % i, pika.BasicProperties(headers=headers))
    want1 = [b"%d" % i for i, s in enumerate(sends) if s[2]]
    want2 = [b"%d" % i for i, s in enumerate(sends) if s[3]]
    assert drain(ch, q1, timeout=0.5) == want1
    assert drain(ch, q2, timeout=0.5) == want2
    ch.exchange_delete(name)


def test_bindings_under_one_key_are_told_apart_by_their_arguments(ch, name):
    # As in RabbitMQ: a queue bound to a headers exchange twice under the same (empty) key
    # with other criteria gets what either matches, and an unbind names the one it removes.
    ch.exchange_declare(name, "headers")
    q = ch.queue_declare("", exclusive=True).method.queue
    pdf = {"x-match": "all", "format": "pdf"}
    report = {"x-match": "all", "type": "report"}
    ch.queue_bind(q, name, arguments=pdf)
    ch.queue_bind(q, name, arguments=report)
    ch.queue_bind(q, name, arguments=dict(reversed(list(report.items()))))

    def send(*headers):
        for i, h in enumerate(headers):
            ch.basic_publish(name, "", b"%d" % i, pika.BasicProperties(headers=h))

    send({"format": "pdf"}, {"type": "report"}, {"format": "pdf", "type": "report"}, {"x": 1})
    assert drain(ch, q, timeout=0.5) == [b"0", b"1", b"2"]
    # Without the arguments the unbind names no binding: both stay.
    ch.queue_unbind(q, name)
    ch.queue_unbind(q, name, arguments=pdf)
    send({"format": "pdf"}, {"type": "report"})
    assert drain(ch, q, timeout=0.5) == [b"1"]
    ch.queue_unbind(q, name, arguments=report)
    send({"format": "pdf"}, {"type": "report"})
    assert drain(ch, q, timeout=0.5) == []
    ch.exchange_delete(name)


def test_arrays_and_tables_in_headers_bindings_are_compared_by_content(ch, name):
    # As in RabbitMQ: an array or table in a headers binding matches a header with the same
    # content in the same order, and two bindings that differ only inside one are two.
    ch.exchange_declare(name, "headers")
    q = ch.queue_declare("", exclusive=True).method.queue
    ab = {"x-match": "all", "tags": ["a", "b"]}
    cd = {"x-match": "all", "tags": ["c", {"d": 1}]}
    ch.queue_bind(q, name, arguments=ab)
    ch.queue_bind(q, name, arguments=cd)

    def send():
        for i, tags in enumerate([["a", "b"], ["b", "a"], ["c", {"d": 1}], ["c", {"d": 2}],
                                  "a", ["a"]]):
            ch.basic_publish(name, "", b"%d" % i, pika.BasicProperties(headers={"tags": tags}))

    send()
    assert drain(ch, q, timeout=0.5) == [b"0", b"2"]
    ch.queue_unbind(q, name, arguments=ab)
    send()
    assert drain(ch, q, timeout=0.5) == [b"2"]
    ch.exchange_delete(name)


def test_rpc_with_reply_to_and_server_named_queue(connect, name):
    server_conn, client_conn = connect(), connect()
    server, client = server_conn.channel(), client_conn.channel()
    server.queue_declare(name)

    def serve(chan, method, props, body):
        chan.basic_publish("", props.reply_to, body.upper(),
                           pika.BasicProperties(correlation_id=props.correlation_id))
        chan.basic_ack(method.delivery_tag)

    server.basic_consume(name, serve)
    reply_q = client.queue_declare("", exclusive=True).method.queue
    assert reply_q.startswith("amq.gen-")
    corr = str(uuid.uuid4())
    client.basic_publish("", name, b"ping",
                         pika.BasicProperties(reply_to=reply_q, correlation_id=corr))
    server_conn.process_data_events(time_limit=0.5)
    m, props, body = None, None, None
    for m, props, body in client.consume(reply_q, auto_ack=True, inactivity_timeout=2):
        break
    assert body == b"PING"
    assert props.correlation_id == corr
    client.cancel()
    # The exclusive queue belongs to the client's connection only.
    other = connect().channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        other.basic_consume(reply_q, lambda *a: None)
    assert e.value.reply_code == 405
    client_conn.close()
    # ... and dies with it.
    probe = connect().channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        probe.queue_declare(reply_q, passive=True)
    assert e.value.reply_code == 404
    server.queue_delete(name)


def test_publisher_confirms(ch, name):
    ch.queue_declare(name)
    ch.confirm_delivery()
    for i in range(50):
        ch.basic_publish("", name, b"%d" % i)  # raises if nacked
    assert ch.queue_declare(name, passive=True).method.message_count == 50
    ch.queue_delete(name)


def test_confirms_nack_when_queue_full(ch, name):
    ch.queue_declare(name, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", name, b"fits")
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", name, b"overflows")
    ch.queue_delete(name)


def test_mandatory_return(ch, name):
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError) as e:
        ch.basic_publish("amq.direct", name, b"lost", mandatory=True)
    assert e.value.messages[0].method.reply_code == 312
    assert e.value.messages[0].body == b"lost"


def test_basic_get_ack_reject_nack(ch, name):
    ch.queue_declare(name)
    method, _, _ = ch.basic_get(name)
    assert method is None
    for b in [b"a", b"b", b"c"]:
        ch.basic_publish("", name, b, pika.BasicProperties(content_type="text/plain",
                                                           headers={"n": 1}))
    m, props, body = ch.basic_get(name)
    assert body == b"a" and m.message_count == 2 and not m.redelivered
    assert props.content_type == "text/plain" and props.headers == {"n": 1}
    ch.basic_reject(m.delivery_tag, requeue=True)
    m, _, body = ch.basic_get(name)
    assert body == b"a" and m.redelivered
    m2, _, _ = ch.basic_get(name)
    m3, _, _ = ch.basic_get(name)
    ch.basic_nack(m3.delivery_tag, multiple=True, requeue=True)
    assert ch.queue_declare(name, passive=True).method.message_count == 3
    m, _, _ = ch.basic_get(name, auto_ack=True)
    assert ch.queue_purge(name).method.message_count == 2
    ch.queue_delete(name)


def test_recover_redelivers(ch, name):
    ch.queue_declare(name)
    ch.basic_publish("", name, b"x")
    m, _, _ = ch.basic_get(name)
    ch.basic_recover(requeue=True)
    m, _, _ = ch.basic_get(name)
    assert m.redelivered
    ch.basic_ack(m.delivery_tag)
    ch.queue_delete(name)


def test_consumer_cancel_notification_on_queue_delete(connect, name):
    conn = connect()
    ch = conn.channel()
    ch.queue_declare(name)
    cancelled = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = ch.basic_consume(name, lambda *a: None)
    connect().channel().queue_delete(name)
    deadline = time.time() + 3
    while not cancelled and time.time() < deadline:
        conn.process_data_events(time_limit=0.1)
    assert cancelled == [tag]
    assert ch.is_open


def test_channel_errors_leave_connection_usable(conn, name):
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.queue_declare("nonexistent-" + name, passive=True)
    assert e.value.reply_code == 404
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.exchange_declare("amq.custom-" + name, "direct")
    assert e.value.reply_code == 403
    ch = conn.channel()
    ch.exchange_declare(name, "direct")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.exchange_declare(name, "fanout")
    assert e.value.reply_code == 406
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.basic_ack(999)
        ch.queue_declare(name)  # the ack has no reply; a sync method surfaces the close
    assert e.value.reply_code == 406
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        ch.tx_commit()  # without tx.select
    assert e.value.reply_code == 406
    ch = conn.channel()
    assert ch.queue_declare(name).method.queue == name
    ch.queue_delete(name)
    ch.exchange_delete(name)
    assert conn.is_open


def test_exclusive_consumer(connect, name):
    a = connect().channel()
    a.queue_declare(name)
    a.basic_consume(name, lambda *x: None, exclusive=True)
    b = connect().channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as e:
        b.basic_consume(name, lambda *x: None)
    assert e.value.reply_code == 403
    a.queue_delete(name)


def test_large_message_spans_frames(ch, name):
    ch.queue_declare(name)
    body = bytes(range(256)) * 4096  # 1 MiB, many frames
    ch.basic_publish("", name, body)
    _, _, got = ch.basic_get(name, auto_ack=True)
    assert got == body
    ch.queue_delete(name)


def test_heartbeats_keep_an_idle_connection(params):
    p = pika.ConnectionParameters(host=params.host, port=params.port, heartbeat=1)
    c = pika.BlockingConnection(p)
    c.sleep(3.5)
    assert c.is_open
    c.channel().queue_declare("", exclusive=True)
    c.close()
