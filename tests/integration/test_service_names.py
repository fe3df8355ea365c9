"""Money is named by service, not by host: a client pays through the proxy (the official x402 SDK client, a real
HTTPS backend, the sandbox chain), and the merchant's overview chart and last payments, payments list and API,
payment page and both CSV exports name the service "Weather" instead of `127.0.0.1:PORT/weather`; a rename renames
the history; a payment verified by the merchant's own server keeps its host and first path segment."""

from __future__ import annotations

import csv
import io
import re

from interfaces.cli.main import main
from interfaces.runtime.workers import catch_up_all
from tests.conftest import USDC
from tests.integration.console_helpers import ApiClient, add_owner, console_client
from tests.integration.test_proxy import stack  # noqa: F401 - the proxy stack fixture

OWN_SERVER = "https://api.acme.example/v1/quotes"


def services_shown(stack, tmp_path, capsys) -> dict[str, set[str]]:  # noqa: F811 - the fixture's value
    """Each place money is shown, with the service names it shows."""
    container = stack.gateway.container
    catch_up_all(container, ["payment_list", "payment_volume"])
    console = ApiClient(console_client(container))
    assert console.login("owner@acme.test").status_code == 200
    page = lambda path: console.client.simulate_get(path, cookies={"pw_console_session": console.session}).text  # noqa: E731
    payments = console.request("GET", "/payments").json["payments"]
    overview, listing = page("/"), page("/payments")
    exported = console.request("GET", "/payments/export").text
    output = tmp_path / "export.csv"
    assert main(["payments", "export", "--merchant", "acme", "-o", str(output)]) == 0
    capsys.readouterr()
    return {
        "chart": set(re.findall(r'<rect class="settled"[^>]*data-service="([^"]+)"', overview)),
        "overview": set(re.findall(r'<td class="service">([^<]+)</td>', overview)),
        "api": {p["service"] for p in payments},
        "list": set(re.findall(r'<td class="service"><span title="[^"]*">([^<]+)</span>', listing)),
        "page": {m for p in payments for m in re.findall(r'id="payment-service">([^<]+)<', page(
            f"/payments/{p['id']}"))},
        "console csv": {r["service"] for r in csv.DictReader(io.StringIO(exported))},
        "cli csv": {r["service"] for r in csv.DictReader(io.StringIO(output.read_text()))},
    }


def test_the_merchant_sees_its_money_by_service_name_everywhere(stack, tmp_path, monkeypatch, capsys):  # noqa: F811
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(stack.gateway.container.config.data_dir))
    add_owner(stack.gateway.container, "acme", "owner@acme.test")
    stack.route("/weather/*")
    assert stack.slug == "weather"
    assert stack.paying_session().get(stack.url("/weather/today"), timeout=60).status_code == 200

    assert set().union(*services_shown(stack, tmp_path, capsys).values()) == {"Weather"}

    stack.proxies.rename("acme", stack.service_id, "My Quotes")  # the history is renamed with the service
    body = stack.gateway.body(amount=USDC // 50)
    body["paymentPayload"]["resource"] = {"url": OWN_SERVER}  # paid at the merchant's own server
    assert stack.gateway.post("/settle", body).json["success"]
    for place, names in services_shown(stack, tmp_path, capsys).items():
        assert names == {"My Quotes", "api.acme.example/v1"}, place
