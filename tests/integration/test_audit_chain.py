"""`paywarden audit chain`: the books checked against the sandbox chain over JSON-RPC (the localnet)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import uuid4

import pytest
from eventsourcing.persistence import StoredEvent
from solders.keypair import Keypair

from domain.idempotency import idempotency_key
from domain.networks import DEVNET
from interfaces.cli.main import main
from interfaces.sandbox.localnet import LocalnetThread
from tests.conftest import USDC, make_gateway


@pytest.fixture
def chain_books(tmp_path, sandbox, monkeypatch):
    for name in ("PAYWARDEN_DATABASE_URL", "PAYWARDEN_REDIS_URL", "PAYWARDEN_MAINNET_RPC_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    with LocalnetThread(sandbox, slot_ms=None) as localnet:
        monkeypatch.setenv("PAYWARDEN_DEVNET_RPC_URL", localnet.url)
        gateway = make_gateway(tmp_path, sandbox, devnet_rpc_url=localnet.url)
        for amount in (USDC // 100, USDC // 20):
            assert gateway.post("/settle", gateway.body(amount=amount)).status_code == 200
        yield gateway
        gateway.container.close()


def write_directly(gateway, events: list[tuple[str, dict]]) -> str:
    """Payment events written straight into the event store (no application, no aggregate), as an intruder with
    database access would; returns the payment id."""
    app = gateway.container.payments
    payment = uuid4()
    stored = []
    for version, (kind, fields) in enumerate(events, 1):
        state = {**fields, "timestamp": datetime.now(UTC)}
        if version == 1:
            state["originator_topic"] = "domain.payment:Payment"
        stored.append(StoredEvent(originator_id=payment, originator_version=version,
                                  topic=f"domain.payment:Payment.{kind}", state=app.mapper.transcoder.encode(state)))
    app.recorder.insert_events(stored)
    return str(payment)


def forge_confirmed(gateway, *, signature: str, amount: int, pay_to: str, confirmed: bool = True) -> str:
    blockhash = "11111111111111111111111111111111"
    events = [
        ("Received", {"idempotency_key": idempotency_key("merchant:forged", amount, signature),
                      "client_id": "merchant:forged", "network": DEVNET.caip2, "asset": DEVNET.usdc_mint,
                      "amount": amount, "pay_to": pay_to, "terms_digest": "forged", "client_signature": signature,
                      "extensions": {}, "resource": None, "max_timeout_seconds": 60}),
        ("Approved", {"payer": str(Keypair().pubkey()), "fee_payer": gateway.fee_payer, "blockhash": blockhash}),
        ("SettlementSubmitted", {"signature": signature, "fee_payer": gateway.fee_payer, "blockhash": blockhash,
                                 "transaction": ""}),
    ]
    if confirmed:
        events.append(("Confirmed", {"signature": signature}))
    return write_directly(gateway, events)


def test_settled_payments_agree_with_the_chain(chain_books, capsys):
    assert main(["audit", "chain"]) == 0
    captured = capsys.readouterr()  # the result on stdout, where a pipe sees it
    assert captured.err == "" and "2 settled payment(s) checked against the chain; 0 problem(s)" in captured.out
    assert main(["audit", "chain", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"checked": 2, "problems": []}


def test_a_confirmed_event_for_a_transaction_that_never_happened_is_caught(chain_books, capsys):
    never = str(Keypair().sign_message(b"never sent"))
    forged = forge_confirmed(chain_books, signature=never, amount=USDC, pay_to=str(chain_books.pay_to.pubkey()))
    assert main(["audit", "chain"]) == 1
    out = capsys.readouterr().out
    assert f"{forged}: CONFIRMED in the books, but the chain has no transaction {never}" in out


def test_a_confirmed_event_claiming_a_real_transaction_for_another_amount_is_caught(chain_books, capsys):
    real = chain_books.container.payments.recorder.select_notifications(None, 100)
    signature = next(chain_books.container.payments.mapper.to_domain_event(n).signature for n in real
                     if n.topic.endswith("Payment.Confirmed"))
    forged = forge_confirmed(chain_books, signature=signature, amount=USDC * 5,
                             pay_to=str(chain_books.pay_to.pubkey()))
    assert main(["audit", "chain"]) == 1
    out = capsys.readouterr().out
    assert f"{forged}: CONFIRMED in the books, but transaction {signature} moved" in out
    assert f"not {USDC * 5}" in out


def test_since_limits_the_check_to_recent_payments(chain_books, capsys):
    forge_confirmed(chain_books, signature=str(Keypair().sign_message(b"x")), amount=1,
                    pay_to=str(chain_books.pay_to.pubkey()))
    assert main(["audit", "chain", "--since", "2999-01-01T00:00:00Z"]) == 0
    assert "0 settled payment(s) checked" in capsys.readouterr().out


def test_a_payment_pending_past_its_blockhash_lifetime_is_listed(chain_books, capsys):
    signature = str(Keypair().sign_message(b"lost"))
    payment = forge_confirmed(chain_books, signature=signature, amount=7, pay_to=str(chain_books.pay_to.pubkey()),
                              confirmed=False)
    assert main(["audit", "chain"]) == 1
    assert f"{payment}: pending past its blockhash lifetime" in capsys.readouterr().out


def test_beside_a_running_up_the_chain_is_the_localnet_it_serves(chain_books, tmp_path, monkeypatch, capsys):
    """Issue 27, finding 6: no PAYWARDEN_DEVNET_RPC_URL, but `up` (this process stands in for it) recorded its
    localnet in the data directory."""
    import json
    import os

    from interfaces.config import RUNNING_STACK

    localnet_url = os.environ["PAYWARDEN_DEVNET_RPC_URL"]
    monkeypatch.delenv("PAYWARDEN_DEVNET_RPC_URL")
    assert main(["audit", "chain"]) == 1
    assert "no RPC endpoint is configured" in capsys.readouterr().out
    (tmp_path / RUNNING_STACK).write_text(json.dumps({"pid": os.getpid(), "rpc_url": localnet_url}))
    assert main(["audit", "chain"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "2 settled payment(s) checked against the chain; 0 problem(s)" in out
