"""Shared fixtures: a real LiteSVM sandbox chain, a gateway over it, funded wallets, and payment builders."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from falcon import testing
from solders.hash import Hash
from solders.keypair import Keypair

from domain.networks import DEVNET, KeyEnv
from interfaces.config import Config
from interfaces.container import Container, build
from interfaces.http.facilitator.app import create_app
from interfaces.sandbox.exact_client import build_exact_payment, to_base64
from interfaces.wiring import api_collaborators

# Every log record of the run is checked for API keys (tests/logcapture.py).
from tests.logcapture import no_api_key_in_logs, pytest_configure, pytest_sessionfinish  # noqa: F401
from tests.services import temporary_files_in_ram

temporary_files_in_ram()  # before pytest picks its temporary directory (and before xdist starts its workers)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook, called in the controller with what a worker collected
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """A run whose e2e tests lost their group stops here: xdist puts the group (tests/e2e/conftest.py) at the end of
    the test's id, and without it two workers would each make a virtualenv and a stack, and `test_stack.py` could
    stop the stack another worker's test uses."""
    lost = [nodeid for nodeid in ids if nodeid.startswith("tests/e2e/") and not nodeid.endswith("@e2e")]
    if lost and node.config.getvalue("dist") == "loadgroup":
        raise pytest.UsageError(f"pytest-xdist did not group the e2e tests ({lost[0]}): see setup.cfg's pytest pin")

USDC = 1_000_000


@pytest.fixture(autouse=True, scope="session")
def data_dir_never_in_home(tmp_path_factory):
    """Without PAYWARDEN_DATA_DIR the commands use ~/.local/share/paywarden: the suite (and every process it
    starts, which inherits the environment) must never touch a real home, so the session gets its own."""
    if not os.environ.get("PAYWARDEN_DATA_DIR"):
        os.environ["PAYWARDEN_DATA_DIR"] = str(tmp_path_factory.mktemp("paywarden-data"))


@dataclass
class Gateway:
    """A Paywarden API over an in-process sandbox chain, with a merchant `acme` and its test key."""

    container: Container
    client: testing.TestClient
    api_key: str
    sandbox: Any
    fee_payer: str
    pay_to: Keypair = field(default_factory=Keypair)
    payer: Keypair = field(default_factory=Keypair)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def blockhash(self) -> Hash:
        return Hash.from_string(self.sandbox.latest_blockhash()[0])

    def transaction(self, amount: int = USDC // 100, **overrides: Any) -> str:
        options = dict(fee_payer=self.fee_payer, mint=DEVNET.usdc_mint, pay_to=self.pay_to.pubkey(), amount=amount,
                       blockhash=self.blockhash())
        payer = overrides.pop("payer", self.payer)
        options.update(overrides)
        return to_base64(build_exact_payment(payer, **options))

    def body(self, transaction: str | None = None, amount: int = USDC // 100, **requirements: Any) -> dict:
        accepted = {"scheme": "exact", "network": DEVNET.caip2, "amount": str(amount), "asset": DEVNET.usdc_mint,
                    "payTo": str(self.pay_to.pubkey()), "maxTimeoutSeconds": 60,
                    "extra": {"feePayer": self.fee_payer}}
        accepted.update(requirements)
        return {
            "x402Version": 2,
            "paymentPayload": {"x402Version": 2, "payload": {"transaction": transaction or self.transaction(amount)}},
            "paymentRequirements": accepted,
        }

    def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> testing.Result:
        return self.client.simulate_post(path, json=body, headers=self.headers if headers is None else headers)


def payment_key(container: Container, api_key: str, body: dict) -> str:
    """The idempotency key Paywarden derives for `body` presented with `api_key`."""
    from domain.exact import decode_transaction, message_hash
    from domain.idempotency import idempotency_key
    from domain.merchant import key_hash

    tx = decode_transaction(body["paymentPayload"]["payload"]["transaction"])
    merchant = container.accounts.get_key(key_hash(api_key)).merchant_id
    return idempotency_key(f"merchant:{merchant}", int(body["paymentRequirements"]["amount"]), message_hash(tx))


def make_gateway(tmp_path: Path, sandbox: Any, *, resolver: Any = None, **config: Any) -> Gateway:
    container = build(Config(data_dir=tmp_path, **config), sandbox=sandbox, resolver=resolver)
    container.merchants.register("acme")
    container.merchants.enable_capability("acme", DEVNET.caip2)
    api_key, _ = container.merchants.create_key("acme", KeyEnv.TEST)
    gateway = Gateway(container, testing.TestClient(create_app(api_collaborators(container))), api_key, sandbox,
                      container.fee_payers.addresses()[0])
    sandbox.mint_usdc(str(gateway.payer.pubkey()), 10 * USDC)
    sandbox.mint_usdc(str(gateway.pay_to.pubkey()), 0)
    return gateway


@pytest.fixture
def sandbox():
    from interfaces.sandbox.chain import Sandbox

    return Sandbox()


# A `gateway` test runs on all three stores below unless it names fewer (pytest's `parametrize(..., indirect=True)`
# overrides the fixture's params); docs/testing.md says which tests take which.
EMBEDDED = pytest.mark.parametrize("store", ["embedded"], indirect=True)  # decided before any store or chain
STORES = pytest.mark.parametrize("store", ["embedded", "postgres+redis"], indirect=True)  # the store, not the chain
CHAINS = pytest.mark.parametrize("store", ["embedded", "embedded+rpc"], indirect=True)  # the chain, not the store


@pytest.fixture(params=["embedded", "embedded+rpc", "postgres+redis"])
def store(request: pytest.FixtureRequest) -> dict[str, str]:
    """The stores a gateway runs on: the embedded default (SQLite, in-process locks and cache), and PostgreSQL
    with Redis (a fresh database, the worker's Redis database flushed) as in production. `embedded+rpc` talks to the
    sandbox chain through the JSON-RPC adapter and the localnet instead of in-process."""
    if request.param == "embedded":
        return {}
    if request.param == "embedded+rpc":
        return {"chain": "rpc"}
    return {"database_url": request.getfixturevalue("postgres_url"), "redis_url": request.getfixturevalue("redis_url")}


@pytest.fixture
def gateway(tmp_path: Path, sandbox: Any, store: dict[str, str]) -> Gateway:
    options = dict(store)
    if options.pop("chain", None) == "rpc":
        from interfaces.sandbox.localnet import LocalnetThread

        with LocalnetThread(sandbox, slot_ms=None) as localnet:
            gateway = make_gateway(tmp_path, sandbox, devnet_rpc_url=localnet.url, **options)
            yield gateway
            gateway.container.close()
        return
    gateway = make_gateway(tmp_path, sandbox, **options)
    yield gateway
    gateway.container.close()


def decode(b64: str) -> bytes:
    return base64.b64decode(b64)


@pytest.fixture
def postgres_url(postgres_drops, schema_copies):
    """A fresh PostgreSQL database for one test (fails under CI, skips elsewhere, when the server is down), a copy
    of the worker's `schema_template`: every store's schema made, no event; made while the tests before it ran
    (tests/services.py ReadyCopies) and dropped after it in the background (LaterDrops). A test about creating
    the schema takes `empty_postgres_url`."""
    url = schema_copies.take()
    yield url
    postgres_drops.drop(url)


@pytest.fixture
def empty_postgres_url(postgres_drops):
    """A fresh, empty PostgreSQL database for one test whose claim is about creating the schema (processes racing
    to create it, what a store that created its tables keeps open); dropped like `postgres_url`'s."""
    from tests.services import fresh_postgres_database

    url = fresh_postgres_database()
    yield url
    postgres_drops.drop(url)


@pytest.fixture(scope="session")
def schema_template(postgres_drops):
    """The name of the worker's database that every store's schema was created in, by one build, once per session
    and worker (tests/services.py `database_with_schema`); `postgres_url` copies it."""
    from tests.services import database_with_schema

    url = database_with_schema()
    yield url.rsplit("/", 1)[1]
    postgres_drops.drop(url)


@pytest.fixture(scope="session")
def schema_copies(postgres_drops, schema_template):
    """Copies of `schema_template` made ahead, one test's at a time (tests/services.py ReadyCopies); those left
    at the end are dropped."""
    from tests.services import ReadyCopies

    copies = ReadyCopies(schema_template)
    yield copies
    for url in copies.finish():
        postgres_drops.drop(url)


@pytest.fixture(scope="session")
def postgres_drops():
    """The session's background drops of test databases; all of them done before the session ends."""
    from tests.services import LATER

    yield LATER
    LATER.finish()


@pytest.fixture
def redis_url():
    """The worker's Redis database (tests/services.py), flushed (fails under CI, skips elsewhere, when the server
    is down)."""
    from tests.services import clean_redis

    return clean_redis()
