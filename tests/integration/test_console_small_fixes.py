"""Small things a new merchant tripped over in the console and the CLI: the keys page's Status column says the
status (the revoke action has its own column), every page writes times one way (`2026-11-28 14:39:32 UTC`), an
all-states export and a CONFIRMED-only export have different file names, and no error nests parentheses. Over a
real gateway on the sandbox chain (embedded store)."""

from __future__ import annotations

import re

import pytest

from interfaces.cli.main import main
from interfaces.runtime.workers import catch_up_all
from tests.conftest import make_gateway
from tests.integration.console_helpers import ApiClient, add_owner, console_client
from tests.integration.test_console_pages import log_in, post

# A moment shown (ISO 8601 with its T, or a date and a time to the second); the chart's hours ("2026-11-28 15:00"
# under an "Hour (UTC)" heading) are periods, not moments.
TIME_SHOWN = re.compile(r"\d{4}-\d\d-\d\d(?:T\d\d[^\s<,)]*| \d\d:\d\d:\d\d(?: UTC)?)")
ONE_FORMAT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


@pytest.fixture
def gateway(tmp_path, sandbox):
    gateway = make_gateway(tmp_path, sandbox)
    container = gateway.container
    add_owner(container, "acme", "owner@acme.test")
    container.merchants.preverify_sandbox_domain("acme")
    container.merchants.set_discovery("acme", True)
    assert gateway.post("/settle", gateway.body()).json["success"]
    catch_up_all(container, ["payment_list", "payment_volume"])
    yield gateway
    container.close()


def nested(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth > 1:
            return True
    return False


def test_every_page_writes_its_times_in_one_format(gateway):
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    get = lambda path: client.simulate_get(path, cookies={"pw_console_session": cookie}).text  # noqa: E731
    payment = re.search(r'href="/payments/([0-9a-f-]{36})"', get("/payments")).group(1)
    shown: dict[str, list[str]] = {}
    for path in ("/", "/keys", "/capabilities", "/domains", "/payments", f"/payments/{payment}"):
        text = re.sub(r"<[^>]*>", " ", get(path))  # the page's words, not its attributes
        shown[path] = TIME_SHOWN.findall(text)
    assert all(shown[p] for p in ("/", "/keys", "/capabilities", "/domains", "/payments")), shown
    assert all(ONE_FORMAT.fullmatch(t) for times in shown.values() for t in times), shown


def test_the_keys_status_column_says_the_status_and_revoking_has_its_own_column(gateway):
    client = console_client(gateway.container)
    cookie, csrf = log_in(client, "owner@acme.test")
    page = client.simulate_get("/keys", cookies={"pw_console_session": cookie}).text
    statuses = re.findall(r'<td class="key-status">([^<]*)</td>', page)
    assert statuses and set(statuses) == {"active"}
    prefix = re.search(r'<tr data-prefix="([^"]+)">', page).group(1)
    assert post(client, f"/keys/{prefix}/revoke", {"csrf_token": csrf}, cookie).status_code == 303
    page = client.simulate_get("/keys", cookies={"pw_console_session": cookie}).text
    row = re.search(rf'<tr data-prefix="{re.escape(prefix)}">(.*?)</tr>', page, re.S).group(1)
    assert re.search(r'<td class="key-status">revoked \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</td>', row)
    assert "Revoke" not in row
    header = re.search(r"<thead>(.*?)</thead>", page, re.S).group(1)
    assert header.count("<th") == page.split("<tbody>")[1].split("</tr>")[0].count("<td")


def test_exports_of_different_states_have_different_file_names(gateway):
    api = ApiClient(console_client(gateway.container))
    assert api.login("owner@acme.test").status_code == 200
    names = {query: api.request("GET", f"/payments/export{query}").headers["Content-Disposition"]
             for query in ("", "?state=CONFIRMED", "?state=FAILED&from=2026-01-01")}
    assert names == {"": 'attachment; filename="payments-acme-all.csv"',
                     "?state=CONFIRMED": 'attachment; filename="payments-acme-confirmed.csv"',
                     "?state=FAILED&from=2026-01-01": 'attachment; filename="payments-acme-failed-2026-01-01.csv"'}


def test_no_error_of_the_cli_nests_parentheses(gateway, tmp_path, monkeypatch, capsys):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(gateway.container.config.data_dir))
    for argv in (["key", "create", "--merchant", "nobody", "--env", "test"],
                 ["key", "create", "--merchant", "acme", "--env", "test", "--service", "nope"],
                 ["route", "add", "--merchant", "acme", "--service", "nope", "--path", "/x", "--price", "1"]):
        assert main(argv) == 2
        error = capsys.readouterr().err
        assert error.startswith("paywarden: ") and not nested(error), error
