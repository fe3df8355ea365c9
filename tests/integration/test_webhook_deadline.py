"""Issue 39, finding 1: a webhook attempt is bounded as a whole (connect, send, status line, headers, body), not
per read: a receiver that trickles its answer a byte at a time is cut off at the attempt's timeout, over plain HTTP
and over TLS, whether it trickles the status line or the body."""

from __future__ import annotations

import ssl
import time

import pytest
import trustme

from interfaces.adapters.resolver import GetaddrinfoResolver
from interfaces.adapters.webhook_sender import post
from tests.webhook_receiver import start_trickler

RESOLVER = GetaddrinfoResolver()


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """One CA for the module: the sender keeps a client per CA file path, and a path can come again."""
    tmp_path = tmp_path_factory.mktemp("trickler-ca")
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost").configure_cert(context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return context, str(ca_file)


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("body_only", [False, True], ids=["status line", "body"])
def test_an_attempt_to_a_trickling_receiver_ends_at_its_timeout(tls, scheme, body_only):
    context, ca_file = tls
    # a byte every 0.2 s: no read waits long, the answer would take minutes
    trickler, listener = start_trickler(0.2, tls=context if scheme == "https" else None, body_only=body_only)
    try:
        started = time.monotonic()
        answer = post(trickler.url, b"{}", {"content-type": "application/json"}, timeout=1.5, production=False,
                      resolver=RESOLVER, ca_file=ca_file)
        took = time.monotonic() - started
    finally:
        trickler.stopping.set()
        listener.close()
    assert 1.4 < took < 2.0, f"the attempt took {took:.2f} s: {answer}"
    assert answer.status is None and answer.error == "timed out after 1.5 s"  # a failed attempt, retried
    assert 1400 <= answer.latency_ms < 2000


def test_a_kept_alive_connection_is_not_cut_by_an_earlier_attempts_deadline(receiver):
    """The deadline is cancelled before the connection goes back to the pool: the next attempt on it, after the
    first one's deadline has passed, completes."""
    for _ in range(2):
        answer = post(receiver.url, b"{}", {"content-type": "application/json"}, timeout=0.5, production=False,
                      resolver=RESOLVER, ca_file=receiver.ca_file)
        assert answer.status == 200, answer.error
        time.sleep(0.7)
    assert len(receiver.deliveries) == 2
