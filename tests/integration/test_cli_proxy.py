"""`paywarden service …` and `paywarden route …` against the embedded store (sandbox: a localhost service)."""

from __future__ import annotations

import io
import json

import pytest
from solders.keypair import Keypair

from interfaces.cli.main import main


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL", "PAYWARDEN_MODE",
                 "PAYWARDEN_PROXY_URL", "PAYWARDEN_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    return tmp_path


def run(capsys, *argv: str) -> dict | list:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def sandbox_merchant(name: str) -> None:
    """A merchant whose localhost is pre-verified, as `up` makes its sandbox merchant."""
    from interfaces.config import load_config
    from interfaces.container import build

    assert main(["merchant", "create", name]) == 0
    container = build(load_config())
    container.merchants.preverify_sandbox_domain(name)
    container.close()


def test_a_service_and_its_routes_from_the_command_line(data_dir, capsys, monkeypatch):
    sandbox_merchant("acme")
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO("upstream-secret-value\n"))
    service = run(capsys, "service", "create", "--merchant", "acme", "--name", "Weather", "--domain", "localhost",
                  "--port", "9999", "--upstream-auth", "X-Api-Key")
    assert service["type"] == "Proxy" and service["baseUrl"] == "http://localhost:9999"
    assert service["slug"] == "weather" and service["gatewayUrl"] == "http://127.0.0.1:8405/weather"
    assert service["upstreamAuth"] == {"header": "X-Api-Key", "set": True} and service["active"] is True
    assert "upstream-secret-value" not in json.dumps(service)
    assert b"upstream-secret-value" not in (data_dir / "proxy_services.db").read_bytes()

    route = run(capsys, "route", "add", "--merchant", "acme", "--service", service["id"], "--path", "/weather/*",
                "--price", "10000", "--pay-to", str(Keypair().pubkey()), "--settle", "before")
    assert route["price"] == "10000" and route["settle"] == "before" and route["method"] == "GET"
    assert [r["id"] for r in run(capsys, "route", "list", "--merchant", "acme", "--service", service["id"])] == [
        route["id"]]

    off = run(capsys, "service", "update", service["id"], "--merchant", "acme", "--active", "off", "--name", "W2")
    assert off["active"] is False and off["name"] == "W2"

    assert main(["service", "delete", service["id"], "--merchant", "acme"]) == 2
    assert "route" in capsys.readouterr().err
    assert main(["route", "delete", route["id"], "--merchant", "acme", "--service", service["id"]]) == 0
    assert main(["service", "delete", service["id"], "--merchant", "acme"]) == 0
    capsys.readouterr()
    assert run(capsys, "service", "list", "--merchant", "acme") == []


def test_https_services_need_a_verified_domain(data_dir, capsys):
    assert main(["merchant", "create", "acme"]) == 0
    assert main(["service", "create", "--merchant", "acme", "--name", "W", "--domain", "weather.com"]) == 2
    assert "not a verified domain" in capsys.readouterr().err


def test_every_command_naming_a_service_takes_its_slug_as_well_as_its_id(data_dir, capsys):
    sandbox_merchant("acme")
    sandbox_merchant("beta")
    capsys.readouterr()
    run(capsys, "service", "create", "--merchant", "acme", "--name", "First", "--domain", "localhost", "--port", "9998")
    service = run(capsys, "service", "create", "--merchant", "acme", "--name", "Quotes", "--domain", "localhost",
                  "--port", "9999")
    slug = service["slug"]
    route = run(capsys, "route", "add", "--merchant", "acme", "--service", slug, "--path", "/quotes/*",
                "--price", "10000", "--pay-to", str(Keypair().pubkey()))
    assert [r["id"] for r in run(capsys, "route", "list", "--merchant", "acme", "--service", slug)] == [route["id"]]
    assert run(capsys, "service", "show", slug.upper(), "--merchant", "acme")["id"] == service["id"]
    assert run(capsys, "service", "update", slug, "--merchant", "acme", "--name", "My Quotes")["name"] == "My Quotes"
    # Another merchant's slug names no service of yours, and the answer says what is accepted.
    assert main(["route", "list", "--merchant", "beta", "--service", slug]) == 2
    assert f"no service {slug} (give one of your services' id or slug)" in capsys.readouterr().err
    # A base-URL edit by slug made from the earlier name: the slug follows the new name, the old one is released.
    moved = run(capsys, "service", "update", slug, "--merchant", "acme", "--port", "9997")
    assert (moved["id"], moved["slug"]) == (service["id"], "my-quotes")
    assert main(["service", "show", slug, "--merchant", "acme"]) == 2
    assert run(capsys, "service", "show", moved["slug"], "--merchant", "acme")["id"] == service["id"]
    assert main(["route", "delete", route["id"], "--merchant", "acme", "--service", moved["slug"]]) == 0
    assert main(["service", "delete", moved["slug"], "--merchant", "acme"]) == 0
    capsys.readouterr()
    assert [s["name"] for s in run(capsys, "service", "list", "--merchant", "acme")] == ["First"]
