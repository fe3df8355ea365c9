"""The outbound HTTP client against a real HTTPS server (trustme certificates): SSRF rules, pinning, streaming."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import textwrap
import time

import pytest

from interfaces.adapters.outbound import (
    OutboundClient,
    OutboundPolicy,
    OutboundRefused,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnreachable,
    forbidden_reason,
)
from tests.https_backend import MapResolver, start_backend

PRODUCTION = OutboundPolicy()
SANDBOX = OutboundPolicy.for_mode(sandbox=True)


@pytest.fixture(scope="module")
def backend():
    server = start_backend()
    yield server
    server.close()


def client(backend, policy=SANDBOX, answers=None, **timeouts):
    resolver = MapResolver(answers if answers is not None else {"api.backend.test": ["127.0.0.1"]})
    if timeouts:
        policy = OutboundPolicy(**{**policy.__dict__, **timeouts})
    return OutboundClient(resolver, policy, ssl_context=backend.client_context()), resolver


def test_a_request_reaches_the_resolved_address_with_the_hostname_kept_for_tls_and_host(backend):
    outbound, resolver = client(backend)
    response = outbound.request("POST", f"https://api.backend.test:{backend.port}/echo?a=1",
                                [("X-Test", "yes"), ("Host", "evil.example")], b'{"q": 1}')
    echoed = json.loads(response.read(1 << 20))
    assert response.status == 200
    assert echoed["path"] == "/echo?a=1"
    assert echoed["headers"]["Host"] == f"api.backend.test:{backend.port}"  # the caller's Host is replaced
    assert echoed["headers"]["X-Test"] == "yes"
    assert echoed["body"] == '{"q": 1}'
    assert resolver.asked == ["api.backend.test"]  # resolved once


def test_a_certificate_for_another_name_is_refused(backend):
    outbound, _ = client(backend, answers={"other.example": ["127.0.0.1"]})
    with pytest.raises(UpstreamUnreachable):
        outbound.request("GET", f"https://other.example:{backend.port}/echo")


@pytest.mark.parametrize("answer", ["127.0.0.1", "169.254.169.254", "10.1.2.3", "::1", "::ffff:127.0.0.1"])
def test_production_refuses_a_host_that_resolves_to_an_internal_address(backend, answer):
    outbound, _ = client(backend, PRODUCTION, answers={"api.backend.test": ["93.184.216.34", answer]})
    before = len(backend.received)
    with pytest.raises(OutboundRefused) as refused:
        outbound.request("GET", f"https://api.backend.test:{backend.port}/echo")
    assert refused.value.reason == "forbidden_address"
    assert str(ipaddress.ip_address(answer)) in str(refused.value)
    assert len(backend.received) == before


def test_production_refuses_an_internal_ip_literal_and_a_name_that_does_not_resolve(backend):
    outbound, _ = client(backend, PRODUCTION, answers={})
    with pytest.raises(OutboundRefused) as literal:
        outbound.request("GET", f"https://127.0.0.1:{backend.port}/echo")
    assert literal.value.reason == "forbidden_address"
    with pytest.raises(OutboundRefused) as missing:
        outbound.request("GET", "https://nowhere.backend.test/echo")
    assert missing.value.reason == "unresolvable"


@pytest.mark.parametrize("url", ["http://api.backend.test/echo", "ftp://api.backend.test/", "https://u:p@api.backend.test/",
                                 "https:///nohost", "https://api.backend.test:99999/"])
def test_production_refuses_urls_that_are_not_plain_https(backend, url):
    outbound, _ = client(backend, PRODUCTION)
    with pytest.raises(OutboundRefused) as refused:
        outbound.request("GET", url)
    assert refused.value.reason == "invalid_url"


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
    "224.0.0.1", "240.0.0.1", "255.255.255.255", "168.63.129.16", "100.100.100.200",
    "::1", "::", "fe80::1", "fc00::1", "fd00:ec2::254", "ff02::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo whose client is 127.0.0.1
])
def test_internal_addresses_and_their_ipv6_forms_are_forbidden(address):
    assert forbidden_reason(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_are_allowed(address):
    assert forbidden_reason(ipaddress.ip_address(address)) is None


def test_a_redirect_is_returned_not_followed(backend):
    outbound, _ = client(backend)
    before = len(backend.received)
    response = outbound.request("GET", f"https://api.backend.test:{backend.port}/redirect")
    response.close()
    assert response.status == 302
    assert response.header("location").endswith("/echo")
    assert [r.path for r in backend.received[before:]] == ["/redirect"]


def test_the_body_streams_as_the_upstream_sends_it(backend):
    outbound, _ = client(backend)
    backend.release_stream.clear()
    response = outbound.request("GET", f"https://api.backend.test:{backend.port}/sse")
    chunks = response.stream()
    assert next(chunks) == b"data: first\n\n"  # the upstream is still holding the second event
    assert not backend.release_stream.is_set()
    backend.release_stream.set()
    assert b"".join(chunks) == b"data: second\n\n"


def test_a_slow_upstream_times_out(backend):
    outbound, _ = client(backend, read_timeout=0.3, response_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(UpstreamTimeout):
        outbound.request("GET", f"https://api.backend.test:{backend.port}/slow/2")
    assert time.monotonic() - started < 1.5


def test_a_refused_connection_is_unreachable(backend):
    outbound, _ = client(backend, answers={"api.backend.test": ["127.0.0.1"]})
    with pytest.raises(UpstreamUnreachable):
        outbound.request("GET", "https://api.backend.test:1/echo")


def test_oversized_response_headers_are_refused(backend):
    outbound, _ = client(backend, max_header_bytes=16 * 1024)
    with pytest.raises(UpstreamProtocolError):
        outbound.request("GET", f"https://api.backend.test:{backend.port}/big-headers")


def test_a_streamed_request_body_arrives_whole(backend):
    outbound, _ = client(backend)
    response = outbound.request("PUT", f"https://api.backend.test:{backend.port}/echo", [],
                                iter([b"part one, ", b"part two"]))
    assert json.loads(response.read(1 << 20))["body"] == "part one, part two"


def test_under_gevent_two_slow_requests_overlap(backend, tmp_path):
    """The client's waits yield under gevent's monkey patching: two 1-second answers take about one second."""
    script = textwrap.dedent(f"""
        from gevent import monkey; monkey.patch_all()
        import gevent, ssl, time
        from interfaces.adapters.outbound import OutboundClient, OutboundPolicy
        from tests.https_backend import MapResolver
        context = ssl.create_default_context(cafile={backend.ca_file(tmp_path)!r})
        client = OutboundClient(MapResolver({{"api.backend.test": ["127.0.0.1"]}}),
                                OutboundPolicy.for_mode(sandbox=True), ssl_context=context)
        def call():
            return client.request("GET", "https://api.backend.test:{backend.port}/slow/1").read(4096)
        started = time.monotonic()
        jobs = [gevent.spawn(call) for _ in range(2)]
        gevent.joinall(jobs, raise_error=True)
        print(round(time.monotonic() - started, 2))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip()) < 1.8
