"""Sign-In-With-X and payment-identifier with the official x402 SDK's own server-side helpers.

- `challenge`: the `sign-in-with-x` declaration of a 402, exactly as the SDK's resource-server extension builds it
  (`create_siwx_resource_server_extension(...).enrich_payment_required_response`): the gateway's origin as domain,
  the resource URL as URI, a fresh nonce, issued-at and expiry, the route's network as chain id and its signature
  type (`ed25519` for Solana).
- `SdkSignIns.check`: a SIGN-IN-WITH-X header parsed, its fields validated against the gateway's origin and its
  signature verified by the SDK (`parse_siwx_header`, `validate_siwx_message`, `verify_siwx_signature`).
- `payment_identifier`: the declaration (`declare_payment_identifier_extension`) and a payload's id
  (`extract_and_validate_payment_identifier`).
The SDK's server helpers are coroutines that never wait on anything; `completed` runs one to its end in the
calling (gevent) thread without an event loop.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

from x402.extensions.payment_identifier import (
    PAYMENT_IDENTIFIER,
    declare_payment_identifier_extension,
    extract_and_validate_payment_identifier,
)
from x402.extensions.sign_in_with_x import (
    SIGN_IN_WITH_X,
    CreateSIWxResourceServerExtensionOptions,
    DeclareSIWxOptions,
    create_siwx_resource_server_extension,
    declare_siwx_extension,
    normalize_configured_origin,
    parse_siwx_header,
    validate_siwx_message,
    verify_siwx_signature,
)
from x402.schemas import PaymentPayload as SdkPaymentPayload
from x402.schemas import PaymentRequired, PaymentRequirements, ResourceInfo
from x402.schemas.hooks import ServerPaymentRequiredContext

from application.access import OTHER_CHAIN, AccessRefusedError, SignedIn

T = TypeVar("T")
CHALLENGE_SECONDS = 300  # a challenge's expiry; the SDK also refuses a message issued more than 5 minutes ago
MAX_HEADER = 8 * 1024
MALFORMED = "siwx_malformed"


def completed(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that finishes without suspending (the SDK's SIWX helpers here)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the SDK helper waited on something; it cannot run here")


class _NoStorage:
    """The SDK extension's storage; Paywarden's paid routes and nonces are its own (application/access.py)."""

    def has_paid(self, resource: str, address: str) -> bool:
        return False

    def record_payment(self, resource: str, address: str) -> None:
        return None


def origin_of(public_url: str) -> str:
    """scheme://host[:port] of the gateway's public address (SIWX binds a message to an origin, not a path)."""
    parts = urlsplit(public_url)
    return normalize_configured_origin(f"{parts.scheme}://{parts.netloc}")


def challenge(origin: str, resource_url: str, requirements: dict[str, Any]) -> dict[str, Any]:
    """The `sign-in-with-x` extension of a once-paid route's 402 (`requirements`: the 402's one `accepts` entry)."""
    extension = create_siwx_resource_server_extension(
        CreateSIWxResourceServerExtensionOptions(origin=origin, storage=_NoStorage()))
    network = str(requirements["network"])
    declaration = declare_siwx_extension(DeclareSIWxOptions(network=network, expirationSeconds=CHALLENGE_SECONDS))
    accepts = PaymentRequirements.model_validate(requirements)
    resource = ResourceInfo(url=resource_url)
    context = ServerPaymentRequiredContext(
        requirements=[accepts], resource_info=resource, error=None,
        payment_required_response=PaymentRequired(x402_version=2, accepts=[accepts], resource=resource))
    enriched = extension.enrich_payment_required_response(declaration[SIGN_IN_WITH_X], context)
    return {SIGN_IN_WITH_X: completed(enriched) if isinstance(enriched, Coroutine) else enriched}


def payment_identifier_declaration() -> dict[str, Any]:
    return {PAYMENT_IDENTIFIER: declare_payment_identifier_extension(required=False)}


class BadPaymentIdentifierError(ValueError):
    """The payload's payment-identifier extension is not the SDK's shape (id of 16-128 of [A-Za-z0-9_-])."""


def payment_identifier(payload: dict[str, Any]) -> str | None:
    """The client's payment id in an x402 v2 payload (`extensions["payment-identifier"].info.id`), None without
    one."""
    extensions = payload.get("extensions")
    if not isinstance(extensions, dict) or PAYMENT_IDENTIFIER not in extensions:
        return None
    try:
        parsed = SdkPaymentPayload.model_validate({**payload, "extensions": {
            PAYMENT_IDENTIFIER: extensions[PAYMENT_IDENTIFIER]}})
    except ValueError:
        raise BadPaymentIdentifierError("PAYMENT-SIGNATURE is not an x402 v2 payload") from None
    found, validation = extract_and_validate_payment_identifier(parsed)
    if not validation.valid:
        raise BadPaymentIdentifierError("payment-identifier: " + "; ".join(validation.errors))
    return found


class SdkSignIns:
    """The `SignIns` port over the SDK (application/access.py)."""

    def check(self, header: str, origin: str) -> SignedIn:
        if len(header) > MAX_HEADER:
            raise AccessRefusedError(MALFORMED, "SIGN-IN-WITH-X is too large")
        try:
            payload = parse_siwx_header(header)
        except ValueError as bad:
            raise AccessRefusedError(MALFORMED, str(bad)) from None
        if not payload.chain_id.startswith("solana:") or payload.type != "ed25519":  # the routes are Solana's
            raise AccessRefusedError(OTHER_CHAIN, f"chain {payload.chain_id} ({payload.type}) is not a Solana chain")
        try:
            validation = completed(validate_siwx_message(payload, origin))
            if not validation.is_valid:
                raise AccessRefusedError(str(validation.invalid_reason), str(validation.invalid_message))
            verification = completed(verify_siwx_signature(payload))
        except (ValueError, TypeError, OverflowError) as bad:  # a field the SDK could not read
            raise AccessRefusedError(MALFORMED, f"SIGN-IN-WITH-X could not be read: {bad}") from None
        if not verification.is_valid or not verification.payer:
            raise AccessRefusedError(str(verification.invalid_reason or "invalid_siwx_signature"),
                                     str(verification.invalid_message or "the signature does not verify"))
        return SignedIn(address=verification.payer, uri=payload.uri, chain_id=payload.chain_id, nonce=payload.nonce)
