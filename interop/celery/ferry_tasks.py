"""The Celery app under test: broker = ferryd on 127.0.0.1:$FERRY_PORT, results over rpc://.

Both the worker (a subprocess started by conftest.py) and the test process import this
module, so they agree on the broker, the task queue and the task names. FERRY_CELERY_QUEUE
names the task queue; conftest.py makes it unique per run so two runs against one broker
never share work.
"""

import os
import time

from celery import Celery

port = int(os.environ["FERRY_PORT"])
app = Celery(
    "ferry_tasks",
    broker=f"amqp://guest:guest@127.0.0.1:{port}//",
    backend="rpc://",
)
app.conf.update(
    task_default_queue=os.environ.get("FERRY_CELERY_QUEUE", "celery"),
    # Fail fast instead of reconnecting forever when the broker is not there.
    broker_connection_timeout=5,
    broker_connection_retry_on_startup=False,
    broker_connection_max_retries=2,
    result_expires=300,
    worker_hijack_root_logger=False,
)


@app.task
def add(x, y):
    return x + y


@app.task
def slow_add(x, y, delay=0.2):
    time.sleep(delay)
    return x + y


@app.task
def boom(text):
    raise ValueError(f"boom: {text}")


@app.task
def echo(value):
    """Returns its argument: checks JSON round trips of nested values."""
    return value
