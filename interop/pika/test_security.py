"""Authentication and TLS with pika, against the second ferryd run.sh starts (--auth yes, a
users file made by `ferry user`, a TLS listener with certificates made at test time)."""

import os
import ssl
import time
import uuid

import pika
import pytest
from pika.exceptions import ProbableAuthenticationError

SECURE_PORT = os.environ["FERRY_SECURE_PORT"]  # KeyError: run.sh did not start the broker
TLS_PORT = os.environ.get("FERRY_TLS_PORT", "")
TLS_DIR = os.environ.get("FERRY_TLS_DIR", "")
USER = os.environ.get("FERRY_USER", "")
PASSWORD = os.environ.get("FERRY_PASSWORD", "")
# A user as RabbitMQ's definitions carry one (interop/lib/ferryd.sh): a RabbitMQ password hash.
RABBIT_USER = os.environ.get("FERRY_RABBIT_USER", "")
RABBIT_PASSWORD = os.environ.get("FERRY_RABBIT_PASSWORD", "")

pytestmark = pytest.mark.skipif(
    SECURE_PORT == "", reason="FERRY_PORT given: no secure broker to test"
)


def params(port, user=USER, password=PASSWORD, tls=None, credentials=None):
    return pika.ConnectionParameters(
        host="127.0.0.1",
        port=int(port),
        credentials=credentials or pika.PlainCredentials(user, password),
        ssl_options=tls,
        connection_attempts=1,
        socket_timeout=10,
        blocked_connection_timeout=10,
    )


def tls_options(client_cert=False):
    context = ssl.create_default_context(cafile=os.path.join(TLS_DIR, "ca.pem"))
    if client_cert:
        context.load_cert_chain(
            os.path.join(TLS_DIR, "client.pem"), os.path.join(TLS_DIR, "client.key")
        )
    return pika.SSLOptions(context, server_hostname="localhost")


def round_trip(connection):
    ch = connection.channel()
    queue = "sec-" + uuid.uuid4().hex[:10]
    ch.queue_declare(queue, auto_delete=True)
    body = os.urandom(100_000)
    for _ in range(20):
        ch.basic_publish("", queue, body)
    got = 0
    for method, _props, received in ch.consume(queue, inactivity_timeout=10):
        assert method is not None, f"only {got} of 20 messages arrived"
        assert received == body
        ch.basic_ack(method.delivery_tag)
        got += 1
        if got == 20:
            break
    ch.cancel()
    connection.close()


def test_plain_login_as_a_users_file_user():
    round_trip(pika.BlockingConnection(params(SECURE_PORT)))


def test_wrong_password_and_unknown_user_are_refused_alike():
    started = time.monotonic()
    with pytest.raises(ProbableAuthenticationError) as wrong:
        pika.BlockingConnection(params(SECURE_PORT, password="not-the-password"))
    with pytest.raises(ProbableAuthenticationError) as unknown:
        pika.BlockingConnection(params(SECURE_PORT, user="nobody"))
    assert "ACCESS_REFUSED" in str(wrong.value)
    assert str(wrong.value) == str(unknown.value)
    # Each refusal is answered after a pause, so guessing is slow.
    assert time.monotonic() - started >= 1.9


def test_guest_is_not_a_user_when_a_users_file_exists():
    with pytest.raises(ProbableAuthenticationError):
        pika.BlockingConnection(params(SECURE_PORT, user="guest", password="guest"))


def test_over_tls():
    round_trip(pika.BlockingConnection(params(TLS_PORT, tls=tls_options())))


def test_wrong_password_over_tls():
    with pytest.raises(ProbableAuthenticationError):
        pika.BlockingConnection(params(TLS_PORT, password="nope", tls=tls_options()))


def test_external_with_a_client_certificate():
    from pika.credentials import ExternalCredentials

    connection = pika.BlockingConnection(
        params(TLS_PORT, tls=tls_options(client_cert=True), credentials=ExternalCredentials())
    )
    round_trip(connection)


def test_a_user_with_a_rabbitmq_password_hash_logs_in_with_plain():
    with pika.BlockingConnection(params(SECURE_PORT, RABBIT_USER, RABBIT_PASSWORD)) as c:
        round_trip(c)
    with pytest.raises(ProbableAuthenticationError):
        pika.BlockingConnection(params(SECURE_PORT, RABBIT_USER, RABBIT_PASSWORD + "x"))
