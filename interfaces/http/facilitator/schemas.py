"""Marshmallow schemas of the x402 v2 wire format: every field validated at the edge, sizes bounded.

The schemas are the definition (the OpenAPI document is built from them, and every refusal's message and code comes
from them). `fast_payment_request` is the hot path of POST /verify and /settle: it accepts only bodies the schema
accepts, builds exactly what the schema's `load` builds, and answers None for anything else, which then goes through
the schema (tests/unit/interfaces/test_fast_request.py holds both to the same table of bodies)."""

from __future__ import annotations

import re
import sys
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_dump, post_load, validate, validates

from domain.codes import Code
from domain.networks import DEFAULT_MAX_TIMEOUT_SECONDS, X402_VERSION
from domain.x402 import PaymentPayload, Requirements

WRONG_VERSION = f"x402Version must be {X402_VERSION}"
CAIP2 = re.compile(r"^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$")
BASE58 = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{32,44}$")
BASE58_ADDRESS = validate.Regexp(BASE58, error="not a base58 address")
U64_MAX = 2**64 - 1
MAX_TRANSACTION_B64 = 1644  # a Solana packet is 1232 bytes; base64 of that, rounded up
MAX_MEMO_BYTES = 256  # x402 SVM `exact`: extra.memo


class Version(fields.Integer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, validate=validate.Equal(X402_VERSION, error=WRONG_VERSION), **kwargs)


def _utf8_length(text: str) -> int:
    """The UTF-8 length of `text`; past any limit for a lone surrogate (JSON's "\\ud800"), which has none."""
    try:
        return len(text.encode())
    except UnicodeEncodeError:
        return sys.maxsize


class Atomic(fields.Field[int]):
    """An amount of atomic units: a string of digits, at least 1, at most u64; loaded as an int."""

    _text = fields.String()

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        text = self._text.deserialize(value, attr, data, **kwargs)
        # isascii: str.isdigit() is also true of "²" or "٣", which int() refuses or reads as another number
        if not text.isascii() or not text.isdigit() or len(text) > 20 or not 0 < int(text) <= U64_MAX:
            raise ValidationError("must be a string of atomic units between 1 and 2^64-1")
        return int(text)


class PaymentRequirementsSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    scheme = fields.String(required=True, validate=validate.Length(1, 32))
    network = fields.String(required=True, validate=validate.Length(1, 64))
    amount = Atomic(required=True)
    asset = fields.String(required=True, validate=BASE58_ADDRESS)
    pay_to = fields.String(required=True, data_key="payTo", validate=BASE58_ADDRESS)
    max_timeout_seconds = fields.Integer(strict=True, data_key="maxTimeoutSeconds",
                                         load_default=DEFAULT_MAX_TIMEOUT_SECONDS, validate=validate.Range(1, 86_400))
    extra = fields.Dict(keys=fields.String(), load_default=dict)

    @validates("network")
    def _caip2(self, value: str, **_: Any) -> None:
        if not CAIP2.fullmatch(value):
            raise ValidationError("must be a CAIP-2 identifier <namespace>:<reference>")

    @validates("extra")
    def _memo(self, value: dict[str, Any], **_: Any) -> None:
        memo = value.get("memo")
        if memo is not None and (not isinstance(memo, str) or _utf8_length(memo) > MAX_MEMO_BYTES):
            raise ValidationError({"memo": [f"extra.memo must be a UTF-8 string of at most {MAX_MEMO_BYTES} bytes"]})

    @post_load
    def _make(self, data: dict[str, Any], **_: Any) -> Requirements:
        return Requirements(**data)


class ExactPayloadSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    transaction = fields.String(required=True, validate=validate.Length(1, MAX_TRANSACTION_B64))


class ResourceSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    url = fields.String(required=True, validate=validate.Length(1, 2048))
    description = fields.String(validate=validate.Length(max=1024))
    mime_type = fields.String(data_key="mimeType", validate=validate.Length(max=255))


class PaymentPayloadSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    x402_version = Version(required=True, data_key="x402Version")
    resource = fields.Nested(ResourceSchema)
    accepted = fields.Nested(PaymentRequirementsSchema)
    payload = fields.Nested(ExactPayloadSchema, required=True)
    extensions = fields.Dict(keys=fields.String(), load_default=dict)

    @post_load
    def _make(self, data: dict[str, Any], **_: Any) -> PaymentPayload:
        resource = data.get("resource")
        if resource is not None:
            resource = {("mimeType" if k == "mime_type" else k): v for k, v in resource.items()}
        return PaymentPayload(transaction=data["payload"]["transaction"], accepted=data.get("accepted"),
                              resource=resource, extensions=data["extensions"])


class PaymentRequestSchema(Schema):
    """The body of POST /verify and POST /settle."""

    class Meta:
        unknown = EXCLUDE

    x402_version = Version(data_key="x402Version")
    payment_payload = fields.Nested(PaymentPayloadSchema, required=True, data_key="paymentPayload")
    payment_requirements = fields.Nested(PaymentRequirementsSchema, required=True, data_key="paymentRequirements")


_MISSING = object()
_BASE58_MATCH = BASE58.match  # as `validate.Regexp` matches
_CAIP2_MATCH = CAIP2.fullmatch


def fast_payment_request(body: dict[str, Any]) -> tuple[PaymentPayload, Requirements] | None:
    """`PaymentRequestSchema().load(body)`'s payload and requirements for a body that is plainly valid; None when
    anything is missing, of another type, out of range or unusual (the schema then decides, and words the refusal)."""
    version = body.get("x402Version", _MISSING)
    if version is not _MISSING and (type(version) is not int or version != X402_VERSION):
        return None
    payload, terms = _fast_payload(body.get("paymentPayload")), _fast_requirements(body.get("paymentRequirements"))
    if payload is None or terms is None:
        return None
    return payload, terms


def _fast_requirements(data: Any) -> Requirements | None:
    if type(data) is not dict:
        return None
    scheme, network, amount = data.get("scheme"), data.get("network"), data.get("amount")
    asset, pay_to = data.get("asset"), data.get("payTo")
    if type(scheme) is not str or not 0 < len(scheme) <= 32:
        return None
    if type(network) is not str or not 0 < len(network) <= 64 or not _CAIP2_MATCH(network):
        return None
    if type(amount) is not str or not 0 < len(amount) <= 20 or not amount.isascii() or not amount.isdigit():
        return None
    atomic = int(amount)
    if not 0 < atomic <= U64_MAX:
        return None
    if type(asset) is not str or not _BASE58_MATCH(asset) or type(pay_to) is not str or not _BASE58_MATCH(pay_to):
        return None
    timeout = data.get("maxTimeoutSeconds", DEFAULT_MAX_TIMEOUT_SECONDS)
    if type(timeout) is not int or not 1 <= timeout <= 86_400:
        return None
    extra = _object(data, "extra")
    if extra is None:
        return None
    memo = extra.get("memo")
    if memo is not None and (type(memo) is not str or not memo.isascii() or len(memo) > MAX_MEMO_BYTES):
        return None
    return Requirements(scheme=scheme, network=network, amount=atomic, asset=asset, pay_to=pay_to,
                        max_timeout_seconds=timeout, extra=extra)


def _fast_payload(data: Any) -> PaymentPayload | None:
    if type(data) is not dict:
        return None
    version, payload = data.get("x402Version"), data.get("payload")
    if type(version) is not int or version != X402_VERSION or type(payload) is not dict:
        return None
    transaction = payload.get("transaction")
    if type(transaction) is not str or not 0 < len(transaction) <= MAX_TRANSACTION_B64:
        return None
    accepted = data.get("accepted", _MISSING)
    if accepted is _MISSING:
        accepted = None
    elif (accepted := _fast_requirements(accepted)) is None:
        return None
    resource = data.get("resource", _MISSING)
    if resource is _MISSING:
        resource = None
    elif (resource := _fast_resource(resource)) is None:
        return None
    extensions = _object(data, "extensions")
    if extensions is None:
        return None
    return PaymentPayload(transaction=transaction, accepted=accepted, resource=resource, extensions=extensions)


def _object(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A copy of the optional object `key` ({} when absent); None when it is not an object."""
    value = data.get(key, _MISSING)
    if value is _MISSING:
        return {}
    return dict(value) if type(value) is dict else None


def _fast_resource(data: Any) -> dict[str, Any] | None:
    if type(data) is not dict:
        return None
    url = data.get("url")
    if type(url) is not str or not 0 < len(url) <= 2048:
        return None
    resource = {"url": url}
    for key, most in (("description", 1024), ("mimeType", 255)):
        value = data.get(key, _MISSING)
        if value is _MISSING:
            continue
        if type(value) is not str or len(value) > most:
            return None
        resource[key] = value
    return resource


def classify(messages: Any) -> Code:
    """The spec's code for a schema failure: version first, then payload, requirements, network."""
    if not isinstance(messages, dict):
        return Code.INVALID_PAYLOAD
    payload = messages.get("paymentPayload")
    versions = [messages.get("x402Version"), payload.get("x402Version") if isinstance(payload, dict) else None]
    if any(v and WRONG_VERSION in v for v in versions):
        return Code.INVALID_X402_VERSION
    if payload is not None or "_schema" in messages:
        return Code.INVALID_PAYLOAD
    requirements = messages.get("paymentRequirements")
    if isinstance(requirements, dict) and set(requirements) == {"network"}:
        return Code.INVALID_NETWORK
    return Code.INVALID_PAYMENT_REQUIREMENTS


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


class VerifyResponseSchema(Schema):
    is_valid = fields.Boolean(data_key="isValid", required=True)
    payer = fields.String()
    invalid_reason = fields.String(data_key="invalidReason")
    invalid_message = fields.String(data_key="invalidMessage",
                                    metadata={"description": "the field or rule that failed, in words (x402 v2)"})
    simulation_details = fields.Dict(data_key="simulationDetails")

    _clean = post_dump(lambda self, data, **_: _without_none(data))


class SettleResponseSchema(Schema):
    success = fields.Boolean(required=True)
    transaction = fields.String()
    network = fields.String()
    payer = fields.String()
    error_reason = fields.String(data_key="errorReason")
    error_message = fields.String(data_key="errorMessage",
                                  metadata={"description": "the field or rule that failed, in words (x402 v2)"})

    _clean = post_dump(lambda self, data, **_: _without_none(data))


def verify_answer(outcome: Any) -> dict[str, Any]:
    """`VerifyResponseSchema().dump(outcome)`, without marshmallow: the same keys in the same order."""
    details = outcome.simulation_details
    return _without_none({"isValid": outcome.is_valid, "payer": _text(outcome.payer),
                          "invalidReason": _text(outcome.invalid_reason),
                          "invalidMessage": _text(outcome.invalid_message),
                          "simulationDetails": None if details is None else dict(details)})


def settle_answer(outcome: Any) -> dict[str, Any]:
    """`SettleResponseSchema().dump(outcome)`, without marshmallow: the same keys in the same order."""
    return _without_none({"success": outcome.success, "transaction": _text(outcome.transaction),
                          "network": _text(outcome.network), "payer": _text(outcome.payer),
                          "errorReason": _text(outcome.error_reason), "errorMessage": _text(outcome.error_message)})


def _text(value: Any) -> str | None:
    """What `fields.String` dumps: None stays None, anything else its text."""
    return value if value is None or type(value) is str else str(value)


class SupportedQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    service = fields.String(validate=validate.Length(1, 128))
    path = fields.String(validate=validate.Length(1, 1024))
