"""Marshmallow schemas of the x402 v2 wire format: every field validated at the edge, sizes bounded."""

from __future__ import annotations

import re
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, post_dump, post_load, validate, validates

from domain.codes import Code
from domain.networks import DEFAULT_MAX_TIMEOUT_SECONDS, X402_VERSION
from domain.x402 import PaymentPayload, Requirements

WRONG_VERSION = f"x402Version must be {X402_VERSION}"
CAIP2 = re.compile(r"^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$")
BASE58_ADDRESS = validate.Regexp(r"^[1-9A-HJ-NP-Za-km-z]{32,44}$", error="not a base58 address")
U64_MAX = 2**64 - 1
MAX_TRANSACTION_B64 = 1644  # a Solana packet is 1232 bytes; base64 of that, rounded up
MAX_MEMO_BYTES = 256  # x402 SVM `exact`: extra.memo


class Version(fields.Integer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, validate=validate.Equal(X402_VERSION, error=WRONG_VERSION), **kwargs)


class Atomic(fields.Field[int]):
    """An amount of atomic units: a string of digits, at least 1, at most u64; loaded as an int."""

    _text = fields.String()

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        text = self._text.deserialize(value, attr, data, **kwargs)
        if not text.isdigit() or len(text) > 20 or not 0 < int(text) <= U64_MAX:
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
        if memo is not None and (not isinstance(memo, str) or len(memo.encode()) > MAX_MEMO_BYTES):
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


class SimulationDetailsSchema(Schema):
    error = fields.String()
    error_code = fields.String(data_key="errorCode")
    logs = fields.List(fields.String())


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


class SupportedQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE

    service = fields.String(validate=validate.Length(1, 128))
    path = fields.String(validate=validate.Length(1, 1024))
