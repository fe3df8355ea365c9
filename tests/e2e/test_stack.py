"""`paywarden up` end to end: the real x402 SDK client pays the example merchant API, settles once under
concurrent retries, and the stack stops cleanly on SIGINT."""

from __future__ import annotations

import base64
import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import requests
from solana.rpc.api import Client
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.signature import Signature

from domain.exact import associated_token_address
from domain.networks import Programs
from interfaces.sandbox.exact_client import build_exact_payment, to_base64

PRICE = 10_000


def usdc_balance(rpc: Client, owner: str, mint: str) -> int:
    account = associated_token_address(owner, mint, Programs.TOKEN)
    return int(rpc.get_token_account_balance(Pubkey.from_string(account)).value.amount)


def payer_keypair(stack) -> Keypair:
    return Keypair.from_bytes(bytes(json.loads(Path(stack["payer_keypair_path"]).read_text())))


def confirmed_events(stack) -> int:
    with sqlite3.connect(stack.data_dir / "payments.db") as db:
        return db.execute("SELECT count(*) FROM stored_events WHERE topic LIKE '%Payment.Confirmed'").fetchone()[0]


def test_up_prints_every_address_and_keypair_files_in_the_solana_cli_format(stack):
    for name in ("base_url", "rpc_url", "network", "usdc_mint", "fee_payers", "fee_payer_keypair_paths",
                 "api_key", "payer_keypair_path", "database_url", "merchant", "demo_url"):
        assert stack[name], name
    assert stack["api_key"].startswith("pw_test_") and len(stack["api_key"]) == 48
    for path in [stack["payer_keypair_path"], *stack["fee_payer_keypair_paths"]]:
        values = json.loads(Path(path).read_text())
        assert len(values) == 64 and all(0 <= v < 256 for v in values)
    assert str(payer_keypair(stack).pubkey()) == stack["payer"]
    health = httpx.post(stack["rpc_url"], json={"jsonrpc": "2.0", "id": 1, "method": "getHealth"})
    assert health.json()["result"] == "ok"


def test_the_x402_sdk_client_pays_the_example_merchant_api(stack):
    from x402 import x402ClientSync
    from x402.http.clients import wrapRequestsWithPayment
    from x402.mechanisms.svm.exact import ExactSvmScheme
    from x402.mechanisms.svm.signers import KeypairSigner

    rpc = Client(stack["rpc_url"])
    before = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]), usdc_balance(rpc, stack["payer"],
                                                                                   stack["usdc_mint"])
    unpaid = requests.get(stack["demo_url"], timeout=30)
    assert unpaid.status_code == 402
    required = json.loads(base64.b64decode(unpaid.headers["PAYMENT-REQUIRED"]))
    assert required["x402Version"] == 2 and required["accepts"][0]["extra"]["feePayer"] in stack["fee_payers"]

    client = x402ClientSync()
    client.register("solana:*", ExactSvmScheme(KeypairSigner(payer_keypair(stack)), rpc_url=stack["rpc_url"]))
    paid = wrapRequestsWithPayment(requests.Session(), client).get(stack["demo_url"], timeout=60)
    assert paid.status_code == 200 and paid.json()["forecast"] == "sunny"
    receipt = json.loads(base64.b64decode(paid.headers["PAYMENT-RESPONSE"]))
    assert receipt["success"] is True and receipt["network"] == stack["network"] and receipt["payer"] == stack["payer"]
    status = rpc.get_signature_statuses([Signature.from_string(receipt["transaction"])]).value[0]
    assert status is not None and status.err is None and str(status.confirmation_status).endswith("Confirmed")
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before[0] + PRICE
    assert usdc_balance(rpc, stack["payer"], stack["usdc_mint"]) == before[1] - PRICE


def test_the_same_settle_sent_20_times_concurrently_transfers_once(stack):
    rpc = Client(stack["rpc_url"])
    fee_payer = stack["fee_payers"][0]
    blockhash = rpc.get_latest_blockhash().value.blockhash
    tx = build_exact_payment(payer_keypair(stack), fee_payer=fee_payer, mint=stack["usdc_mint"],
                             pay_to=stack["pay_to"], amount=PRICE, blockhash=blockhash)
    body = {"x402Version": 2, "paymentPayload": {"x402Version": 2, "payload": {"transaction": to_base64(tx)}},
            "paymentRequirements": {"scheme": "exact", "network": stack["network"], "amount": str(PRICE),
                                    "asset": stack["usdc_mint"], "payTo": stack["pay_to"],
                                    "extra": {"feePayer": fee_payer}}}
    headers = {"Authorization": f"Bearer {stack['api_key']}"}
    before, confirmed_before = usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]), confirmed_events(stack)

    def settle(_: int) -> httpx.Response:
        return httpx.post(f"{stack['base_url']}/settle", json=body, headers=headers, timeout=60)

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(settle, range(20)))
    successes = [a for a in answers if a.status_code == 200]
    # Exactly one answer says success: the others were in flight with it (duplicate_request) or came after it
    # (duplicate_settlement, naming the same transaction).
    assert len(successes) == 1, [a.text for a in answers]
    transaction = successes[0].json()["transaction"]
    for answer in answers:
        if answer.status_code != 200:
            assert answer.status_code == 400, answer.text
            assert answer.json()["errorReason"] in ("duplicate_request", "duplicate_settlement"), answer.text
            if answer.json()["errorReason"] == "duplicate_settlement":
                assert answer.json()["transaction"] == transaction
    assert usdc_balance(rpc, stack["pay_to"], stack["usdc_mint"]) == before + PRICE
    assert confirmed_events(stack) == confirmed_before + 1


def test_zz_the_stack_exits_cleanly_on_sigint(stack):
    assert stack.stop() == 0
    try:
        httpx.get(stack["base_url"] + "/supported", timeout=2)
    except httpx.ConnectError:
        pass
    else:
        raise AssertionError("the API still answers after SIGINT")
