"""/metrics parsed by prometheus_client's text parser after real AMQP traffic."""

import time
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import fetch


def families():
    status, content_type, text = fetch("/metrics")
    assert status == 200
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    # The parser raises on anything outside the format; list() makes it read everything.
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams, family, **labels):
    for s in fams[family].samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return s
    raise AssertionError(f"no {family} sample with {labels}")


def test_the_parser_is_strict():
    """What the test relies on: a malformed exposition does not parse."""
    for bad in [
        'a{q="x} 1\n',  # an unterminated label value (e.g. a quote left unescaped)
        'a{q="x" 1\n',  # an unterminated label set
        'a{q="x"} one\n',  # not a number
        "a b\n",  # not a number
    ]:
        with pytest.raises(ValueError):
            list(text_string_to_metric_families(bad))


def test_metrics_parse_and_follow_traffic(amqp):
    ch = amqp.channel()
    plain = "prom-" + uuid.uuid4().hex[:8]
    odd = 'odd "quoted" \\ name\nwith a newline'
    for q in (plain, odd):
        ch.queue_declare(q, auto_delete=False)
    ch.confirm_delivery()
    for i in range(7):
        ch.basic_publish("", plain, f"m{i}".encode())
    ch.basic_publish("", odd, b"x")
    method, _props, _body = ch.basic_get(plain, auto_ack=False)
    ch.basic_ack(method.delivery_tag)
    ch.basic_get(plain, auto_ack=False)  # delivered, not acknowledged

    fams = families()
    assert fams["ferry_queue_messages_ready"].type == "gauge"
    assert fams["ferry_queue_messages_published"].type == "counter"
    assert sample(fams, "ferry_queue_messages_ready", queue=plain, vhost="/").value == 5
    assert sample(fams, "ferry_queue_messages_unacked", queue=plain).value == 1
    assert sample(fams, "ferry_queue_messages_published", queue=plain).value == 7
    assert sample(fams, "ferry_queue_messages_delivered", queue=plain).value == 2
    assert sample(fams, "ferry_queue_messages_acked", queue=plain).value == 1
    # Label values come back exactly, quotes, backslash and newline included.
    assert sample(fams, "ferry_queue_messages_ready", queue=odd).value == 1
    assert sample(fams, "ferry_queues").value >= 2
    assert sample(fams, "ferry_process_resident_memory_bytes").value > 0
    assert sample(fams, "ferry_exchange_messages_published_in", exchange="").value >= 8

    # Connections store their traffic once per batch: wait for this one's.
    deadline = time.time() + 10
    while True:
        fams = families()
        conns = [
            s
            for s in fams["ferry_connection_incoming_bytes"].samples
            if s.labels.get("protocol") == "AMQP 0-9-1" and s.value > 0
        ]
        if conns or time.time() > deadline:
            break
        time.sleep(0.2)
    assert conns, "the pika connection's traffic"
    assert sample(fams, "ferry_connections").value >= 1


def test_our_output_unescaped_would_not_parse(amqp):
    """The odd queue name above only parses because ferryd escapes it: the same scrape with
    the escapes undone is refused, so this suite fails on a malformed exposition."""
    ch = amqp.channel()
    ch.queue_declare('needs "escaping"', auto_delete=False)
    _status, _type, text = fetch("/metrics")
    list(text_string_to_metric_families(text))
    broken = text.replace('\\"', '"')
    assert broken != text
    with pytest.raises(ValueError):
        list(text_string_to_metric_families(broken))
