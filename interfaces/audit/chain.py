"""The books against the chain: every settled payment in the event store checked against a Solana RPC endpoint.

A CONFIRMED payment passes when its transaction exists on the chain, succeeded, and moved exactly `amount` of
`asset` into the associated token account of `payTo` (the token balances the RPC node reports before and after).
A payment still SUBMITTED whose blockhash has expired without the chain knowing its signature is pending past its
lifetime; a FAILED payment whose transaction succeeded on the chain is a mismatch too. Events are read generically
from the Payments store (topic and recorded state), so payments recorded by any version of the code are checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from eventsourcing.application import Application

from domain.solana_tx import associated_token_address
from interfaces.audit.history import plain_state

PAYMENT = "domain.payment:Payment."
BATCH = 500
BATCH_CALLS = 100  # JSON-RPC calls per HTTP request: ~20 KB of getTransaction, under a validator's 50 KiB body limit
TRANSACTION_CONFIG = {"encoding": "json", "commitment": "confirmed", "maxSupportedTransactionVersion": 0}


class RpcUnavailable(Exception):
    """The RPC endpoint of a network did not answer."""


@dataclass
class BookedPayment:
    payment_id: str
    received_at: datetime
    network: str
    asset: str
    amount: int
    pay_to: str
    state: str = "RECEIVED"
    signature: str | None = None
    blockhash: str | None = None


@dataclass
class ChainReport:
    checked: int = 0
    problems: list[str] = field(default_factory=list)


class JsonRpc:
    """The few JSON-RPC calls the check needs, over HTTP."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self._url, self._client = url, httpx.Client(timeout=timeout)

    def call(self, method: str, *params: Any) -> Any:
        try:
            answer = self._client.post(self._url, json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                         "params": list(params)})
            body = answer.json()
        except (httpx.HTTPError, ValueError) as down:
            raise RpcUnavailable(f"{self._url}: {down}") from None
        if "error" in body:
            raise RpcUnavailable(f"{self._url} {method}: {body['error']}")
        return body.get("result")

    def transaction(self, signature: str) -> dict[str, Any] | None:
        return self.call("getTransaction", signature, TRANSACTION_CONFIG)

    def transactions(self, signatures: Sequence[str]) -> list[dict[str, Any] | None]:
        """`getTransaction` of each signature, in order, `BATCH_CALLS` to one HTTP request (a JSON-RPC batch): the
        request's own cost on both sides, most of a lookup's, is paid once per batch. An endpoint that answers a
        batch with anything but one answer per call is asked one call at a time."""
        found: list[dict[str, Any] | None] = []
        for start in range(0, len(signatures), BATCH_CALLS):
            chunk = signatures[start:start + BATCH_CALLS]
            answers = self._batch([{"jsonrpc": "2.0", "id": i, "method": "getTransaction",
                                    "params": [signature, TRANSACTION_CONFIG]} for i, signature in enumerate(chunk)])
            found += [self.transaction(signature) for signature in chunk] if answers is None else answers
        return found

    def _batch(self, calls: list[dict[str, Any]]) -> list[Any] | None:
        """The results of a JSON-RPC batch by call, or None when the answer is not one result or error per call."""
        try:
            body = self._client.post(self._url, json=calls).json()
        except (httpx.HTTPError, ValueError) as down:
            raise RpcUnavailable(f"{self._url}: {down}") from None
        if not isinstance(body, list) or len(body) != len(calls):
            return None
        by_id = {answer.get("id"): answer for answer in body if isinstance(answer, dict)}
        if set(by_id) != {call["id"] for call in calls}:
            return None
        for answer in by_id.values():
            if "error" in answer:
                raise RpcUnavailable(f"{self._url} {calls[0]['method']}: {answer['error']}")
        return [by_id[call["id"]].get("result") for call in calls]

    def signatures_for(self, address: str, until: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        """`getSignaturesForAddress`: the address's transactions newest first, back to (not including) `until`."""
        config: dict[str, Any] = {"commitment": "confirmed", "limit": limit}
        if until:
            config["until"] = until
        return list(self.call("getSignaturesForAddress", address, config) or [])

    def blockhash_valid(self, blockhash: str) -> bool:
        return bool(self.call("isBlockhashValid", blockhash, {"commitment": "confirmed"})["value"])

    def close(self) -> None:
        self._client.close()


def booked_payments(payments: Application, since: datetime | None = None) -> Iterator[BookedPayment]:
    """Every payment as the events record it, in the order received."""
    found: dict[str, BookedPayment] = {}
    start = None
    while True:
        notifications = payments.recorder.select_notifications(start, BATCH, inclusive_of_start=False)
        for n in notifications:
            if not n.topic.startswith(PAYMENT):
                continue
            kind, key = n.topic.removeprefix(PAYMENT), str(n.originator_id)
            state = payments.mapper.transcoder.decode(plain_state(payments, n.state))
            if kind == "Received":
                found[key] = BookedPayment(key, state.get("timestamp") or datetime.now(UTC), state["network"],
                                           state["asset"], int(state["amount"]), state["pay_to"])
                continue
            payment = found.get(key)
            if payment is None:
                continue
            if kind == "SettlementSubmitted":
                payment.state, payment.signature, payment.blockhash = ("SUBMITTED", state.get("signature"),
                                                                       state.get("blockhash"))
            elif kind == "Confirmed":
                payment.state, payment.signature = "CONFIRMED", state.get("signature") or payment.signature
            elif kind == "Failed":
                payment.state, payment.signature = "FAILED", state.get("signature") or payment.signature
        if len(notifications) < BATCH:
            break
        start = notifications[-1].id
    for payment in found.values():
        moment = payment.received_at if payment.received_at.tzinfo else payment.received_at.replace(tzinfo=UTC)
        if since is None or moment >= since:
            yield payment


def check(payments: Application, rpc_for: Any, since: datetime | None = None) -> ChainReport:
    """`rpc_for(network)` is the JsonRpc of a network, or None when no endpoint is configured for it."""
    report = ChainReport()
    for p in booked_payments(payments, since):
        if p.state not in ("CONFIRMED", "SUBMITTED", "FAILED") or p.signature is None:
            continue
        rpc = rpc_for(p.network)
        if rpc is None:
            report.problems.append(f"{p.payment_id}: {p.state}, but no RPC endpoint is configured for {p.network}")
            continue
        report.checked += 1
        landed = rpc.transaction(p.signature)
        if p.state == "CONFIRMED":
            if (problem := confirmed_problem(p, landed)) is not None:
                report.problems.append(f"{p.payment_id}: CONFIRMED in the books, but {problem}")
        elif p.state == "SUBMITTED":
            if landed is not None and landed["meta"]["err"] is None:
                report.problems.append(f"{p.payment_id}: SUBMITTED in the books, but {p.signature} succeeded on "
                                       "the chain: settle it again to record the confirmation")
            elif landed is None and p.blockhash and not rpc.blockhash_valid(p.blockhash):
                report.problems.append(f"{p.payment_id}: pending past its blockhash lifetime ({p.signature} never "
                                       "landed; its blockhash expired): it will never confirm")
        elif landed is not None and landed["meta"]["err"] is None:
            report.problems.append(f"{p.payment_id}: FAILED in the books, but {p.signature} succeeded on the chain")
    return report


def confirmed_problem(p: BookedPayment, landed: dict[str, Any] | None) -> str | None:
    if landed is None:
        return f"the chain has no transaction {p.signature}"
    meta = landed.get("meta") or {}
    if meta.get("err") is not None:
        return f"transaction {p.signature} failed on the chain: {meta['err']}"
    message = landed["transaction"]["message"]
    loaded = meta.get("loadedAddresses") or {}
    keys = [*message["accountKeys"], *loaded.get("writable", []), *loaded.get("readonly", [])]
    moved: dict[str, int] = {}
    programs: dict[str, str] = {}
    for sign, balances in ((-1, meta.get("preTokenBalances") or []), (1, meta.get("postTokenBalances") or [])):
        for b in balances:
            if b.get("mint") != p.asset:
                continue
            account = keys[b["accountIndex"]]
            moved[account] = moved.get(account, 0) + sign * int(b["uiTokenAmount"]["amount"])
            programs[account] = b.get("programId") or ""
    destinations = {associated_token_address(p.pay_to, p.asset, program) for program in set(programs.values())
                    if program}
    received = sum(moved.get(account, 0) for account in destinations)
    if received != p.amount:
        return (f"transaction {p.signature} moved {received} of {p.asset} to {p.pay_to}'s token account, "
                f"not {p.amount}")
    return None
