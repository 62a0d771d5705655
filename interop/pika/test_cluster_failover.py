"""A 3-node ferryd cluster under a real 0-9-1 client: pika publishes to a quorum queue with
publisher confirms, the leader is killed with SIGKILL, pika recovers through its own list of
node addresses, and every message confirmed before or after the failover is consumed.

Starts its own nodes (FERRYD_BIN, exported by run.sh) on 127.0.0.1 with free ports and
temporary data directories, and stops them afterwards."""

import os
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pika
import pytest
from pika.exceptions import AMQPError

NODES = 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, ferryd, workdir):
        self.ferryd = ferryd
        self.ferry = os.path.join(os.path.dirname(ferryd), "ferry")
        self.workdir = workdir
        self.amqp = {i: free_port() for i in range(1, NODES + 1)}
        self.cport = {i: free_port() for i in range(1, NODES + 1)}
        self.secret = os.path.join(workdir, "secret")
        with open(self.secret, "w") as f:
            f.write(uuid.uuid4().hex + uuid.uuid4().hex)
        os.chmod(self.secret, 0o600)
        self.procs = {}

    def start(self, node):
        peers = ",".join(f"{i}=127.0.0.1:{p}" for i, p in self.cport.items())
        log = open(os.path.join(self.workdir, f"node{node}.log"), "ab")
        self.procs[node] = subprocess.Popen(
            [self.ferryd, "--port", str(self.amqp[node]), "--interface", "127.0.0.1",
             "--auth", "no", "--data-dir", os.path.join(self.workdir, f"node{node}"),
             "--cluster-name", "pika", "--node-id", str(node), "--cluster-peers", peers,
             "--cluster-port", str(self.cport[node]), "--cluster-secret-file", self.secret,
             "--cluster-election-timeout", "500"],
            stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)

    def leader(self, timeout=30):
        """The node id that leads and serves, from `ferry cluster status`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.procs:
                if self.procs[node].poll() is not None:
                    continue
                out = subprocess.run(
                    [self.ferry, "cluster", "-n", f"127.0.0.1:{self.cport[node]}",
                     "--cluster-name", "pika", "--secret-file", self.secret, "status"],
                    capture_output=True, text=True, timeout=10)
                for line in out.stdout.splitlines():
                    cols = line.split()
                    if len(cols) >= 4 and cols[3] == "leader" and cols[0].isdigit():
                        leader = int(cols[0])
                        if self.procs.get(leader) and self.procs[leader].poll() is None:
                            return leader
            time.sleep(0.2)
        raise AssertionError("no leader elected; see " + self.workdir)

    def params(self):
        return [pika.ConnectionParameters(
            host="127.0.0.1", port=p, connection_attempts=1, socket_timeout=5,
            blocked_connection_timeout=10) for p in self.amqp.values()]

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def cluster():
    ferryd = os.environ.get("FERRYD_BIN")
    if not ferryd:
        pytest.skip("FERRYD_BIN not set (run.sh sets it when it starts ferryd itself)")
    with tempfile.TemporaryDirectory(prefix="ferry-pika-cluster-") as d:
        c = Cluster(ferryd, d)
        for node in range(1, NODES + 1):
            c.start(node)
        try:
            yield c
        finally:
            c.stop()


def connect(cluster, timeout=30):
    """Pika's own recovery: try each node's address until one serves (a follower proxies
    to the leader; during an election connections are refused or closed)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return pika.BlockingConnection(cluster.params())
        except AMQPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def publish_confirmed(cluster, queue, ids, timeout=60):
    """Publishes every id with confirms, reconnecting on any failure and publishing again
    what was not confirmed. Returns the ids confirmed."""
    confirmed = []
    pending = list(ids)
    deadline = time.monotonic() + timeout
    while pending:
        assert time.monotonic() < deadline, f"{len(pending)} not confirmed in {timeout} s"
        try:
            conn = connect(cluster)
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
            while pending:
                # BlockingChannel.basic_publish returns once the broker confirmed (raises on
                # a nack or a closed connection).
                ch.basic_publish("", queue, pending[0].encode(),
                                 pika.BasicProperties(delivery_mode=2), mandatory=True)
                confirmed.append(pending.pop(0))
            conn.close()
        except AMQPError:
            time.sleep(0.3)
    return confirmed


def consume_all(cluster, queue, expect, timeout=60):
    got = set()
    deadline = time.monotonic() + timeout
    while not expect <= got and time.monotonic() < deadline:
        try:
            conn = connect(cluster)
            ch = conn.channel()
            ch.basic_qos(prefetch_count=200)
            for method, _props, body in ch.consume(queue, inactivity_timeout=3):
                if method is None:
                    break
                got.add(body.decode())
                ch.basic_ack(method.delivery_tag)
            conn.close()
        except AMQPError:
            time.sleep(0.3)
    return got


def test_confirmed_messages_survive_sigkill_of_the_leader_and_pika_recovers(cluster):
    queue = "failover-" + uuid.uuid4().hex[:8]
    first = publish_confirmed(cluster, queue, [f"a{i}" for i in range(300)])
    leader = cluster.leader()
    os.kill(cluster.procs[leader].pid, signal.SIGKILL)
    cluster.procs[leader].wait()
    killed_at = time.monotonic()
    # Published while the cluster elects a new leader: pika reconnects to the survivors.
    second = publish_confirmed(cluster, queue, [f"b{i}" for i in range(300)])
    new_leader = cluster.leader()
    assert new_leader != leader
    assert time.monotonic() - killed_at < 60
    confirmed = set(first) | set(second)
    assert len(confirmed) == 600
    got = consume_all(cluster, queue, confirmed)
    lost = confirmed - got
    assert not lost, f"{len(lost)} confirmed messages lost, e.g. {sorted(lost)[:5]}"
    assert got <= confirmed, f"unexpected messages: {sorted(got - confirmed)[:5]}"


def get_and_return(cluster, queue):
    """basic.get one message, nack it back to the queue; its x-delivery-count (0 if none),
    or None if the queue was empty. Only connecting is retried (through an election): a
    failure after the get would return the message once more, and a retry would then see
    one count too many, so it fails the test instead."""
    conn = connect(cluster)
    try:
        ch = conn.channel()
        method, props, _body = ch.basic_get(queue, auto_ack=False)
        if method is None:
            return None
        ch.basic_nack(method.delivery_tag, requeue=True)
        return (props.headers or {}).get("x-delivery-count", 0)
    finally:
        conn.close()


def test_a_delivery_limits_count_carries_on_after_the_leader_dies(cluster):
    queue = "poison-" + uuid.uuid4().hex[:8]
    conn = connect(cluster)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(queue, durable=True,
                     arguments={"x-queue-type": "quorum", "x-delivery-limit": 3})
    # Returns once confirmed (raises on a nack).
    ch.basic_publish("", queue, b"p", pika.BasicProperties(delivery_mode=2), mandatory=True)
    conn.close()
    assert get_and_return(cluster, queue) == 0
    assert get_and_return(cluster, queue) == 1
    # Let the count commit, then kill the leader.
    time.sleep(0.5)
    leader = cluster.leader()
    os.kill(cluster.procs[leader].pid, signal.SIGKILL)
    cluster.procs[leader].wait()
    assert cluster.leader() != leader
    # The new leader counts on, as a RabbitMQ quorum queue does; the fourth return is one
    # over the limit and drops the message.
    assert get_and_return(cluster, queue) == 2
    assert get_and_return(cluster, queue) == 3
    assert get_and_return(cluster, queue) is None


def test_a_transaction_on_a_quorum_queue_counts_after_the_leader_dies_as_committed(cluster):
    """tx.commit-ok promises the commit's publishes and acks; a rolled-back transaction's
    leave nothing behind on the next leader."""
    queue = "tx-" + uuid.uuid4().hex[:8]
    conn = connect(cluster)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.tx_select()
    for body in (b"a", b"b", b"c"):
        ch.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))
    ch.tx_commit()
    # Rolled back: an ack of "a" and a publish.
    method, _props, body = ch.basic_get(queue, auto_ack=False)
    assert body == b"a"
    ch.basic_ack(method.delivery_tag)
    ch.basic_publish("", queue, b"rolled-back", pika.BasicProperties(delivery_mode=2))
    ch.tx_rollback()
    # Committed: an ack of "b" (the rollback left "a" unacknowledged) and a publish.
    method, _props, body = ch.basic_get(queue, auto_ack=False)
    assert body == b"b"
    ch.basic_ack(method.delivery_tag)
    ch.basic_publish("", queue, b"committed", pika.BasicProperties(delivery_mode=2))
    ch.tx_commit()
    # Closing hands the unacknowledged "a" back.
    conn.close()
    leader = cluster.leader()
    os.kill(cluster.procs[leader].pid, signal.SIGKILL)
    cluster.procs[leader].wait()
    assert cluster.leader() != leader
    got = consume_all(cluster, queue, {"a", "c", "committed"})
    assert got == {"a", "c", "committed"}


def test_bindings_told_apart_by_their_arguments_carry_on_after_the_leader_dies(cluster):
    """A quorum queue bound to a headers exchange under one key with two sets of criteria
    (and a third unbound again), as RabbitMQ keeps them: the next leader routes the same."""
    queue = "docs-" + uuid.uuid4().hex[:8]
    pdf = {"x-match": "all", "format": "pdf"}
    report = {"x-match": "all", "type": "report"}
    memo = {"x-match": "all", "type": "memo"}
    conn = connect(cluster)
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    for criteria in (pdf, report, memo):
        ch.queue_bind(queue, "amq.match", arguments=criteria)
    ch.queue_unbind(queue, "amq.match", arguments=memo)
    conn.close()
    # Let the bindings commit, then kill the leader.
    time.sleep(0.5)
    leader = cluster.leader()
    os.kill(cluster.procs[leader].pid, signal.SIGKILL)
    cluster.procs[leader].wait()
    assert cluster.leader() != leader
    conn = connect(cluster)
    ch = conn.channel()
    ch.confirm_delivery()
    for i, h in enumerate([{"format": "pdf"}, {"type": "report"}, {"type": "memo"}]):
        ch.basic_publish("amq.match", "", b"%d" % i,
                         pika.BasicProperties(headers=h, delivery_mode=2))
    conn.close()
    assert consume_all(cluster, queue, {"0", "1"}) == {"0", "1"}
