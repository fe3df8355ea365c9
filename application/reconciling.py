"""After a broadcast: its confirmation awaited (within the settle's budget), asked for again by a retried settle,
or carried on by the follow-up while nobody waits (`follow_up`); the identical signed transaction re-sent while
its blockhash lives; its failure recorded. Every step runs under the payment's lock and saves once.
"""

from __future__ import annotations

import base64

from application.errors import DuplicateRequestError
from application.outcomes import SettleOutcome, settle_outcome
from application.payment_checks import PaymentRequest
from application.payment_store import Context
from application.ports import Chain, Confirmation, SubmissionError
from domain.codes import Code
from domain.payment import Payment, PaymentState

EXPIRED = "the transaction expired (its blockhash) before it landed"


def reconcile(ctx: Context, payment: Payment, request: PaymentRequest) -> SettleOutcome:
    """A retried settle of a broadcast payment asks the chain about its signature, re-sends the identical
    transaction while its blockhash lives, and fails it once the blockhash has expired unseen."""
    chain = request.chain
    alive = chain.is_blockhash_valid(payment.blockhash or "")
    status = chain.signature_status(payment.signature or "")
    if status.confirmation is Confirmation.UNKNOWN and not alive:
        return fail(ctx, payment, request, str(Code.SUBMISSION_FAILED), EXPIRED)
    return await_confirmation(ctx, payment, request, resend_now=status.confirmation is Confirmation.UNKNOWN)


def await_confirmation(ctx: Context, payment: Payment, request: PaymentRequest,
                       resend_now: bool = False) -> SettleOutcome:
    """Poll the signature until it is confirmed (the success answer), failed, or the budget is spent (the
    `settlement_pending` answer: the follow-up carries it on)."""
    chain, clock, settings = request.chain, ctx.clock, ctx.settings
    deadline = clock.monotonic() + settings.confirmation_budget_seconds
    next_send = clock.monotonic() + (0 if resend_now else settings.resend_seconds)
    while True:
        status = chain.signature_status(payment.signature or "")
        if status.confirmation is Confirmation.CONFIRMED:
            payment.confirm(answered=True, request_key=request.request_key, via=request.via)
            break
        if status.confirmation is Confirmation.FAILED:
            return fail(ctx, payment, request, str(Code.SUBMISSION_FAILED),
                        status.error or "the transaction failed on chain")
        now = clock.monotonic()
        if now >= deadline:
            if request.claims:  # an Idempotency-Key first seen on this pending answer
                ctx.store.save(payment, request)
            return settle_outcome(payment)
        if status.confirmation is Confirmation.UNKNOWN and now >= next_send:
            resend(payment, chain)
            next_send = now + settings.resend_seconds
        clock.sleep(settings.confirmation_poll_seconds)
    ctx.store.save(payment, request)
    return settle_outcome(payment)


def follow_up(ctx: Context, key: str) -> PaymentState | None:
    """Carry a pending settlement on while nobody waits for it: re-send the identical transaction while its
    blockhash lives, record its confirmation (no settle has answered it: the next one is the success) or its
    failure. Returns the payment's state; None if it is unknown or another request holds it."""
    try:
        with ctx.store.exclusive(key, ctx.settings.lock_margin_seconds):
            payment = ctx.store.payment(key)
            if payment is None or not payment.is_pending:
                return payment.state if payment else None
            chain = ctx.chains.for_network(payment.network)
            if chain is None:
                return payment.state
            status = chain.signature_status(payment.signature or "")
            if status.confirmation is Confirmation.CONFIRMED:
                payment.confirm(answered=False)
            elif status.confirmation is Confirmation.FAILED:
                payment.fail(str(Code.SUBMISSION_FAILED), status.error or "the transaction failed on chain")
            elif status.confirmation is Confirmation.UNKNOWN and not chain.is_blockhash_valid(payment.blockhash or ""):
                payment.fail(str(Code.SUBMISSION_FAILED), EXPIRED)
            else:
                if status.confirmation is Confirmation.UNKNOWN:
                    resend(payment, chain)
                return payment.state
            ctx.store.save(payment)
            return payment.state
    except DuplicateRequestError:
        return None


def resend(payment: Payment, chain: Chain) -> None:
    """Send the recorded signed transaction again, as Solana clients do to land one: the same bytes, the same
    signature, so it can land at most once. A refusal (already processed, expired) is not an answer."""
    try:
        chain.send(base64.b64decode(payment.transaction or ""))
    except SubmissionError:
        pass


def fail(ctx: Context, payment: Payment, request: PaymentRequest, reason: str, message: str) -> SettleOutcome:
    """Record the settle's failure (with the request's claims) and answer it."""
    payment.fail(reason, message, request.request_key)
    ctx.store.save(payment, request)
    return settle_outcome(payment)
