"""The checks a verify or settle request passes before any payment is looked up: the key's scope, scheme, network,
the key's environment, the accepted terms, the client's capability and the fee payer; then the transaction is
decoded and the request's idempotency key derived from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from application.errors import KeyEnvironmentError
from application.ports import Chain, Chains, FeePayers
from domain.claims import Claim
from domain.clients import Client
from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.exact import decode_wire, message_hash, payment_fingerprint, signed_message
from domain.idempotency import idempotency_key
from domain.networks import SCHEME_EXACT, network
from domain.x402 import PaymentPayload, Requirements

if TYPE_CHECKING:
    from solders.transaction import VersionedTransaction


@dataclass(frozen=True)
class PaymentRequest:
    """A checked request: its client, payload and terms, the chain that serves it and its idempotency key."""

    client: Client
    payload: PaymentPayload
    requirements: Requirements
    chain: Chain
    transaction: VersionedTransaction
    wire: bytes  # the transaction's bytes as the client sent them (canonical)
    message: bytes  # its message bytes, what its signers sign (a slice of `wire`)
    fingerprint: str
    message_hash: str
    key: str
    request_key: str | None = None  # the merchant's Idempotency-Key header (settle)
    via: str | None = None  # the door a settle came by: None for `/settle`, `proxy:<service>:<route>`
    claims: list[Claim] = field(default_factory=list)  # saved with the request's first save


def check_request(client: Client, payload: PaymentPayload, requirements: Requirements, *, chains: Chains,
                  fee_payers: FeePayers, request_key: str | None = None, via: str | None = None) -> PaymentRequest:
    """The checks that need no chain call; raises `PaymentRuleError` (or `KeyEnvironmentError`) on the first
    one broken."""
    check_scope(client, payload, requirements)
    if requirements.scheme != SCHEME_EXACT:
        raise PaymentRuleError(Code.UNSUPPORTED_SCHEME, f"scheme {requirements.scheme!r} is not supported")
    known = network(requirements.network)
    chain = chains.for_network(requirements.network) if known else None
    if known is None or chain is None:
        raise PaymentRuleError(Code.INVALID_NETWORK, f"network {requirements.network!r} is not served")
    if client.env is not None and known.key_env != client.env:
        raise KeyEnvironmentError(f"a {client.env.value} key cannot pay on {known.name}")
    if payload.accepted is not None and not payload.accepted.same_terms(requirements):
        raise PaymentRuleError(Code.INVALID_PAYMENT_REQUIREMENTS,
                               "paymentPayload.accepted differs from paymentRequirements")
    if not client.may_use(requirements.network, requirements.scheme, requirements.asset):
        raise PaymentRuleError(Code.CAPABILITY_NOT_ENABLED,
                               f"capability exact on {requirements.network} for asset {requirements.asset} "
                               "is not enabled for this client")
    fee_payer = requirements.extra.get("feePayer")
    if fee_payer is not None and fee_payer not in fee_payers.addresses(requirements.network):
        raise PaymentRuleError(Code.INVALID_FEE_PAYER, f"feePayer {fee_payer} is not a signer of this service")
    tx, wire = decode_wire(payload.transaction)
    message = signed_message(wire)
    digest = message_hash(tx, message)
    key = idempotency_key(client.id, requirements.amount, digest)
    return PaymentRequest(client, payload, requirements, chain, tx, wire, message, payment_fingerprint(tx), digest,
                          key, request_key, via)


def check_scope(client: Client, payload: PaymentPayload, terms: Requirements) -> None:
    """A key scoped to a proxy service pays only for what one of that service's routes, or an `mcp` service's priced
    tools, charges (domain/scopes.py): other terms are refused before any payment is recorded."""
    scope = client.scope
    if scope is not None and not scope.allows(payload, terms):
        raise PaymentRuleError(Code.INVALID_PAYMENT_REQUIREMENTS,
                               f"this API key is scoped to the service {scope.slug}, and none of its {scope.priced} "
                               f"charges {terms.amount} of {terms.asset} on {terms.network} to {terms.pay_to}"
                               + (" for this resource" if payload.resource else ""))
