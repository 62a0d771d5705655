"""Authentication and TLS with proton, against the second ferryd run.sh starts (--auth yes, a
users file made by `ferry user`, a TLS listener with certificates made at test time)."""

import os

import pytest
from proton import SSL, Message, ProtonException, SSLDomain
from proton.utils import BlockingConnection

SECURE_PORT = os.environ["FERRY_SECURE_PORT"]  # KeyError: run.sh did not start the broker
TLS_PORT = os.environ.get("FERRY_TLS_PORT", "")
TLS_DIR = os.environ.get("FERRY_TLS_DIR", "")
USER = os.environ.get("FERRY_USER", "")
PASSWORD = os.environ.get("FERRY_PASSWORD", "")

pytestmark = pytest.mark.skipif(
    SECURE_PORT == "", reason="FERRY_PORT given: no secure broker to test"
)


def round_trip(c):
    receiver = c.create_receiver(None, dynamic=True)
    c.create_sender(receiver.remote_source.address).send(Message(body=b"x" * 100_000))
    assert receiver.receive(timeout=10).body == b"x" * 100_000
    receiver.accept()
    c.close()


def test_plain_login_as_a_users_file_user():
    c = BlockingConnection(
        f"amqp://127.0.0.1:{SECURE_PORT}", timeout=10, user=USER, password=PASSWORD,
        allowed_mechs="PLAIN",
    )
    round_trip(c)


def test_wrong_password_is_refused():
    with pytest.raises(ProtonException):
        BlockingConnection(
            f"amqp://127.0.0.1:{SECURE_PORT}", timeout=10, user=USER, password="wrong",
            allowed_mechs="PLAIN",
        )


def test_anonymous_is_refused_where_logins_are_required():
    with pytest.raises(ProtonException):
        BlockingConnection(
            f"amqp://127.0.0.1:{SECURE_PORT}", timeout=10, allowed_mechs="ANONYMOUS"
        )
    with pytest.raises(ProtonException):
        # No SASL layer at all.
        BlockingConnection(f"amqp://127.0.0.1:{SECURE_PORT}", timeout=10, sasl_enabled=False)


def tls(client_cert=False):
    if not SSL.present():
        pytest.skip("this proton build has no TLS")
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(os.path.join(TLS_DIR, "ca.pem"))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if client_cert:
        domain.set_credentials(
            os.path.join(TLS_DIR, "client.pem"), os.path.join(TLS_DIR, "client.key"), None
        )
    return domain


def test_over_tls():
    c = BlockingConnection(
        f"amqps://localhost:{TLS_PORT}", timeout=10, ssl_domain=tls(), user=USER,
        password=PASSWORD, allowed_mechs="PLAIN",
    )
    round_trip(c)


def test_external_with_a_client_certificate():
    c = BlockingConnection(
        f"amqps://localhost:{TLS_PORT}", timeout=10, ssl_domain=tls(client_cert=True),
        allowed_mechs="EXTERNAL",
    )
    round_trip(c)
