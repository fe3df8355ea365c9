"""The Payments application: the `verify` and `settle` commands of the facilitator.

Each command: request checks → derive the idempotency key → take the per-key lock (a concurrent duplicate gets
`duplicate_request`) → answer from the record, or decide on the aggregate with outside facts from the ports
(lookup tables, simulation, broadcast, confirmation) → save once per step. A broadcast is recorded
(SettlementSubmitted, with the claim on its transaction and on its payTo+memo pair, in one save) before it is
sent, so no path broadcasts a payment twice and no transaction settles two payments. Settled means settled once:
one settle answer says success (see `application.outcomes.repeated_settle`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.domain import BaseAggregate, DomainEventProtocol, MutableOrImmutableAggregate
from eventsourcing.persistence import IntegrityError, Recording

from application.errors import DuplicateRequestError, SimulationFailedError, rule_details
from application.outcomes import (
    ProxyDecision,
    ProxyStep,
    SettleOutcome,
    VerifyOutcome,
    proxy_decision,
    repeated_settle,
    replayed_settle,
    replayed_verify,
    settle_outcome,
    settled_verify,
    verify_outcome,
)
from application.payment_checks import PaymentRequest, check_request
from application.ports import (
    Admission,
    Chain,
    Chains,
    Clock,
    Confirmation,
    FeePayers,
    Locks,
    LocksHeldElsewhere,
    NoNetworks,
    NoResults,
    ResultCache,
    SubmissionError,
    SystemClock,
)
from domain.claims import Claim, ClaimKind, claim_id
from domain.clients import Client
from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.exact import (
    ExactLimits,
    ExactPayment,
    inspect_exact,
    lookup_tables,
    with_fee_payer_signature_wire,
)
from domain.idempotency import payment_id
from domain.payment import Payment, PaymentState
from domain.signing import base58_signature
from domain.x402 import PaymentPayload, Requirements

SIMULATION_LOG_LINES = 5
_RECORDED_SETTLE = (PaymentState.SUBMITTED, PaymentState.CONFIRMED, PaymentState.FAILED)


@dataclass(frozen=True)
class Settings:
    limits: ExactLimits = ExactLimits()
    confirmation_budget_seconds: float = 15.0
    confirmation_poll_seconds: float = 0.25
    resend_seconds: float = 2.0  # while unconfirmed, the identical signed transaction is sent again this often
    lock_margin_seconds: float = 30.0


class Payments(Application[UUID]):
    """Verify and settle x402 `exact` payments; every transition is an event of a `Payment`."""

    def __init__(self, env: Mapping[str, str] | None = None, *, chains: Chains | None = None,
                 fee_payers: FeePayers | None = None, locks: Locks | None = None, cache: ResultCache | None = None,
                 clock: Clock | None = None, settings: Settings = Settings(),
                 admission: Admission | None = None) -> None:
        """`Payments(env)` alone (as eventsourcing's runners build it) reads its log and serves no network
        (application/ports.py); the composition root passes the real adapters."""
        super().__init__(env)
        self._chains: Chains = chains or NoNetworks()
        self._fee_payers: FeePayers = fee_payers or NoNetworks()
        self._locks: Locks = locks or LocksHeldElsewhere()
        self._cache: ResultCache = cache or NoResults()
        self._clock: Clock = clock or SystemClock()
        self._settings = settings
        self._admission: Admission = admission or _LockThenCache(self._cache, self._locks)

    # -- commands -----------------------------------------------------------------------------------------

    def verify(self, client: Client, payload: PaymentPayload, requirements: Requirements) -> VerifyOutcome:
        try:
            request = self._request(client, payload, requirements)
            with self._admitted(request.key, "verify", self._settings.lock_margin_seconds) as cached:
                if cached:
                    return replayed_verify(cached, requirements.digest)
                return self._verify_unanswered(request)
        except PaymentRuleError as rejected:
            return VerifyOutcome.invalid(rejected.code, rejected.payer, message=rejected.message)
        except DuplicateRequestError as duplicate:
            return VerifyOutcome.invalid(Code.DUPLICATE_REQUEST, message=str(duplicate))

    def settle(self, client: Client, payload: PaymentPayload, requirements: Requirements,
               request_key: str | None = None, via: str | None = None) -> SettleOutcome:
        """Settle once. `request_key` is the merchant's `Idempotency-Key`: a retry carrying the key of the request
        that was answered success gets that answer again; every other later settle is `duplicate_settlement`.
        `via` names the door that asks (the proxy's route) in the success answer's event; a door that passes no
        `request_key` gets `success` at most once per payment, which is what the proxy delivers on."""
        net = requirements.network
        try:
            request = self._request(client, payload, requirements, request_key, via)
            ttl = self._settings.confirmation_budget_seconds + self._settings.lock_margin_seconds

            def replayable(cached: dict[str, Any]) -> bool:
                return request_key is None or request_key == cached.get("answer_key")

            with self._admitted(request.key, "settle", ttl, replayable) as cached:
                if cached:
                    return replayed_settle(cached, requirements.digest, net, request_key)
                payment = self._get(request.key)
                if payment is not None and (conflict := self._bound(payment, request)):
                    return SettleOutcome.failed(conflict.invalid_reason or "", network=net,
                                                message=conflict.invalid_message)
                self._claim_request_key(request, payment.id if payment else Payment.create_id(request.key))
                if payment is not None and payment.state in _RECORDED_SETTLE:
                    return self._recorded_settle(payment, request)
                payment = payment or self._receive(request)
                return self._settle(payment, request)
        except PaymentRuleError as rejected:
            return SettleOutcome.failed(rejected.code, rejected.payer, network=net, message=rejected.message)
        except DuplicateRequestError as duplicate:
            return SettleOutcome.failed(Code.DUPLICATE_REQUEST, network=net, message=str(duplicate))

    def admit_forward(self, client: Client, payload: PaymentPayload, requirements: Requirements,
                      via: str) -> ProxyDecision:
        """The proxy's `settle: after` request before it reaches the upstream: verified (recorded as verify
        records it), then decided by `proxy_decision`; a forward is recorded before it happens, in the same save
        as a new payment's verification, so the upstream sees an unsettled payment a bounded number of times."""
        try:
            request = self._request(client, payload, requirements, via=via)
            with self._exclusive(request.key, self._settings.lock_margin_seconds):
                payment, changed = self._get(request.key), False
                if payment is None:
                    payment, changed = self._receive(request), True
                    self._decide(payment, request)
                elif (conflict := self._bound(payment, request)) is not None:
                    return ProxyDecision.refused(request.key, conflict.invalid_reason or "", conflict.invalid_message)
                decision = proxy_decision(payment, request.key)
                if decision.step is ProxyStep.FORWARD:
                    payment.forward(via)
                    changed = True
                if changed:
                    self._save(payment)
                return decision
        except PaymentRuleError as rejected:
            return ProxyDecision.refused("", rejected.code, rejected.message, rejected.payer)
        except DuplicateRequestError as duplicate:
            return ProxyDecision.refused("", Code.DUPLICATE_REQUEST, str(duplicate))

    def payment_key(self, client: Client, payload: PaymentPayload, requirements: Requirements) -> str:
        """The payment's idempotency key (the `X-Paywarden-Payment-Hash`); `PaymentRuleError` on a request the
        checks refuse."""
        return self._request(client, payload, requirements).key

    def follow_up(self, key: str) -> PaymentState | None:
        """Carry a pending settlement on while nobody waits for it: re-send the identical transaction while its
        blockhash lives, record its confirmation (no settle has answered it: the next one is the success) or its
        failure. Returns the payment's state; None if it is unknown or another request holds it."""
        try:
            with self._exclusive(key, self._settings.lock_margin_seconds):
                payment = self._get(key)
                if payment is None or not payment.is_pending:
                    return payment.state if payment else None
                chain = self._chains.for_network(payment.network)
                if chain is None:
                    return payment.state
                status = chain.signature_status(payment.signature or "")
                if status.confirmation is Confirmation.CONFIRMED:
                    payment.confirm(answered=False)
                elif status.confirmation is Confirmation.FAILED:
                    payment.fail(str(Code.SUBMISSION_FAILED), status.error or "the transaction failed on chain")
                elif status.confirmation is Confirmation.UNKNOWN and not chain.is_blockhash_valid(
                        payment.blockhash or ""):
                    payment.fail(str(Code.SUBMISSION_FAILED), "the transaction expired (its blockhash) before it "
                                                              "landed")
                else:
                    if status.confirmation is Confirmation.UNKNOWN:
                        self._resend(payment, chain)
                    return payment.state
                self._save(payment)
                return payment.state
        except DuplicateRequestError:
            return None

    # -- queries ------------------------------------------------------------------------------------------

    def get_payment(self, key: str) -> Payment | None:
        return self._get(key)

    # -- steps --------------------------------------------------------------------------------------------

    def _request(self, client: Client, payload: PaymentPayload, requirements: Requirements,
                 request_key: str | None = None, via: str | None = None) -> PaymentRequest:
        return check_request(client, payload, requirements, chains=self._chains, fee_payers=self._fee_payers,
                             request_key=request_key, via=via)

    def _receive(self, request: PaymentRequest) -> Payment:
        r = request.requirements
        return Payment(
            idempotency_key=request.key, client_id=request.client.id, network=r.network, asset=r.asset,
            amount=r.amount, pay_to=r.pay_to, terms_digest=r.digest, client_signature=request.fingerprint,
            extensions=dict(request.payload.extensions), resource=request.payload.resource,
            max_timeout_seconds=r.max_timeout_seconds, message_hash=request.message_hash,
        )

    def _verify_unanswered(self, request: PaymentRequest) -> VerifyOutcome:
        """A verify the result cache did not answer, under the payment's lock: nearly always a new payment, so it
        is evaluated and its first events inserted without reading the store first (one round trip less). A
        payment recorded before (its first events are there: the insert conflicts) answers as it would have if
        read first, a replay or a conflict of terms, and so does one whose evaluation failed for another reason
        than its rules (the chain unreachable): what was recorded answers, else the failure stands."""
        payment = self._receive(request)
        try:
            self._decide(payment, request)
        except Exception:
            if (recorded := self._get(request.key)) is not None:
                return self._recorded_verify(recorded, request)
            raise
        if payment.verify_outcome is PaymentState.REJECTED:  # the chain refuses a transaction that landed...
            claim = self._claim(ClaimKind.TRANSACTION, request.message_hash)
            earlier = self._recorded_under_another_key(claim, payment, request)
            if earlier is not None and earlier.state is PaymentState.CONFIRMED:  # ...as this very payment
                return self._bound(earlier, request) or settled_verify(earlier.payer, earlier.signature).as_replay()
        try:
            self.save(payment)
        except IntegrityError as recorded_before:
            if (recorded := self._get(request.key)) is not None:
                return self._recorded_verify(recorded, request)
            raise DuplicateRequestError("another request for this payment won the race; retry") from recorded_before
        return verify_outcome(payment)

    def _recorded_verify(self, payment: Payment, request: PaymentRequest) -> VerifyOutcome:
        if (conflict := self._bound(payment, request)) is not None:
            return conflict
        return verify_outcome(payment).as_replay()

    def _bound(self, payment: Payment, request: PaymentRequest) -> VerifyOutcome | None:
        """A payment is bound to the terms it was first presented with; other terms are refused, not replayed."""
        if payment.terms_digest != request.requirements.digest:
            return VerifyOutcome.invalid(Code.INVALID_PAYMENT_REQUIREMENTS, payment.payer,
                                         message="this payment was first presented with other requirements")
        return None

    def _claim_request_key(self, request: PaymentRequest, payment_id: UUID) -> None:
        """An `Idempotency-Key` names one payment: claimed with the request's first save, refused on another."""
        if request.request_key is None:
            return
        subject = f"{request.client.id}\x1f{request.request_key}"
        claim = self._claim(ClaimKind.IDEMPOTENCY_KEY, subject)
        if not self._stake(request, ClaimKind.IDEMPOTENCY_KEY, subject, payment_id, claim):
            raise PaymentRuleError(Code.INVALID_PAYLOAD,
                                  f"Idempotency-Key {request.request_key!r} was sent with another payment")

    def _decide(self, payment: Payment, request: PaymentRequest) -> None:
        try:
            exact, _, _ = self._evaluate(request)
        except PaymentRuleError as rejected:
            payment.reject(str(rejected.code), rejected.message, rejected.payer, rule_details(rejected))
        else:
            payment.approve(exact.payer, exact.fee_payer, exact.blockhash)

    def _recorded_settle(self, payment: Payment, request: PaymentRequest) -> SettleOutcome:
        """A settle of a payment whose broadcast is recorded: confirmed, failed, or still pending."""
        if payment.state is PaymentState.CONFIRMED:
            return self._settled(payment, request)
        if payment.state is PaymentState.FAILED:
            return settle_outcome(payment).as_replay()
        return self._reconcile(payment, request)

    def _recorded_under_another_key(self, claim: Claim | None, payment: Payment,
                                    request: PaymentRequest) -> Payment | None:
        """The payment that claimed this transaction, when it is this very payment recorded under another
        idempotency key (an earlier release derived keys otherwise: application/upgrades.py): the same client and
        amount. None when the transaction is unclaimed, this payment's, or another client's."""
        if claim is None or claim.payment_id == str(payment.id):
            return None
        try:
            earlier: object = self.repository.get(UUID(claim.payment_id))
        except AggregateNotFoundError:
            return None
        if not isinstance(earlier, Payment) or earlier.client_id != request.client.id or \
                earlier.amount != request.requirements.amount:
            return None
        return earlier

    def _settle_earlier(self, earlier: Payment, request: PaymentRequest) -> SettleOutcome:
        """A settle of a payment recorded under another key, answered as its record answers, under its lock. The
        request's `Idempotency-Key` is recorded with a success it gets (a retry with it gets that success again),
        but not claimed: the claim staked for the payment under the derived key is dropped with that payment,
        which is not recorded."""
        if (conflict := self._bound(earlier, request)) is not None:
            return SettleOutcome.failed(conflict.invalid_reason or "", network=earlier.network,
                                        message=conflict.invalid_message)
        request.claims.clear()
        with self._exclusive(earlier.idempotency_key, self._settings.lock_margin_seconds):
            return self._recorded_settle(self._get(earlier.idempotency_key) or earlier, request)

    def _settle(self, payment: Payment, request: PaymentRequest) -> SettleOutcome:
        """Evaluate again (balances may have moved since a verify), claim, record the broadcast, send, await. A
        transaction another record of this payment claimed (an earlier release's key) is answered from it."""
        key = request.request_key
        transaction_claim = self._claim(ClaimKind.TRANSACTION, request.message_hash)
        if (earlier := self._recorded_under_another_key(transaction_claim, payment, request)) is not None:
            return self._settle_earlier(earlier, request)
        if payment.state is PaymentState.REJECTED:
            return self._fail(payment, request, payment.reason or "", payment.message)
        try:
            exact, signed, signature = self._evaluate(request)
        except PaymentRuleError as rejected:
            if payment.verify_outcome is None:
                payment.reject(str(rejected.code), rejected.message, rejected.payer, rule_details(rejected))
            return self._fail(payment, request, str(rejected.code), rejected.message)
        if payment.verify_outcome is None:
            payment.approve(exact.payer, exact.fee_payer, exact.blockhash)
        if taken := self._settlement_claims(payment, request, transaction_claim):
            return self._fail(payment, request, str(Code.DUPLICATE_SETTLEMENT), taken)
        payment.submit(signature, exact.fee_payer, exact.blockhash, base64.b64encode(signed).decode(), key)
        self._save(payment, request)
        try:
            request.chain.send(signed)
        except SubmissionError as refused:
            return self._fail(payment, request, str(Code.SUBMISSION_FAILED), str(refused))
        return self._await(payment, request)

    def _settlement_claims(self, payment: Payment, request: PaymentRequest,
                           transaction_claim: Claim | None) -> str | None:
        """Claim the transaction (and the payTo+memo pair) for this payment; the reason if another has them.
        `transaction_claim`: the transaction's claim as read before the evaluation (the save decides a race)."""
        r = request.requirements
        if not self._stake(request, ClaimKind.TRANSACTION, request.message_hash, payment.id, transaction_claim):
            return "this transaction already settled another payment"
        if r.memo is not None:
            subject = f"{r.network}\x1f{r.pay_to}\x1f{r.memo}"
            if not self._stake(request, ClaimKind.MEMO, subject, payment.id, self._claim(ClaimKind.MEMO, subject)):
                return "a payment to this payTo with this extra.memo already settled"
        return None

    def _stake(self, request: PaymentRequest, kind: ClaimKind, subject: str, payment_id: UUID,
               claim: Claim | None) -> bool:
        """True if `subject` is this payment's: already claimed by it (`claim`, as read), or a claim added to the
        request's next save; False if another payment holds it."""
        if claim is None:
            request.claims.append(Claim(kind=kind, subject=subject, payment_id=str(payment_id)))
            return True
        return bool(claim.payment_id == str(payment_id))

    def _settled(self, payment: Payment, request: PaymentRequest) -> SettleOutcome:
        """A confirmed payment: the first settle to learn it is answered success, later ones by `repeated_settle`."""
        if not payment.success_answered:
            payment.answer_success(request.request_key, request.via)
            self._save(payment, request)
            return settle_outcome(payment)
        return repeated_settle(settle_outcome(payment), payment.answer_key, request.request_key)

    def _evaluate(self, request: PaymentRequest) -> tuple[ExactPayment, bytes, str]:
        """Inspect, check the destination exists, co-sign and simulate: the transaction and its signature."""
        tx, r, chain = request.transaction, request.requirements, request.chain
        loaded = {table: list(chain.lookup_table_addresses(table)) for table in lookup_tables(tx)}
        exact = inspect_exact(
            tx, asset=r.asset, pay_to=r.pay_to, amount=r.amount,
            fee_payers=self._fee_payers.addresses(r.network), limits=self._settings.limits, loaded=loaded,
            memo=r.memo, message=request.message,
        )
        fee_payer_signature = self._fee_payers.sign(exact.fee_payer, request.message)
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
        return exact, signed, base58_signature(fee_payer_signature)

    def _reconcile(self, payment: Payment, request: PaymentRequest) -> SettleOutcome:
        """A retried settle of a broadcast payment asks the chain about its signature, re-sends the identical
        transaction while its blockhash lives, and fails it once the blockhash has expired unseen."""
        chain = request.chain
        alive = chain.is_blockhash_valid(payment.blockhash or "")
        status = chain.signature_status(payment.signature or "")
        if status.confirmation is Confirmation.UNKNOWN and not alive:
            return self._fail(payment, request, str(Code.SUBMISSION_FAILED),
                              "the transaction expired (its blockhash) before it landed")
        return self._await(payment, request, resend_now=status.confirmation is Confirmation.UNKNOWN)

    def _await(self, payment: Payment, request: PaymentRequest, resend_now: bool = False) -> SettleOutcome:
        chain, clock = request.chain, self._clock
        deadline = clock.monotonic() + self._settings.confirmation_budget_seconds
        next_send = clock.monotonic() + (0 if resend_now else self._settings.resend_seconds)
        while True:
            status = chain.signature_status(payment.signature or "")
            if status.confirmation is Confirmation.CONFIRMED:
                payment.confirm(answered=True, request_key=request.request_key, via=request.via)
                break
            if status.confirmation is Confirmation.FAILED:
                return self._fail(payment, request, str(Code.SUBMISSION_FAILED),
                                  status.error or "the transaction failed on chain")
            now = clock.monotonic()
            if now >= deadline:
                if request.claims:  # an Idempotency-Key first seen on this pending answer
                    self._save(payment, request)
                return settle_outcome(payment)
            if status.confirmation is Confirmation.UNKNOWN and now >= next_send:
                self._resend(payment, chain)
                next_send = now + self._settings.resend_seconds
            clock.sleep(self._settings.confirmation_poll_seconds)
        self._save(payment, request)
        return settle_outcome(payment)

    def _resend(self, payment: Payment, chain: Chain) -> None:
        """Send the recorded signed transaction again, as Solana clients do to land one: the same bytes, the same
        signature, so it can land at most once. A refusal (already processed, expired) is not an answer."""
        try:
            chain.send(base64.b64decode(payment.transaction or ""))
        except SubmissionError:
            pass

    def _fail(self, payment: Payment, request: PaymentRequest, reason: str, message: str) -> SettleOutcome:
        payment.fail(reason, message, request.request_key)
        self._save(payment, request)
        return settle_outcome(payment)

    # -- persistence --------------------------------------------------------------------------------------

    @contextmanager
    def _admitted(self, key: str, operation: str, ttl: float,
                  usable: Callable[[dict[str, Any]], bool] = lambda cached: True) -> Iterator[dict[str, Any] | None]:
        """The cached result when there is a usable one (no lock held), else None with this request holding the
        payment's lock (DuplicateRequestError when another request holds it)."""
        with self._admission.admit(key, operation, ttl) as (cached, held):
            if cached and usable(cached):
                yield cached
                return
            if cached:  # a result this request may not replay: no lock was taken with the read
                with self._exclusive(key, ttl):
                    yield None
                return
            if not held:
                raise DuplicateRequestError("another request for this payment is in progress; retry")
            yield None

    @contextmanager
    def _exclusive(self, key: str, ttl: float) -> Iterator[None]:
        with self._locks.hold(key, ttl) as held:
            if not held:
                raise DuplicateRequestError("another request for this payment is in progress; retry")
            yield

    def _get(self, key: str) -> Payment | None:
        try:
            return self.repository.get(payment_id(key))
        except AggregateNotFoundError:
            return None

    def _claim(self, kind: ClaimKind, subject: str) -> Claim | None:
        try:
            return self.repository.get(claim_id(kind, subject))
        except AggregateNotFoundError:
            return None

    def save(self, *objs: MutableOrImmutableAggregate[UUID] | DomainEventProtocol[UUID] | None,
             **kwargs: Any) -> list[Recording[UUID]]:
        """`Application.save`, the same steps in the same order (collect the pending events, record them in one
        `insert_events`, snapshots, notify), with the aggregates' events collected directly: the library tells an
        aggregate from an event with two `isinstance` checks against runtime protocols, ~30 µs a save on Python
        3.11. Anything but aggregates (an event, a keyword argument) goes to the library as it is."""
        if kwargs or not all(isinstance(obj, BaseAggregate) for obj in objs):
            return super().save(*objs, **kwargs)
        processing_event: ProcessingEvent[UUID] = ProcessingEvent()
        for aggregate in objs:
            assert isinstance(aggregate, BaseAggregate)
            processing_event.events.extend(aggregate.collect_events())
            processing_event.aggregates[aggregate.id] = aggregate
        recordings = self._record(processing_event)
        self._take_snapshots(processing_event)
        self._notify(recordings)
        self.notify(processing_event.events)  # deprecated in the library, called by its save all the same
        return recordings

    def _save(self, payment: Payment, request: PaymentRequest | None = None) -> None:
        """One save of the payment and the claims its request made: all of them are recorded, or none."""
        claims = list(request.claims) if request else []
        if request:
            request.claims.clear()
        try:
            self.save(payment, *claims)
        except IntegrityError as race:
            raise DuplicateRequestError("another request for this payment, or for its transaction, won the race; "
                                   "retry") from race


class _LockThenCache:
    """`Admission` from the two ports, for the in-process locks (no round trip to save): the lock first, the cache
    only when another request holds it.

    A request that gets the lock reads the event store, which gives the same answer as the cache (the cache is
    written from the same events by the functions the live answer calls, and a miss is always answered from the
    event store): so the common request, a new payment or a settle after its verify, which the cache cannot answer
    anyway, reads one store instead of two. A request that finds the lock held reads the cache: a terminal result is
    still answered while another request holds the payment, as it was when the cache was read first; a miss is
    `duplicate_request`."""

    def __init__(self, cache: ResultCache, locks: Locks) -> None:
        self._cache, self._locks = cache, locks

    @contextmanager
    def admit(self, key: str, operation: str, ttl_seconds: float) -> Iterator[tuple[dict[str, Any] | None, bool]]:
        with self._locks.hold(key, ttl_seconds) as held:
            yield (None, True) if held else (self._cache.get(key, operation), False)
