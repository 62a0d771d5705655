"""Celery over ferryd: tasks go out over AMQP 0-9-1, results come back through rpc://."""

import pytest
from celery import group

TIMEOUT = 30


def test_add_returns_its_result(app):
    assert app.add.delay(2, 3).get(timeout=TIMEOUT) == 5


def test_exception_comes_back(app):
    r = app.boom.delay("kaput")
    with pytest.raises(ValueError, match="boom: kaput"):
        r.get(timeout=TIMEOUT)
    assert r.state == "FAILURE"
    assert r.failed()


def test_exception_without_propagate(app):
    r = app.boom.delay("quiet")
    exc = r.get(timeout=TIMEOUT, propagate=False)
    assert isinstance(exc, ValueError) and "boom: quiet" in str(exc)


def test_many_tasks_in_flight(app):
    results = [app.slow_add.delay(i, i, 0.02) for i in range(20)]
    assert [r.get(timeout=TIMEOUT) for r in results] == [2 * i for i in range(20)]
    assert all(r.successful() for r in results)


def test_results_collected_out_of_order(app):
    results = [app.add.delay(i, 100) for i in range(10)]
    # Ask for the last first: earlier results must be kept for their AsyncResults.
    assert results[-1].get(timeout=TIMEOUT) == 109
    assert [r.get(timeout=TIMEOUT) for r in results] == [i + 100 for i in range(10)]


def test_group(app):
    assert group(app.add.s(i, 1) for i in range(5))().get(timeout=TIMEOUT) == [1, 2, 3, 4, 5]


def test_countdown_task_runs_later(app):
    # The worker holds an ETA task unacked (raising its basic.qos prefetch) until it is due.
    r = app.add.apply_async((40, 2), countdown=1)
    assert r.get(timeout=TIMEOUT) == 42


def test_nested_values_round_trip(app):
    value = {"text": "grüße ✓", "list": [1, 2.5, None, True], "nested": {"k": ["v"]}}
    assert app.echo.delay(value).get(timeout=TIMEOUT) == value


def test_remote_control_ping(app, worker):
    # Broadcast over the celery.pidbox fanout exchange; replies come back on a reply queue.
    hostname = f"ferry-{worker['queue'].removeprefix('ferry-celery-')}@localhost"
    # With a destination, ping returns as soon as that worker answers.
    replies = app.app.control.ping(destination=[hostname], timeout=10)
    assert {hostname: {"ok": "pong"}} in replies
