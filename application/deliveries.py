"""A paid delivery as one command: admit the payment, forward to the upstream, settle, and say what happened.

`Payments.deliver` takes a paid request once (checked once, its key computed once) and an `Upstream` (a callable
the transport passes: it forwards the request and returns the answer, application/ports.py) and runs the whole
rule under the payment's lock, so a second copy of the request is `Duplicate` for as long as the first is in flight:

- `settle: after` (the default): admitted (verified, the forward recorded: `verifying.admit`), forwarded, the
  answer read whole (up to `ANSWER_BUFFER_BYTES`), judged; only a chargeable answer is settled, and it is served
  only with the payment's one success answer. A payment broadcast before is settled first, as `settle: before`.
- `settle: before`: settled first, then forwarded; the answer is passed on as it arrives unless the transport
  asks for it whole.
- A delivery that failed after the charge (the upstream failed, timed out, broke off) is recorded
  (`Payment.DeliveryFailed`) and owed: a retry with the same payment is forwarded again without a new charge, at
  most `DELIVERY_ATTEMPTS` attempts in all within the payment's `max_timeout_seconds` of the first failure; the
  owed delivery served is recorded (`Payment.Delivered`), and the payment is never served again.

A transport maps the one result (`DeliveryResult`) to its own answer and decides nothing: the proxy
(interfaces/http/proxy/app.py) to HTTP statuses; another transport (an MCP gateway) passes its own `judge`, e.g.
a JSON-RPC `tools/call` result with `isError: true` is `Verdict.DECLINED` (never charged) or `Verdict.FAILED`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum

from application import settling, verifying
from application.errors import DuplicateRequestError, UpstreamFailedError
from application.outcomes import ProxyStep, SettleOutcome, settle_outcome
from application.payment_checks import PaymentRequest
from application.payment_store import Context
from application.ports import Upstream, UpstreamAnswer
from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.payment import DELIVERY_ATTEMPTS, Payment, PaymentState

log = logging.getLogger("paywarden.deliveries")

# The most of an upstream's answer read before a `settle: after` payment is settled (the answer must be known
# whole before it is charged); a larger answer is not delivered and not charged (docs/proxy.md).
ANSWER_BUFFER_BYTES = 8 * 1024 * 1024
TOO_LARGE = "upstream_answer_too_large"


class Verdict(StrEnum):
    """What a transport makes of an upstream's answer."""

    CHARGEABLE = "chargeable"  # a whole answer the client pays for
    DECLINED = "declined"  # the upstream's own refusal (HTTP 4xx): passed on, never charged by `settle: after`
    FAILED = "failed"  # no answer at all (HTTP 5xx): not charged, or owed when already charged


Judge = Callable[[UpstreamAnswer], Verdict]


def http_verdict(answer: UpstreamAnswer) -> Verdict:
    """HTTP's: below 400 chargeable, 4xx declined, 5xx failed."""
    if answer.status < 400:
        return Verdict.CHARGEABLE
    return Verdict.DECLINED if answer.status < 500 else Verdict.FAILED


# -- the results: one per way a delivery ends ---------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """The upstream's answer, with the payment's success answer (`settlement`)."""

    key: str
    answer: UpstreamAnswer
    settlement: SettleOutcome


@dataclass(frozen=True)
class Pending:
    """Broadcast, not yet confirmed: retry with the same payment (never broadcast twice)."""

    key: str
    settlement: SettleOutcome
    message: str = "the payment is on its way; retry with the same PAYMENT-SIGNATURE"


@dataclass(frozen=True)
class Duplicate:
    """Another request for this payment is in flight: retry shortly (paying again would not help)."""

    message: str
    key: str = ""


@dataclass(frozen=True)
class Refused:
    """Not forwarded, not charged: pay (again) to be served. `settlement`: the failed settle, when one was made."""

    key: str
    reason: str
    message: str
    settlement: SettleOutcome | None = None


@dataclass(frozen=True)
class Declined:
    """The upstream's own refusal (HTTP 4xx) of an unsettled payment's request: passed on, not charged."""

    key: str
    answer: UpstreamAnswer


@dataclass(frozen=True)
class FailedUncharged:
    """The upstream failed (`reason`: `upstream_error`, `upstream_timeout`, ...) and nothing was charged."""

    key: str
    reason: str
    message: str
    status: int | None = None  # the upstream's own status, when it answered one


@dataclass(frozen=True)
class FailedCharged:
    """The upstream failed after the payment was taken (`settlement`, its success): the delivery is owed while
    `attempts_left`, to a retry with the same payment, without a new charge."""

    key: str
    reason: str
    message: str
    settlement: SettleOutcome
    attempts_left: int
    status: int | None = None


DeliveryResult = Served | Pending | Duplicate | Refused | Declined | FailedUncharged | FailedCharged


@dataclass(frozen=True)
class Delivery:
    """How one request is delivered: its upstream, whether it is settled before it is forwarded, how its answer is
    judged, and whether that answer is read whole before it is judged (always for `settle: after`)."""

    upstream: Upstream
    settle_first: bool = False
    judge: Judge = http_verdict
    whole: bool = False
    buffer_limit: int | None = None  # ANSWER_BUFFER_BYTES
    now: Callable[[], float] = time.time  # the wall clock of the owed-delivery window

    @property
    def reads_whole(self) -> bool:
        return self.whole or not self.settle_first


def deliver(ctx: Context, request: PaymentRequest, delivery: Delivery) -> DeliveryResult:
    """The whole delivery under the payment's lock (held for the settle and the upstream's answer)."""
    settings = ctx.settings
    ttl = settings.confirmation_budget_seconds + settings.lock_margin_seconds + settings.delivery_seconds
    try:
        with ctx.store.exclusive(request.key, ttl):
            return _deliver(ctx, request, delivery)
    except DuplicateRequestError as duplicate:
        return Duplicate(str(duplicate), request.key)


def _deliver(ctx: Context, request: PaymentRequest, delivery: Delivery) -> DeliveryResult:
    key, via = request.key, request.via or ""
    payment = ctx.store.payment(key)
    if payment is not None and payment.owes_delivery(delivery.now(), via):
        if (conflict := verifying.bound(payment, request)) is not None:
            return Refused(key, conflict.invalid_reason or "", conflict.invalid_message or "")
        return _forward_paid(ctx, request, delivery, settle_outcome(payment))
    if delivery.settle_first:
        return _settle_then_forward(ctx, request, delivery)
    try:
        decision = verifying.admit(ctx, request, via)
    except PaymentRuleError as rejected:
        return Refused(key, str(rejected.code), rejected.message)
    if decision.step is ProxyStep.REFUSE:
        return Refused(key, decision.reason or "", decision.message or "")
    if decision.step is ProxyStep.SETTLE:  # broadcast by an earlier request: its success is this delivery
        return _settle_then_forward(ctx, request, delivery)
    try:
        answer = _answer(delivery, key)
    except UpstreamFailedError as failed:
        return FailedUncharged(key, failed.reason, f"{failed.message}; no payment was taken")
    verdict = delivery.judge(answer)
    if verdict is Verdict.FAILED:
        return FailedUncharged(key, "upstream_error", "the service's backend failed; no payment was taken",
                               answer.status)
    if verdict is Verdict.DECLINED:
        return Declined(key, answer)
    settlement = _settle(ctx, request)
    if settlement.success:
        return Served(key, answer, settlement)
    return _unsettled(key, settlement)


def _settle_then_forward(ctx: Context, request: PaymentRequest, delivery: Delivery) -> DeliveryResult:
    settlement = _settle(ctx, request)
    if not settlement.success:
        return _unsettled(request.key, settlement)
    return _forward_paid(ctx, request, delivery, settlement)


def _forward_paid(ctx: Context, request: PaymentRequest, delivery: Delivery,
                  settlement: SettleOutcome) -> DeliveryResult:
    """Forward a request whose payment is taken: a failure is recorded and owed; an owed delivery served is
    recorded as delivered."""
    try:
        answer = _answer(delivery, request.key)
    except UpstreamFailedError as failed:
        return _owed(ctx, request, delivery, settlement, failed.reason, failed.message)
    except Exception:  # a fault of the transport's own: the client paid, and is told so
        log.exception("forwarding the paid request of %s failed", request.key)
        return _owed(ctx, request, delivery, settlement, "proxy_error", "the request could not be forwarded")
    if delivery.judge(answer) is Verdict.FAILED:
        answer.close()
        return _owed(ctx, request, delivery, settlement, "upstream_error", "the service's backend failed",
                     answer.status)
    if not delivery.reads_whole:
        answer = replace(answer, body=_streamed(ctx, request, delivery, answer.body))
    else:
        _delivered(ctx, request)
    return Served(request.key, answer, settlement)


def _delivered(ctx: Context, request: PaymentRequest) -> None:
    """An owed delivery served is recorded: the payment is never served again."""
    payment = ctx.store.payment(request.key)
    if payment is not None and payment.delivery_failures and not payment.delivered:
        payment.deliver(request.via or "")
        ctx.store.save(payment)


def _streamed(ctx: Context, request: PaymentRequest, delivery: Delivery, body: Iterable[bytes]) -> Iterator[bytes]:
    """A paid answer passed on as it arrives, after the lock was let go: delivered once it ended; one that breaks
    off after its headers went out (with the success answer) is owed as well. A retry that saved first wins."""
    try:
        yield from body
    except UpstreamFailedError as broken:
        try:
            payment = ctx.store.payment(request.key)
            if payment is not None and payment.success_answered and not payment.delivered:
                payment.fail_delivery(request.via or "", broken.reason, delivery.now())
                ctx.store.save(payment)
        except DuplicateRequestError:
            log.warning("the broken answer of %s was not recorded: another request saved first", request.key)
        raise
    try:
        _delivered(ctx, request)
    except DuplicateRequestError:
        log.warning("the delivery of %s was not recorded: another request saved first", request.key)


def _owed(ctx: Context, request: PaymentRequest, delivery: Delivery, settlement: SettleOutcome, reason: str,
          message: str, status: int | None = None) -> FailedCharged:
    payment = ctx.store.payment(request.key)
    if payment is None:  # the payment that settled is recorded: a store that lost it cannot owe anything
        raise RuntimeError(f"payment {request.key} settled but is not recorded")
    now = delivery.now()
    payment.fail_delivery(request.via or "", reason, now)
    ctx.store.save(payment)
    left = DELIVERY_ATTEMPTS - payment.delivery_failures if payment.owes_delivery(now, request.via or "") else 0
    told = (f"{message}; the payment was taken (transaction {settlement.transaction}): " + (
        f"retry with the same PAYMENT-SIGNATURE within {payment.max_timeout_seconds} s to get the response, "
        f"without a new charge ({left} attempt{'s' if left != 1 else ''} left)" if left else
        "its delivery was attempted as often as it may be; ask the merchant"))
    return FailedCharged(request.key, reason, told, settlement, left, status)


def _answer(delivery: Delivery, key: str) -> UpstreamAnswer:
    """The upstream's answer; read whole (into one chunk) when the delivery must know it complete."""
    answer = delivery.upstream(key)
    if not delivery.reads_whole:
        return answer
    body, limit = bytearray(), delivery.buffer_limit or ANSWER_BUFFER_BYTES
    try:
        for chunk in answer.body:
            body += chunk
            if len(body) > limit:
                raise UpstreamFailedError(TOO_LARGE, f"the service's answer is over {limit} bytes")
    finally:
        answer.close()
    return replace(answer, body=(bytes(body),))


def _settle(ctx: Context, request: PaymentRequest) -> SettleOutcome:
    """`Payments.settle`'s answer, under the lock this delivery holds. When the chain loses the answer to a
    recorded broadcast, the payment is pending, not an error: the retry learns its outcome."""
    try:
        return settling.settle(ctx, request)
    except PaymentRuleError as rejected:
        return SettleOutcome.failed(rejected.code, rejected.payer, network=request.requirements.network,
                                    message=rejected.message)
    except DuplicateRequestError:
        raise
    except Exception:
        payment = ctx.store.payment(request.key)
        if payment is None or payment.state not in (PaymentState.SUBMITTED, PaymentState.CONFIRMED):
            raise
        log.warning("settle of %s lost its answer after the broadcast", request.key, exc_info=True)
        return _lost(payment)


def _lost(payment: Payment) -> SettleOutcome:
    return SettleOutcome.failed(Code.SETTLEMENT_PENDING, payment.payer, payment.network, payment.signature,
                                "broadcast; its outcome is not known yet: retry with the same payment to learn it "
                                "(it is never broadcast twice)")


def _unsettled(key: str, settlement: SettleOutcome) -> Pending | Refused:
    if settlement.pending:
        return Pending(key, settlement)
    return Refused(key, settlement.error_reason or "settle_failed", settlement.error_message or "", settlement)
