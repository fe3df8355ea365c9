"""The Payments application: the facilitator's `verify` and `settle`, a paid delivery (`deliver`), the follow-up.

Each command: the request's checks (application/payment_checks.py, the key's scope among them) derive the
payment's idempotency key; the way in (application/payment_store.py) lets a settle hold the payment's lock, or
answers it from the terminal result cache while another request holds it; then the steps get the payment, decide
with outside facts from the ports (lookup tables, simulation, broadcast, confirmation) and save once per step:
- verify (application/verifying.py): evaluate and record a new payment; no lock, the event store refuses a
  second insert of it (docs/facilitator.md);
- settle (application/settling.py): evaluate again, claim, record the broadcast before it is sent, send;
- after the broadcast (application/reconciling.py): await the confirmation, re-send, record the outcome;
- deliver (application/deliveries.py): admit, forward to the transport's upstream, settle, one result.
A refusal by a rule (`PaymentRuleError`) or a lost race (`DuplicateRequestError`) is an answer, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload
from uuid import UUID

from eventsourcing.application import Application

from application import deliveries, reconciling, settling, verifying
from application.deliveries import Delivery, DeliveryResult, Judge, Refused, http_verdict
from application.errors import DuplicateRequestError
from application.outcomes import SettleOutcome, VerifyOutcome, replayed_settle
from application.payment_checks import PaymentRequest, check_request
from application.payment_identifiers import Identified, identified
from application.payment_store import Context, PaymentStore, Settings
from application.ports import (
    Chains,
    Clock,
    FeePayers,
    Locks,
    LocksHeldElsewhere,
    NoNetworks,
    NoResults,
    ResultCache,
    SystemClock,
    Upstream,
)
from domain.clients import Client
from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.payment import Payment, PaymentState
from domain.x402 import PaymentPayload, Requirements


class Payments(Application[UUID]):
    """Verify and settle x402 `exact` payments; every transition is an event of a `Payment`."""

    def __init__(self, env: Mapping[str, str] | None = None, *, chains: Chains | None = None,
                 fee_payers: FeePayers | None = None, locks: Locks | None = None, cache: ResultCache | None = None,
                 clock: Clock | None = None, settings: Settings | None = None) -> None:
        """`Payments(env)` alone (as eventsourcing's runners build it) reads its log and serves no network
        (application/ports.py); the composition root passes the real adapters."""
        super().__init__(env)
        self._chains: Chains = chains or NoNetworks()
        self._fee_payers: FeePayers = fee_payers or NoNetworks()
        self._locks: Locks = locks or LocksHeldElsewhere()
        self._clock: Clock = clock or SystemClock()
        self._settings = settings or Settings()
        self._store = PaymentStore(self, self._locks, cache or NoResults())

    # -- commands -----------------------------------------------------------------------------------------

    def verify(self, client: Client, payload: PaymentPayload, requirements: Requirements) -> VerifyOutcome:
        try:
            return verifying.verify(self._context(), self._request(client, payload, requirements))
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
        net, ctx = requirements.network, self._context()
        try:
            request = self._request(client, payload, requirements, request_key, via)
            ttl = ctx.settings.confirmation_budget_seconds + ctx.settings.lock_margin_seconds

            def replayable(cached: dict[str, Any]) -> bool:
                return request_key is None or request_key == cached.get("answer_key")

            with self._store.admitted(request.key, "settle", ttl, replayable) as cached:
                if cached:
                    return replayed_settle(cached, requirements.digest, net, request_key)
                return settling.settle(ctx, request)
        except PaymentRuleError as rejected:
            return SettleOutcome.failed(rejected.code, rejected.payer, network=net, message=rejected.message)
        except DuplicateRequestError as duplicate:
            return SettleOutcome.failed(Code.DUPLICATE_REQUEST, network=net, message=str(duplicate))

    @overload
    def deliver(self, client: Client, payload: PaymentPayload, requirements: Requirements, *, via: str,
                upstream: Upstream, settle_first: bool = ..., judge: Judge = ..., whole: bool = ...,
                identifier: None = None) -> DeliveryResult: ...

    @overload
    def deliver(self, client: Client, payload: PaymentPayload, requirements: Requirements, *, via: str,
                upstream: Upstream, settle_first: bool = ..., judge: Judge = ..., whole: bool = ...,
                identifier: str | None) -> DeliveryResult | Identified: ...

    def deliver(self, client: Client, payload: PaymentPayload, requirements: Requirements, *, via: str,
                upstream: Upstream, settle_first: bool = False, judge: Judge = http_verdict,
                whole: bool = False, identifier: str | None = None) -> DeliveryResult | Identified:
        """A paid request delivered through `upstream` (application/deliveries.py): the request checked once, its
        payment admitted, forwarded, settled (after a chargeable answer read whole, or first with
        `settle_first`), and one result for the transport to map. `via` names the door
        (`proxy:<service>:<route>`); `judge` says what an answer is (HTTP's status rule by default); `whole`
        reads the answer whole before it is judged under `settle_first` too (`settle: after` always does).

        A transport calls it once per paid request and maps the result; the `Upstream` it passes receives the
        payment's key (the proxy's `X-Paywarden-Payment-Hash`) and raises `UpstreamFailedError` for no answer.
        `identifier`: the client's x402 `payment-identifier` id (application/payment_identifiers.py): a payment
        served before answers its recorded success, another payment with the id is refused."""
        try:
            request = self._request(client, payload, requirements, via=via)
        except PaymentRuleError as rejected:
            return Refused("", str(rejected.code), rejected.message)
        if identifier is not None and (known := identified(self._store, request, identifier, self.save)) is not None:
            return known
        return deliveries.deliver(self._context(), request, Delivery(upstream, settle_first, judge, whole))

    def follow_up(self, key: str) -> PaymentState | None:
        """Carry a pending settlement on while nobody waits for it (application/reconciling.py): its state, None
        if it is unknown or another request holds it."""
        return reconciling.follow_up(self._context(), key)

    # -- queries ------------------------------------------------------------------------------------------

    def get_payment(self, key: str) -> Payment | None:
        return self._store.payment(key)

    # -- what each command starts from ----------------------------------------------------------------------

    def _request(self, client: Client, payload: PaymentPayload, requirements: Requirements,
                 request_key: str | None = None, via: str | None = None) -> PaymentRequest:
        return check_request(client, payload, requirements, chains=self._chains, fee_payers=self._fee_payers,
                             request_key=request_key, via=via)

    def _context(self) -> Context:
        """The steps' collaborators, as this application holds them now (a test may swap its settings)."""
        return Context(self._store, self._chains, self._fee_payers, self._clock, self._settings)
