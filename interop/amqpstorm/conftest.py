"""Copied into AMQPStorm's source tree by run.sh: its functional tests connect to the AMQP
port they are not told (AMQP_HOST, no port), so a connection opened without a port goes to
ferryd's, in FERRY_PORT (a free port, as every suite here uses)."""

import functools
import os

import amqpstorm

_init = amqpstorm.Connection.__init__


@functools.wraps(_init)
def _init_on_ferrys_port(self, hostname, username, password, port=None, **kwargs):
    if port is None:
        port = int(os.environ["FERRY_PORT"])
    _init(self, hostname, username, password, port=port, **kwargs)


amqpstorm.Connection.__init__ = _init_on_ferrys_port
