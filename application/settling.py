"""Settle: a payment evaluated again, its claims staked, its broadcast recorded, then sent and awaited.

A broadcast is recorded (`SettlementSubmitted`, with the claim on its transaction and on its payTo+memo pair, in
one save) before it is sent, so no path broadcasts a payment twice and no transaction settles two payments.
Settled means settled once: one settle answer says success (`application.outcomes.repeated_settle`). Everything
here runs under the payment's lock (`Payments.settle`); what follows a broadcast is application/reconciling.py.
"""

from __future__ import annotations

import base64
from uuid import UUID

from application.errors import DuplicateRequestError, rule_details
from application.outcomes import SettleOutcome, repeated_settle, settle_outcome
from application.payment_checks import PaymentRequest
from application.payment_store import Context
from application.ports import Confirmation, SubmissionError
from application.reconciling import await_confirmation, fail, reconcile
from application.verifying import bound, evaluate, receive, recorded_under_another_key
from domain.claims import Claim, ClaimKind
from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.payment import Payment, PaymentState
from domain.signing import base58_signature

_RECORDED_SETTLE = (PaymentState.SUBMITTED, PaymentState.CONFIRMED, PaymentState.FAILED)


def settle(ctx: Context, request: PaymentRequest) -> SettleOutcome:
    """A settle the cache did not answer, under the payment's lock: get, decide, save once per step."""
    payment, network = ctx.store.payment(request.key), request.requirements.network
    if payment is not None and (refused := _other_terms(payment, request, network)) is not None:
        return refused
    _claim_request_key(ctx, request, payment.id if payment else Payment.create_id(request.key))
    if payment is not None and payment.state in _RECORDED_SETTLE:
        return recorded_settle(ctx, payment, request)
    if payment is not None:
        return _broadcast(ctx, payment, request)
    try:
        return _broadcast(ctx, receive(request), request)
    except DuplicateRequestError:
        if ctx.store.payment(request.key) is None:  # another payment's claim won: the refusal stands
            raise
    # A verify, which takes no lock, recorded the new payment first (docs/facilitator.md): nothing of this request
    # was recorded nor sent, so it is settled again from that record, once.
    request.claims.clear()
    return settle(ctx, request)


def recorded_settle(ctx: Context, payment: Payment, request: PaymentRequest) -> SettleOutcome:
    """A settle of a payment whose broadcast is recorded: confirmed, failed, or still pending."""
    if payment.state is PaymentState.CONFIRMED:
        return _settled(ctx, payment, request)
    if payment.state is PaymentState.FAILED:
        return settle_outcome(payment).as_replay()
    return reconcile(ctx, payment, request)


def _broadcast(ctx: Context, payment: Payment, request: PaymentRequest) -> SettleOutcome:
    """Evaluate again (balances may have moved since a verify), claim, record the broadcast, send, await. A
    transaction another record of this payment claimed (an earlier release's key) is answered from it."""
    transaction_claim = ctx.store.claim(ClaimKind.TRANSACTION, request.message_hash)
    if (earlier := recorded_under_another_key(ctx, transaction_claim, payment, request)) is not None:
        return _settle_earlier(ctx, earlier, request)
    if payment.state is PaymentState.REJECTED:
        return fail(ctx, payment, request, payment.reason or "", payment.message)
    try:
        exact, signed, fee_payer_signature = evaluate(ctx, request)
    except PaymentRuleError as rejected:
        if payment.verify_outcome is None:
            payment.reject(str(rejected.code), rejected.message, rejected.payer, rule_details(rejected))
        return fail(ctx, payment, request, str(rejected.code), rejected.message)
    if payment.verify_outcome is None:
        payment.approve(exact.payer, exact.fee_payer, exact.blockhash)
    if taken := _settlement_claims(ctx, payment, request, transaction_claim):
        return fail(ctx, payment, request, str(Code.DUPLICATE_SETTLEMENT), taken)
    signature = base58_signature(fee_payer_signature)
    payment.submit(signature, exact.fee_payer, exact.blockhash, base64.b64encode(signed).decode(), request.request_key)
    ctx.store.save(payment, request)
    try:
        request.chain.send(signed, signatures_verified=True)  # as `evaluate` simulated it: every signature known good
    except SubmissionError as refused:
        # A refusal fails the payment only if the chain has not got this very transaction: "already processed"
        # means another copy of these bytes landed first, and its outcome is the chain's, not this refusal's.
        if request.chain.signature_status(signature).confirmation is Confirmation.UNKNOWN:
            return fail(ctx, payment, request, str(Code.SUBMISSION_FAILED), str(refused))
    return await_confirmation(ctx, payment, request)


def _settle_earlier(ctx: Context, earlier: Payment, request: PaymentRequest) -> SettleOutcome:
    """A settle of a payment recorded under another key, answered as its record answers, under its lock. The
    request's `Idempotency-Key` is recorded with a success it gets (a retry with it gets that success again),
    but not claimed: the claim staked for the payment under the derived key is dropped with that payment,
    which is not recorded."""
    if (refused := _other_terms(earlier, request, earlier.network)) is not None:
        return refused
    request.claims.clear()
    with ctx.store.exclusive(earlier.idempotency_key, ctx.settings.lock_margin_seconds):
        return recorded_settle(ctx, ctx.store.payment(earlier.idempotency_key) or earlier, request)


def _settled(ctx: Context, payment: Payment, request: PaymentRequest) -> SettleOutcome:
    """A confirmed payment: the first settle to learn it is answered success, later ones by `repeated_settle`."""
    if not payment.success_answered:
        payment.answer_success(request.request_key, request.via)
        ctx.store.save(payment, request)
        return settle_outcome(payment)
    return repeated_settle(settle_outcome(payment), payment.answer_key, request.request_key)


def _other_terms(payment: Payment, request: PaymentRequest, network: str) -> SettleOutcome | None:
    """`bound`'s refusal, as a settle answers it."""
    if (conflict := bound(payment, request)) is None:
        return None
    return SettleOutcome.failed(conflict.invalid_reason or "", network=network, message=conflict.invalid_message)


def _claim_request_key(ctx: Context, request: PaymentRequest, payment_id: UUID) -> None:
    """An `Idempotency-Key` names one payment: claimed with the request's first save, refused on another."""
    if request.request_key is None:
        return
    subject = f"{request.client.id}\x1f{request.request_key}"
    claim = ctx.store.claim(ClaimKind.IDEMPOTENCY_KEY, subject)
    if not _stake(request, ClaimKind.IDEMPOTENCY_KEY, subject, payment_id, claim):
        raise PaymentRuleError(Code.INVALID_PAYLOAD,
                               f"Idempotency-Key {request.request_key!r} was sent with another payment")


def _settlement_claims(ctx: Context, payment: Payment, request: PaymentRequest,
                       transaction_claim: Claim | None) -> str | None:
    """Claim the transaction (and the payTo+memo pair) for this payment; the reason if another has them.
    `transaction_claim`: the transaction's claim as read before the evaluation (the save decides a race)."""
    r = request.requirements
    if not _stake(request, ClaimKind.TRANSACTION, request.message_hash, payment.id, transaction_claim):
        return "this transaction already settled another payment"
    if r.memo is not None:
        subject = f"{r.network}\x1f{r.pay_to}\x1f{r.memo}"
        if not _stake(request, ClaimKind.MEMO, subject, payment.id, ctx.store.claim(ClaimKind.MEMO, subject)):
            return "a payment to this payTo with this extra.memo already settled"
    return None


def _stake(request: PaymentRequest, kind: ClaimKind, subject: str, payment_id: UUID, claim: Claim | None) -> bool:
    """True if `subject` is this payment's: already claimed by it (`claim`, as read), or a claim added to the
    request's next save; False if another payment holds it."""
    if claim is None:
        request.claims.append(Claim(kind=kind, subject=subject, payment_id=str(payment_id)))
        return True
    return bool(claim.payment_id == str(payment_id))
