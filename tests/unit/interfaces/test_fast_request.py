"""The hot path of POST /verify and /settle against the schemas it stands in for. `fast_payment_request`: on a table
of valid, hostile and edge bodies it either builds exactly what `PaymentRequestSchema().load` builds, or hands the
body to the schema (None); it never accepts a body the schema refuses. `verify_answer`/`settle_answer`: the schemas'
`dump`, key for key and in the same order."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from marshmallow import ValidationError

from application.outcomes import SettleOutcome, VerifyOutcome
from domain.codes import Code
from interfaces.http.facilitator.schemas import (
    PaymentRequestSchema,
    SettleResponseSchema,
    VerifyResponseSchema,
    fast_payment_request,
    settle_answer,
    verify_answer,
)

ADDRESS = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU"
PAY_TO = "9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM"


def terms() -> dict[str, Any]:
    return {"scheme": "exact", "network": "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1", "amount": "10000",
            "asset": ADDRESS, "payTo": PAY_TO, "maxTimeoutSeconds": 60,
            "extra": {"feePayer": ADDRESS, "memo": "order-42"}}


def full_body() -> dict[str, Any]:
    return {
        "x402Version": 2,
        "paymentPayload": {
            "x402Version": 2, "payload": {"transaction": "AQID" * 100},
            "resource": {"url": "https://api.example/weather", "description": "today", "mimeType": "text/plain"},
            "accepted": terms(), "extensions": {"bazaar": {"info": 1}},
        },
        "paymentRequirements": terms(),
    }


def minimal_body() -> dict[str, Any]:
    return {"paymentPayload": {"x402Version": 2, "payload": {"transaction": "AQID"}},
            "paymentRequirements": {"scheme": "exact", "network": "solana:devnet", "amount": "1", "asset": ADDRESS,
                                    "payTo": PAY_TO}}


HOSTILE: list[Any] = [
    None, True, False, 0, 1, 2, 3, -1, 2.0, 1.5, 1e300, 2**64 - 1, 2**64, 86_400, 86_401,
    "", " ", "2", "0", "00001", "-1", "1.0", "1e3", "18446744073709551615", "18446744073709551616", "1" * 21,
    "٣", "²", "１", "exact", "x" * 33, "x" * 65, "x" * 256, "x" * 257, "x" * 1025, "x" * 2049, "é" * 129,
    "é" * 200, "\ud800", "solana:devnet", "solana:", "SOLANA:devnet", "solana:devnet\n", ADDRESS, ADDRESS + "\n",
    ADDRESS[:31], ADDRESS + "abc", "0" * 32, "O" * 32, "A" * 1644, "A" * 1645,
    [], [1], {}, {"a": 1}, {"memo": None}, {"memo": 1}, {"memo": "é" * 200}, {"memo": "x" * 256}, {"memo": "x" * 257},
]


def paths(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path of a body, parents before children."""
    found: list[tuple[str, ...]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.append((*prefix, key))
            found.extend(paths(child, (*prefix, key)))
    return found


def mutated(body: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    copied = copy.deepcopy(body)
    parent = copied
    for key in path[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copied


DELETE = object()
OPTIONAL = {"x402Version", "resource", "accepted", "extensions", "extra", "maxTimeoutSeconds", "description",
            "mimeType", "memo", "feePayer", "info", "bazaar"}


def table() -> list[dict[str, Any]]:
    bodies = [full_body(), minimal_body()]
    for base in (full_body(), minimal_body()):
        for path in paths(base):
            bodies.extend(mutated(base, path, value) for value in [*HOSTILE, DELETE])
            bodies.append(mutated(base, (*path[:-1], "unknown"), "x"))  # an unknown key beside it
        bodies.append({**base, "payment_payload": base["paymentPayload"], "extra": 1})
    bodies.extend([{}, {"x402Version": 2}, {"paymentPayload": None, "paymentRequirements": None}])
    return bodies


def schema_load(body: dict[str, Any]) -> Any:
    try:
        loaded = PaymentRequestSchema().load(body)
    except ValidationError:
        return "refused"
    except Exception as failure:  # noqa: BLE001 - whatever the schema raises, the fast path must not answer
        return f"raised {type(failure).__name__}"
    return loaded["payment_payload"], loaded["payment_requirements"]


def everything(loaded: Any) -> Any:
    """Every field, the ones dataclass equality skips (extra, extensions) included."""
    return [dataclasses.asdict(part) for part in loaded]


def test_the_fast_path_builds_what_the_schema_builds_or_leaves_the_body_to_it():
    bodies = table()
    taken = 0
    for body in bodies:
        fast, slow = fast_payment_request(copy.deepcopy(body)), schema_load(copy.deepcopy(body))
        if fast is None:
            continue
        taken += 1
        assert not isinstance(slow, str), f"the fast path accepted a body the schema refuses ({slow}): {body}"
        assert everything(fast) == everything(slow)
        assert [list(dataclasses.asdict(part)) for part in fast] == [list(dataclasses.asdict(p)) for p in slow]
        resource = fast[0].resource
        assert resource is None or list(resource) == list(slow[0].resource)  # same keys, same order
    refused = sum(isinstance(schema_load(copy.deepcopy(b)), str) for b in bodies)
    assert len(bodies) > 2500 and refused > 1500 and taken > 500  # the table exercises both sides


@pytest.mark.parametrize("body", [full_body(), minimal_body()])
def test_plain_bodies_take_the_fast_path_with_the_schemas_defaults(body):
    payload, requirements = fast_payment_request(body)
    assert everything((payload, requirements)) == everything(schema_load(body))
    if "extensions" not in body["paymentPayload"]:
        assert payload.extensions == {} and payload.accepted is None and payload.resource is None
        assert requirements.max_timeout_seconds == 60 and requirements.extra == {}


def test_the_loaded_dictionaries_are_copies_of_the_body():
    body = full_body()
    payload, requirements = fast_payment_request(body)
    body["paymentRequirements"]["extra"]["memo"] = "changed"
    body["paymentPayload"]["extensions"]["bazaar"] = None
    assert requirements.extra["memo"] == "order-42" and payload.extensions == {"bazaar": {"info": 1}}


VERIFY_OUTCOMES = [
    VerifyOutcome(is_valid=True, payer=ADDRESS), VerifyOutcome(is_valid=True, payer=ADDRESS, replayed=True),
    VerifyOutcome.invalid(Code.INVALID_PAYLOAD), VerifyOutcome.invalid(Code.SIMULATION_FAILED, ADDRESS, message="é"),
    VerifyOutcome.invalid("insufficient_funds", ADDRESS, {"error": "x", "logs": ["a", "b"], "errorCode": "1"}),
    VerifyOutcome(is_valid=False), VerifyOutcome(is_valid=False, payer="", invalid_reason="", simulation_details={}),
]
SETTLE_OUTCOMES = [
    SettleOutcome(success=True, transaction="5" * 88, network="solana:devnet", payer=ADDRESS),
    SettleOutcome.failed(Code.SETTLEMENT_PENDING, ADDRESS, "solana:devnet", "5" * 88),
    SettleOutcome.failed(Code.INVALID_PAYLOAD), SettleOutcome.failed("x", message="why", payer=ADDRESS),
    SettleOutcome(success=False), SettleOutcome(success=True, transaction="", network="", payer="", replayed=True),
]


@pytest.mark.parametrize("outcome", VERIFY_OUTCOMES)
def test_the_verify_answer_is_the_schemas_dump(outcome):
    answer, dumped = verify_answer(outcome), VerifyResponseSchema().dump(outcome)
    assert answer == dumped and list(answer) == list(dumped)


@pytest.mark.parametrize("outcome", SETTLE_OUTCOMES)
def test_the_settle_answer_is_the_schemas_dump(outcome):
    answer, dumped = settle_answer(outcome), SettleResponseSchema().dump(outcome)
    assert answer == dumped and list(answer) == list(dumped)


def test_the_schema_refuses_every_hostile_body_with_a_validation_error_never_an_exception():
    """A bare ValueError ("²" as an amount: isdigit() but not int()) or UnicodeEncodeError (a lone-surrogate memo)
    would be a 500; every refusal is a ValidationError, which the API words as a 400."""
    raised = {repr(b)[:200] for b in table() if str(schema_load(copy.deepcopy(b))).startswith("raised")}
    assert raised == set()
