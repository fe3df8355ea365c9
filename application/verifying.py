"""Verify: the exact checks, the co-signature and the simulation of a payment, and its first events.

A verify records only a new payment (`Received`, then `Approved` or `Rejected`): its id is uuid5 of its
idempotency key, so two verifies racing on a new payment cannot both insert it; the loser reads the one recorded
and answers as it does. That is why a verify takes no lock (docs/facilitator.md). A delivery's `admit`, a verify
that also records the forward, is here too: it appends to a recorded payment, so it runs under the lock.
"""

from __future__ import annotations

from uuid import UUID

from application.errors import DuplicateRequestError, SimulationFailedError, rule_details
from application.outcomes import (
    OTHER_TERMS,
    ProxyDecision,
    ProxyStep,
    VerifyOutcome,
    proxy_decision,
    settled_verify,
    verify_outcome,
)
from application.payment_checks import PaymentRequest
from application.payment_store import Context
from domain.claims import Claim, ClaimKind
from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.exact import ExactPayment, inspect_exact, lookup_tables, with_fee_payer_signature_wire
from domain.payment import Payment, PaymentState

SIMULATION_LOG_LINES = 5


def verify(ctx: Context, request: PaymentRequest) -> VerifyOutcome:
    """Evaluate and insert the payment's first events without reading the store first: nearly always it is new.
    A payment recorded before (the insert conflicts) answers as it would have if read first, a replay or a
    conflict of terms, and so does one whose evaluation failed for another reason than its rules (the chain
    unreachable): what was recorded answers, else the failure stands."""
    payment = receive(request)
    try:
        decide(ctx, payment, request)
    except Exception:
        if (recorded := ctx.store.payment(request.key)) is not None:
            return recorded_verify(recorded, request)
        raise
    if payment.verify_outcome is PaymentState.REJECTED:  # the chain refuses a transaction that landed...
        claim = ctx.store.claim(ClaimKind.TRANSACTION, request.message_hash)
        earlier = recorded_under_another_key(ctx, claim, payment, request)
        if earlier is not None and earlier.state is PaymentState.CONFIRMED:  # ...as this very payment
            return bound(earlier, request) or settled_verify(earlier.payer, earlier.signature).as_replay()
    try:
        ctx.store.save(payment)
    except DuplicateRequestError:
        if (recorded := ctx.store.payment(request.key)) is not None:
            return recorded_verify(recorded, request)
        raise
    return verify_outcome(payment)


def admit(ctx: Context, request: PaymentRequest, via: str) -> ProxyDecision:
    """A paid delivery's `settle: after` admission (application/deliveries.py, which holds the payment's lock: a
    forward appends to a recorded payment): verified as `verify` records it, then decided by `proxy_decision`; a
    forward is recorded in the same save as a new payment's verification."""
    payment, changed = ctx.store.payment(request.key), False
    if payment is None:
        payment, changed = receive(request), True
        decide(ctx, payment, request)
    elif (conflict := bound(payment, request)) is not None:
        return ProxyDecision.refused(request.key, conflict.invalid_reason or "", conflict.invalid_message)
    decision = proxy_decision(payment, request.key)
    if decision.step is ProxyStep.FORWARD:
        payment.forward(via)
        changed = True
    if changed:
        ctx.store.save(payment)
    return decision


def receive(request: PaymentRequest) -> Payment:
    r = request.requirements
    return Payment.receive(
        idempotency_key=request.key, client_id=request.client.id, network=r.network, asset=r.asset,
        amount=r.amount, pay_to=r.pay_to, terms_digest=r.digest, client_signature=request.fingerprint,
        extensions=dict(request.payload.extensions), resource=request.payload.resource,
        max_timeout_seconds=r.max_timeout_seconds, message_hash=request.message_hash,
    )


def decide(ctx: Context, payment: Payment, request: PaymentRequest) -> None:
    try:
        exact, _, _ = evaluate(ctx, request)
    except PaymentRuleError as rejected:
        payment.reject(str(rejected.code), rejected.message, rejected.payer, rule_details(rejected))
    else:
        payment.approve(exact.payer, exact.fee_payer, exact.blockhash)


def evaluate(ctx: Context, request: PaymentRequest) -> tuple[ExactPayment, bytes, bytes]:
    """Inspect, check the destination exists, co-sign and simulate: the transaction and the fee payer's signature
    (its bytes: only a settle needs its base58, `base58_signature`)."""
    tx, r, chain = request.transaction, request.requirements, request.chain
    loaded = {table: list(chain.lookup_table_addresses(table)) for table in lookup_tables(tx)}
    exact = inspect_exact(
        tx, asset=r.asset, pay_to=r.pay_to, amount=r.amount,
        fee_payers=ctx.fee_payers.addresses(r.network), limits=ctx.settings.limits, loaded=loaded,
        memo=r.memo, message=request.message,
    )
    fee_payer_signature = ctx.fee_payers.sign(exact.fee_payer, request.message)
    signed = with_fee_payer_signature_wire(request.wire, fee_payer_signature)
    # Every signature is known good here: inspect_exact verified the client's, the fee payer's is our own.
    simulation = chain.simulate(signed, signatures_verified=True)
    # Only a failed simulation pays for the second look-up that names a missing destination clearly.
    if not simulation.ok and not chain.account_exists(exact.destination):
        raise SimulationFailedError(exact.payer, {
            "error": f"destination token account {exact.destination} (payTo's {exact.mint} account) "
                     "does not exist; the merchant must create it before accepting payments",
            "errorCode": "AccountNotFound", "logs": [],
        })
    if not simulation.ok:
        raise SimulationFailedError(exact.payer, {
            "error": simulation.error, "errorCode": simulation.error_code,
            "logs": list(simulation.logs)[-SIMULATION_LOG_LINES:],
        })
    return exact, signed, fee_payer_signature


def recorded_verify(payment: Payment, request: PaymentRequest) -> VerifyOutcome:
    if (conflict := bound(payment, request)) is not None:
        return conflict
    return verify_outcome(payment).as_replay()


def bound(payment: Payment, request: PaymentRequest) -> VerifyOutcome | None:
    """A payment is bound to the terms it was first presented with; other terms are refused, not replayed."""
    if payment.terms_digest != request.requirements.digest:
        return VerifyOutcome.invalid(Code.INVALID_PAYMENT_REQUIREMENTS, payment.payer, message=OTHER_TERMS)
    return None


def recorded_under_another_key(ctx: Context, claim: Claim | None, payment: Payment,
                               request: PaymentRequest) -> Payment | None:
    """The payment that claimed this transaction, when it is this very payment recorded under another
    idempotency key (an earlier release derived keys otherwise: application/upgrades.py): the same client and
    amount. None when the transaction is unclaimed, this payment's, or another client's."""
    if claim is None or claim.payment_id == str(payment.id):
        return None
    earlier = ctx.store.payment_by_id(UUID(claim.payment_id))
    if earlier is None or earlier.client_id != request.client.id or earlier.amount != request.requirements.amount:
        return None
    return earlier
