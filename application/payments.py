"""The Payments application: the `verify` and `settle` commands of the facilitator.

Each command: request checks → derive the idempotency key → take the per-key lock (a concurrent duplicate gets
`duplicate_request`) → answer a recorded terminal result unchanged, or decide on the aggregate with outside facts
from the ports (lookup tables, simulation, broadcast, confirmation) → save once per step. A broadcast is recorded
(SettlementSubmitted) before it is sent, so no path can broadcast a payment twice.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError

from application.outcomes import SettleOutcome, VerifyOutcome
from application.ports import Chain, Chains, Clock, Confirmation, FeePayers, Locks, ResultCache, SubmissionError
from domain.clients import Client
from domain.codes import Code
from domain.errors import PaymentRejected
from domain.exact import (
    ExactLimits,
    ExactPayment,
    decode_transaction,
    inspect_exact,
    lookup_tables,
    message_bytes,
    payment_fingerprint,
    with_fee_payer_signature,
)
from domain.idempotency import idempotency_key, payment_id
from domain.networks import SCHEME_EXACT, network
from domain.payment import Payment, PaymentState
from domain.signing import base58_signature
from domain.x402 import PaymentPayload, Requirements

if TYPE_CHECKING:
    from solders.transaction import VersionedTransaction

SIMULATION_LOG_LINES = 5
Outcome = TypeVar("Outcome", VerifyOutcome, SettleOutcome)


class KeyEnvironmentError(Exception):
    """A test key used on mainnet, or a live key on devnet."""


class DuplicateRequest(Exception):
    """Another request for the same payment holds its lock, or won the race to the event store."""


@dataclass(frozen=True)
class Settings:
    limits: ExactLimits = ExactLimits()
    confirmation_budget_seconds: float = 15.0
    confirmation_poll_seconds: float = 0.25
    lock_margin_seconds: float = 30.0


@dataclass(frozen=True)
class _Request:
    client: Client
    payload: PaymentPayload
    requirements: Requirements
    chain: Chain
    transaction: VersionedTransaction
    fingerprint: str
    key: str


class Payments(Application):
    """Verify and settle x402 `exact` payments; every transition is an event of a `Payment`."""

    def __init__(self, env: dict[str, str] | None = None, *, chains: Chains, fee_payers: FeePayers,
                 locks: Locks, cache: ResultCache, clock: Clock, settings: Settings = Settings()) -> None:
        super().__init__(env)
        self._chains, self._fee_payers, self._locks = chains, fee_payers, locks
        self._cache, self._clock, self._settings = cache, clock, settings

    # -- commands -----------------------------------------------------------------------------------------

    def verify(self, client: Client, payload: PaymentPayload, requirements: Requirements) -> VerifyOutcome:
        try:
            request = self._request(client, payload, requirements)
            if cached := self._cache.get(request.key, "verify"):
                return self._replay(cached, request, VerifyOutcome)
            with self._exclusive(request.key, self._settings.lock_margin_seconds):
                payment = self._get(request.key)
                if payment is not None and (conflict := self._bound(payment, request)):
                    return conflict
                if payment is not None:
                    return self._remember(payment, verify_outcome(payment), "verify").as_replay()
                payment = self._receive(request)
                self._decide(payment, request)
                self._save(payment)
                return self._remember(payment, verify_outcome(payment), "verify")
        except PaymentRejected as rejected:
            return VerifyOutcome.invalid(rejected.code, rejected.payer)
        except DuplicateRequest:
            return VerifyOutcome.invalid(Code.DUPLICATE_REQUEST)

    def settle(self, client: Client, payload: PaymentPayload, requirements: Requirements) -> SettleOutcome:
        net = requirements.network
        try:
            request = self._request(client, payload, requirements)
            if cached := self._cache.get(request.key, "settle"):
                return self._replay(cached, request, SettleOutcome)
            budget = self._settings.confirmation_budget_seconds
            with self._exclusive(request.key, budget + self._settings.lock_margin_seconds):
                payment = self._get(request.key)
                if payment is not None and (conflict := self._bound(payment, request)):
                    return SettleOutcome.failed(conflict.invalid_reason, network=net)
                if payment is not None and payment.is_settled:
                    return self._remember(payment, settle_outcome(payment), "settle").as_replay()
                if payment is not None and payment.is_pending:
                    return self._reconcile(payment, request.chain)
                payment = payment or self._receive(request)
                return self._settle(payment, request)
        except PaymentRejected as rejected:
            return SettleOutcome.failed(rejected.code, rejected.payer, network=net)
        except DuplicateRequest:
            return SettleOutcome.failed(Code.DUPLICATE_REQUEST, network=net)

    # -- queries ------------------------------------------------------------------------------------------

    def get_payment(self, key: str) -> Payment | None:
        return self._get(key)

    # -- steps --------------------------------------------------------------------------------------------

    def _request(self, client: Client, payload: PaymentPayload, requirements: Requirements) -> _Request:
        """The checks that need no transaction: scheme, network, capability, and the accepted terms."""
        if requirements.scheme != SCHEME_EXACT:
            raise PaymentRejected(Code.UNSUPPORTED_SCHEME, f"scheme {requirements.scheme!r} is not supported")
        known = network(requirements.network)
        chain = self._chains.for_network(requirements.network) if known else None
        if chain is None:
            raise PaymentRejected(Code.INVALID_NETWORK, f"network {requirements.network!r} is not served")
        if client.env is not None and known.key_env != client.env:
            raise KeyEnvironmentError(f"a {client.env.value} key cannot pay on {known.name}")
        if payload.accepted is not None and not payload.accepted.same_terms(requirements):
            raise PaymentRejected(Code.INVALID_PAYMENT_REQUIREMENTS, "accepted differs from paymentRequirements")
        if not client.may_use(requirements.network, requirements.scheme, requirements.asset):
            raise PaymentRejected(Code.CAPABILITY_NOT_ENABLED, "capability not enabled for this client")
        fee_payer = requirements.extra.get("feePayer")
        if fee_payer is not None and fee_payer not in self._fee_payers.addresses(requirements.network):
            raise PaymentRejected(Code.INVALID_FEE_PAYER, f"feePayer {fee_payer} is not a signer of this service")
        tx = decode_transaction(payload.transaction)
        fingerprint = payment_fingerprint(tx)
        key = idempotency_key(client.id, requirements.amount, fingerprint)
        return _Request(client, payload, requirements, chain, tx, fingerprint, key)

    def _receive(self, request: _Request) -> Payment:
        r = request.requirements
        return Payment(
            idempotency_key=request.key, client_id=request.client.id, network=r.network, asset=r.asset,
            amount=r.amount, pay_to=r.pay_to, terms_digest=r.digest, client_signature=request.fingerprint,
            extensions=dict(request.payload.extensions), resource=request.payload.resource,
            max_timeout_seconds=r.max_timeout_seconds,
        )

    def _bound(self, payment: Payment, request: _Request) -> VerifyOutcome | None:
        """A payment is bound to the terms it was first presented with; other terms are refused, not replayed."""
        if payment.terms_digest != request.requirements.digest:
            return VerifyOutcome.invalid(Code.INVALID_PAYMENT_REQUIREMENTS, payment.payer)
        return None

    def _decide(self, payment: Payment, request: _Request) -> None:
        try:
            exact, _, _ = self._evaluate(request)
        except PaymentRejected as rejected:
            payment.reject(str(rejected.code), rejected.message, rejected.payer, _details(rejected))
        else:
            payment.approve(exact.payer, exact.fee_payer, exact.blockhash)

    def _settle(self, payment: Payment, request: _Request) -> SettleOutcome:
        """Evaluate again (balances may have moved since a verify), record the broadcast, send, await."""
        if payment.state is PaymentState.REJECTED:
            payment.fail(payment.reason, payment.message)
            self._save(payment)
            return self._remember(payment, settle_outcome(payment), "settle")
        try:
            exact, signed, signature = self._evaluate(request)
        except PaymentRejected as rejected:
            if payment.verify_outcome is None:
                payment.reject(str(rejected.code), rejected.message, rejected.payer, _details(rejected))
            payment.fail(str(rejected.code), rejected.message)
            self._save(payment)
            return self._remember(payment, settle_outcome(payment), "settle")
        if payment.verify_outcome is None:
            payment.approve(exact.payer, exact.fee_payer, exact.blockhash)
        payment.submit(signature, exact.fee_payer, exact.blockhash, base64.b64encode(signed).decode())
        self._save(payment)
        try:
            request.chain.send(signed)
        except SubmissionError as refused:
            payment.fail(str(Code.SUBMISSION_FAILED), str(refused))
            self._save(payment)
            return self._remember(payment, settle_outcome(payment), "settle")
        return self._await(payment, request.chain)

    def _evaluate(self, request: _Request) -> tuple[ExactPayment, bytes, str]:
        """Inspect, check the destination exists, co-sign and simulate: the transaction and its signature."""
        tx, r, chain = request.transaction, request.requirements, request.chain
        loaded = {table: list(chain.lookup_table_addresses(table)) for table in lookup_tables(tx)}
        exact = inspect_exact(
            tx, asset=r.asset, pay_to=r.pay_to, amount=r.amount,
            fee_payers=self._fee_payers.addresses(r.network), limits=self._settings.limits, loaded=loaded,
        )
        fee_payer_signature = self._fee_payers.sign(exact.fee_payer, message_bytes(tx))
        signed = with_fee_payer_signature(tx, fee_payer_signature)
        simulation = chain.simulate(signed)
        # Only a failed simulation pays for the second look-up that names a missing destination clearly.
        if not simulation.ok and not chain.account_exists(exact.destination):
            raise SimulationFailed(exact.payer, {
                "error": f"destination token account {exact.destination} (payTo's {exact.mint} account) "
                         "does not exist; the merchant must create it before accepting payments",
                "errorCode": "AccountNotFound", "logs": [],
            })
        if not simulation.ok:
            raise SimulationFailed(exact.payer, {
                "error": simulation.error, "errorCode": simulation.error_code,
                "logs": list(simulation.logs)[-SIMULATION_LOG_LINES:],
            })
        return exact, signed, base58_signature(fee_payer_signature)

    def _reconcile(self, payment: Payment, chain: Chain) -> SettleOutcome:
        """A retried settle of a broadcast payment asks the chain about its signature; it never re-sends."""
        alive = chain.is_blockhash_valid(payment.blockhash)
        status = chain.signature_status(payment.signature)
        if status.confirmation is Confirmation.UNKNOWN and not alive:
            payment.fail(str(Code.SUBMISSION_FAILED), "the transaction expired before it landed")
            self._save(payment)
            return self._remember(payment, settle_outcome(payment), "settle")
        return self._await(payment, chain)

    def _await(self, payment: Payment, chain: Chain) -> SettleOutcome:
        deadline = self._clock.monotonic() + self._settings.confirmation_budget_seconds
        while True:
            status = chain.signature_status(payment.signature)
            if status.confirmation is Confirmation.CONFIRMED:
                payment.confirm()
                break
            if status.confirmation is Confirmation.FAILED:
                payment.fail(str(Code.SUBMISSION_FAILED), status.error or "the transaction failed on chain")
                break
            if self._clock.monotonic() >= deadline:
                return settle_outcome(payment)
            self._clock.sleep(self._settings.confirmation_poll_seconds)
        self._save(payment)
        return self._remember(payment, settle_outcome(payment), "settle")

    # -- the terminal result cache ------------------------------------------------------------------------

    def _remember(self, payment: Payment, outcome: Outcome, operation: str) -> Outcome:
        terminal = operation == "verify" or payment.is_settled
        if terminal:
            self._cache.put(payment.idempotency_key, operation,
                            {"terms": payment.terms_digest, "outcome": asdict(outcome)})
        return outcome

    def _replay(self, cached: dict[str, Any], request: _Request, kind: type[Outcome]) -> Outcome:
        if cached["terms"] != request.requirements.digest:
            conflict = VerifyOutcome.invalid(Code.INVALID_PAYMENT_REQUIREMENTS)
            return conflict if kind is VerifyOutcome else SettleOutcome.failed(
                Code.INVALID_PAYMENT_REQUIREMENTS, network=request.requirements.network)
        return kind(**cached["outcome"]).as_replay()

    # -- persistence --------------------------------------------------------------------------------------

    @contextmanager
    def _exclusive(self, key: str, ttl: float) -> Iterator[None]:
        with self._locks.hold(key, ttl) as held:
            if not held:
                raise DuplicateRequest(key)
            yield

    def _get(self, key: str) -> Payment | None:
        try:
            return self.repository.get(payment_id(key))
        except AggregateNotFoundError:
            return None

    def _save(self, payment: Payment) -> None:
        try:
            self.save(payment)
        except IntegrityError as race:
            raise DuplicateRequest(payment.idempotency_key) from race


class SimulationFailed(PaymentRejected):
    def __init__(self, payer: str, details: dict[str, Any]) -> None:
        super().__init__(Code.SIMULATION_FAILED, details["error"], payer=payer)
        self.details = details


def _details(rejected: PaymentRejected) -> dict[str, Any] | None:
    return getattr(rejected, "details", None)


def verify_outcome(payment: Payment) -> VerifyOutcome:
    if payment.verify_outcome is PaymentState.APPROVED:
        return VerifyOutcome(is_valid=True, payer=payment.payer)
    details = payment.details if payment.reason == Code.SIMULATION_FAILED.value else None
    return VerifyOutcome.invalid(payment.reason, payment.payer, details)


def settle_outcome(payment: Payment) -> SettleOutcome:
    if payment.state is PaymentState.CONFIRMED:
        return SettleOutcome(success=True, transaction=payment.signature, network=payment.network,
                             payer=payment.payer)
    if payment.state is PaymentState.SUBMITTED:
        return SettleOutcome.failed(Code.SETTLEMENT_PENDING, payment.payer, payment.network, payment.signature)
    return SettleOutcome.failed(payment.settle_reason, payment.payer, payment.network, payment.signature)
