"""The domain-verification adapter against real servers: a DNS server on 127.0.0.1 and an HTTPS server with a
certificate from a test CA (trustme)."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import trustme

from interfaces.adapters.domain_checks import DnsHttpChallenges, PslSuffixes
from tests.dnsserver import TxtServer
from tests.services import POLL

TOKEN = "tok-3n8Qk"
PATH = "/.well-known/paywarden-challenge/" + TOKEN


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        answers = {PATH: (200, TOKEN.encode()), "/moved": (302, b""), "/big": (200, b"x" * 5000)}
        status, body = answers.get(self.path, (404, b"no"))
        self.send_response(status)
        if status == 302:
            self.send_header("Location", PATH)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def https(tmp_path):
    ca = trustme.CA()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL}, daemon=True).start()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    yield f"https://localhost:{server.server_address[1]}", str(ca_file)
    server.shutdown()


def test_the_https_token_is_read_without_redirects_or_oversized_bodies(https):
    base, ca_file = https
    checks = DnsHttpChallenges(ca_file=ca_file)
    assert checks.fetch(base + PATH) == TOKEN
    assert checks.fetch(base + "/moved") is None  # a redirect is not followed
    assert checks.fetch(base + "/big") is None  # more than 1 KiB
    assert checks.fetch(base + "/missing") is None
    assert checks.fetch(base.replace("https", "http") + PATH) is None  # HTTPS only
    assert DnsHttpChallenges().fetch(base + PATH) is None  # a certificate the system does not trust


def test_txt_records_come_from_the_configured_nameserver():
    with TxtServer() as dns:
        dns.publish("_paywarden-challenge.api.example.test", "paywarden-verification=abc")
        dns.publish("_paywarden-challenge.api.example.test", "other")
        checks = DnsHttpChallenges([dns.nameserver])
        assert sorted(checks.txt_records("_paywarden-challenge.api.example.test")) == [
            "other", "paywarden-verification=abc"]
        assert checks.txt_records("_paywarden-challenge.nothing.example.test") == []


def test_public_suffixes_come_from_the_shipped_list():
    suffixes = PslSuffixes()
    assert suffixes.is_public_suffix("co.uk") and suffixes.is_public_suffix("github.io")
    assert not suffixes.is_public_suffix("example.co.uk") and not suffixes.is_public_suffix("me.github.io")


def test_the_list_is_parsed_once_per_process_and_only_when_read():
    """Parsing the shipped list costs 0.1-0.5 s: a process that builds a container but never reads the list (a CLI
    command, the API worker's verify path) does not pay it, and one that reads it for slugs and for domain checks
    pays it once (domain/slugs.py, `public_suffix_list`)."""
    import subprocess
    import sys

    program = """
import publicsuffixlist
made = []
original = publicsuffixlist.PublicSuffixList.__init__
def counted(self, *args, **kwargs):
    made.append(1)
    original(self, *args, **kwargs)
publicsuffixlist.PublicSuffixList.__init__ = counted
import interfaces.container
from domain.slugs import core_name
from interfaces.adapters.domain_checks import PslSuffixes
print(len(made))
assert core_name("api.weather.co.uk") == "weather" and PslSuffixes().is_public_suffix("co.uk")
assert core_name("me.github.io") == "me" and not PslSuffixes().is_public_suffix("example.co.uk")
print(len(made))
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "1"]
