"""Marshmallow schemas of the answers the resources build as plain dicts (supported, the discovery catalog, error
bodies, health): what the OpenAPI document describes them with, and what a test can validate them against."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from domain.discovery import TYPES
from domain.networks import X402_VERSION


class ErrorSchema(Schema):
    error = fields.String(required=True, metadata={"description": "a snake_case code"})
    message = fields.String(required=True)


class KindSchema(Schema):
    x402_version = fields.Integer(required=True, data_key="x402Version", validate=validate.Equal(X402_VERSION))
    scheme = fields.String(required=True, validate=validate.Equal("exact"))
    network = fields.String(required=True)
    extra = fields.Dict(required=True, metadata={"description": "`feePayer`: the signer to build the transaction "
                                                                "with"})


class SupportedResponseSchema(Schema):
    kinds = fields.List(fields.Nested(KindSchema), required=True)
    extensions = fields.List(fields.Dict(), required=True)
    signers = fields.Dict(keys=fields.String(), values=fields.List(fields.String()), required=True,
                          metadata={"description": "CAIP family (`solana:*`) → the signer addresses serving its "
                                                   "networks, as x402 v2 and its reference facilitator send it"})


class ProviderSchema(Schema):
    name = fields.String()
    description = fields.String(allow_none=True)
    url = fields.String()


class ListingMetadataSchema(Schema):
    title = fields.String()
    description = fields.String(allow_none=True)
    tags = fields.List(fields.String())


class DiscoveryAcceptSchema(Schema):
    scheme = fields.String(required=True)
    network = fields.String(required=True)
    max_amount_required = fields.String(required=True, data_key="maxAmountRequired")
    asset = fields.String(required=True)
    pay_to = fields.String(required=True, data_key="payTo")
    max_timeout_seconds = fields.Integer(required=True, data_key="maxTimeoutSeconds")
    description = fields.String(allow_none=True)
    mime_type = fields.String(allow_none=True, data_key="mimeType")
    output_schema = fields.Dict(data_key="outputSchema", metadata={"description": "`input` (method, type, "
                                "queryParams) and `output` (type, schema)"})
    extra = fields.Dict(metadata={"description": "`asset` and `pricing` (model, amount, asset)"})


class DiscoveryItemSchema(Schema):
    resource = fields.String(required=True)
    type = fields.String(required=True, validate=validate.OneOf(TYPES))
    method = fields.String(required=True)
    x402_version = fields.Integer(required=True, data_key="x402Version", validate=validate.Equal(X402_VERSION))
    accepts = fields.List(fields.Nested(DiscoveryAcceptSchema), required=True)
    last_updated = fields.DateTime(required=True, data_key="lastUpdated")
    provider = fields.Nested(ProviderSchema)
    metadata = fields.Nested(ListingMetadataSchema)


class PaginationSchema(Schema):
    total = fields.Integer(required=True, validate=validate.Range(min=0))
    limit = fields.Integer(required=True, validate=validate.Range(1, 100))
    offset = fields.Integer(required=True, validate=validate.Range(min=0))


class DiscoveryResponseSchema(Schema):
    x402_version = fields.Integer(required=True, data_key="x402Version", validate=validate.Equal(X402_VERSION))
    items = fields.List(fields.Nested(DiscoveryItemSchema), required=True)
    pagination = fields.Nested(PaginationSchema, required=True)


class SearchPaginationSchema(Schema):
    limit = fields.Integer(required=True, validate=validate.Range(1, 100),
                           metadata={"description": "the page size asked for"})
    cursor = fields.String(required=True, allow_none=True, metadata={
        "description": "send it back as `cursor` (with the same query and filters) for the next page; null on the "
                       "last page"})


class DiscoverySearchResponseSchema(Schema):
    x402_version = fields.Integer(required=True, data_key="x402Version", validate=validate.Equal(X402_VERSION))
    resources = fields.List(fields.Nested(DiscoveryItemSchema), required=True)
    partial_results = fields.Boolean(required=True, data_key="partialResults", metadata={
        "description": "whether the answer was cut; always false here: every match is reachable through the "
                       "cursor"})
    pagination = fields.Nested(SearchPaginationSchema, required=True)


class HealthSchema(Schema):
    status = fields.String(required=True, validate=validate.Equal("ok"))


class BooksSchema(Schema):
    last_reconciled = fields.String(allow_none=True, required=True, metadata={
        "description": "when the books were last reconciled with the chain (ISO 8601), null before the first pass"})
    mismatches = fields.Integer(required=True, metadata={"description": "mismatches found in all (docs/audit.md)"})
    latest = fields.List(fields.String(), required=True, metadata={"description": "the latest three, in words"})


class ReadinessSchema(Schema):
    status = fields.String(required=True, validate=validate.OneOf(("ok", "unavailable")))
    checks = fields.Dict(keys=fields.String(), values=fields.String(), required=True, metadata={
        "description": "event_store, redis, rpc:<network>, fee_payer:<network>:<address> → \"ok\" or why not"})
    books = fields.Nested(BooksSchema, metadata={
        "description": "the last reconciliation of the books with the chain: a detail, not a readiness check"})


class PaymentEventSchema(Schema):
    version = fields.Integer(required=True, validate=validate.Range(min=1),
                             metadata={"description": "the event's position in the payment's history, from 1"})
    type = fields.String(required=True, metadata={"description": "`Payment.Received`, `Payment.Approved`, …"})
    recorded_at = fields.String(required=True, data_key="recordedAt",
                                metadata={"description": "ISO 8601 UTC with microseconds"})
    fields_ = fields.Dict(required=True, data_key="fields", metadata={"description": "every recorded field"})


class PaymentSchema(Schema):
    """A payment from the payments read model, with its event timeline (GET /v1/payments/{id})."""

    id = fields.String(required=True)
    state = fields.String(required=True, validate=validate.OneOf(
        ("RECEIVED", "APPROVED", "REJECTED", "SUBMITTED", "CONFIRMED", "FAILED")))
    verify_outcome = fields.String(required=True, allow_none=True, data_key="verifyOutcome",
                                   validate=validate.OneOf(("APPROVED", "REJECTED")))
    amount = fields.String(required=True, validate=validate.Regexp("^[0-9]{1,20}$"),
                           metadata={"description": "atomic units (USDC: 6 decimals)"})
    asset = fields.String(required=True)
    network = fields.String(required=True)
    pay_to = fields.String(required=True, data_key="payTo")
    payer = fields.String(required=True, allow_none=True)
    transaction = fields.String(required=True, allow_none=True, metadata={"description": "the settlement's signature"})
    reason = fields.String(required=True, allow_none=True, metadata={"description": "why it was rejected or failed"})
    idempotency_key = fields.String(required=True, data_key="idempotencyKey")
    received_at = fields.String(required=True, data_key="receivedAt")
    updated_at = fields.String(required=True, data_key="updatedAt")
    settled_at = fields.String(required=True, allow_none=True, data_key="settledAt",
                               metadata={"description": "when it was CONFIRMED; null in every other state"})
    failed_at = fields.String(required=True, allow_none=True, data_key="failedAt",
                              metadata={"description": "when its settlement FAILED (no money moved); null otherwise"})
    events = fields.List(fields.Nested(PaymentEventSchema), required=True)
