"""A Celery worker (solo pool) against ferryd on 127.0.0.1:$FERRY_PORT, for the whole session."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
READY_TIMEOUT = 60
STOP_TIMEOUT = 15


def _stop(proc):
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # warm shutdown
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.fixture(scope="session")
def worker(tmp_path_factory):
    """Starts `celery worker --pool=solo` and waits (bounded) until it says it is ready."""
    run_id = uuid.uuid4().hex[:10]
    queue = f"ferry-celery-{run_id}"
    os.environ["FERRY_CELERY_QUEUE"] = queue  # read by ferry_tasks on import, here and in the worker
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "ferry_tasks", "worker",
             "--pool=solo", "--concurrency=1", "--loglevel=INFO",
             "--hostname", f"ferry-{run_id}@localhost"],
            cwd=HERE, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            text = log.read_text(errors="replace")
            if " ready." in text:
                break
            if proc.poll() is not None:
                pytest.fail(f"celery worker exited with {proc.returncode}:\n{text}")
            if time.monotonic() > deadline:
                pytest.fail(f"celery worker not ready within {READY_TIMEOUT}s:\n{text}")
            time.sleep(0.2)
        yield {"queue": queue, "log": log, "proc": proc}
    finally:
        _stop(proc)
        text = log.read_text(errors="replace")
        # Shown with -rA or on failure; handy when a task never comes back.
        print(f"---- celery worker log ({log}) ----\n{text[-5000:]}")


@pytest.fixture(scope="session")
def app(worker):
    import ferry_tasks

    assert ferry_tasks.app.conf.task_default_queue == worker["queue"]
    return ferry_tasks
