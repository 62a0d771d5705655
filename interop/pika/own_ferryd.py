"""A ferryd of a test's own (FERRYD_BIN), for tests that need options or restarts the shared
one cannot give: started on a free loopback port, stopped (SIGTERM, a clean shutdown) after."""

import os
import subprocess

import pytest


def start_ferryd(*options):
    """Yields the port of a ferryd started with `options`; stops it when resumed. Without
    `--data-dir` among them it keeps nothing (never the invoking user's data directory)."""
    ferryd = os.environ.get("FERRYD_BIN")
    if not ferryd:
        pytest.skip("FERRYD_BIN not set (run.sh sets it when it starts ferryd itself)")
    store = [] if "--data-dir" in options else ["--no-data-dir"]
    proc = subprocess.Popen(
        [ferryd, "--port", "0", "--interface", "127.0.0.1", "--auth", "no", *store, *options],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        yield int(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait(timeout=10)
