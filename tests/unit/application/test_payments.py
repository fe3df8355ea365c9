"""The Payments application against fake ports: idempotency, pending settlements and reconciliation."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import Tracking
from eventsourcing.system import Leader, RecordingEventReceiver
from solders.hash import Hash
from solders.keypair import Keypair
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from application.errors import DuplicateRequestError, KeyEnvironmentError
from application.payments import Payments
from application.ports import ChainUnavailableError, Confirmation, SignatureStatus, Simulation, SubmissionError
from application.verifying import receive
from domain.claims import Claim, ClaimKind
from domain.clients import Capability, Client
from domain.codes import Code
from domain.networks import DEVNET, MAINNET, SCHEME_EXACT, KeyEnv
from domain.payment import Payment, PaymentState
from domain.x402 import PaymentPayload, Requirements
from interfaces.adapters.memory import InProcessLocks
from interfaces.adapters.signers import KeypairFeePayers
from interfaces.sandbox.exact_client import build_exact_payment, to_base64
from projections.results import ResultCacheProjection, ResultCacheView
from projections.runner import catch_up
from tests.conftest import decode


class FakeChain:
    def __init__(self) -> None:
        self.simulation = Simulation(ok=True)
        self.sent: list[bytes] = []
        self.simulated: list[bool] = []  # signatures_verified of each simulate
        self.sent_verified: list[bool] = []  # signatures_verified of each send
        self.statuses: list[SignatureStatus] = []
        self.refuse: str | None = None
        self.blockhash_valid = True
        self.accounts_exist = True

    def simulate(self, transaction: bytes, *, signatures_verified: bool = False) -> Simulation:
        self.simulated.append(signatures_verified)
        return self.simulation

    def send(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        self.sent_verified.append(signatures_verified)
        if self.refuse:
            raise SubmissionError(self.refuse)
        self.sent.append(transaction)
        return "sig"

    def signature_status(self, signature: str) -> SignatureStatus:
        return self.statuses.pop(0) if self.statuses else SignatureStatus(Confirmation.CONFIRMED)

    def is_blockhash_valid(self, blockhash: str) -> bool:
        return self.blockhash_valid

    def account_exists(self, address: str) -> bool:
        return self.accounts_exist

    def lookup_table_addresses(self, table: str):
        return []


class FakeChains:
    def __init__(self, chain: FakeChain) -> None:
        self.chain = chain

    def for_network(self, caip2: str):
        return self.chain if caip2 == DEVNET.caip2 else None


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


FEE_PAYER = Keypair()
PAYER = Keypair()
PAY_TO = Keypair().pubkey()
CLIENT = Client(id="merchant:1", registered=True, env=KeyEnv.TEST,
                capabilities=frozenset({Capability(DEVNET.caip2, SCHEME_EXACT, DEVNET.usdc_mint)}))


@pytest.fixture
def chain() -> FakeChain:
    return FakeChain()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class MemoryResultCache(ResultCacheView):
    """The result cache's view in memory, filled only by `ResultCacheProjection`. `caught_up`: every read first
    brings the projection up to date; otherwise it never runs, and every duplicate is answered from the events."""

    def __init__(self, caught_up: bool) -> None:
        self.caught_up, self.payments = caught_up, None
        self.positions: dict[str, int] = {}
        self.values: dict[tuple[str, str], dict[str, Any]] = {}

    def max_tracking_id(self, application_name: str) -> int | None:
        return self.positions.get(application_name)

    def insert_tracking(self, tracking: Tracking) -> None:
        self.record(tracking)

    def payment(self, payment_id: str) -> dict[str, Any] | None:
        return self.values.get(("payment", payment_id))

    def record(self, tracking: Tracking, *, payment_id: str | None = None, payment: dict[str, Any] | None = None,
               results: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        self.positions[tracking.application_name] = tracking.notification_id
        if payment_id is not None and payment is not None:
            self.values[("payment", payment_id)] = payment
        self.values.update(results or {})

    def get(self, key: str, operation: str) -> dict[str, Any] | None:
        if self.caught_up and self.payments is not None:
            catch_up(self.payments, ResultCacheProjection(self))
        return self.values.get((key, operation))


@pytest.fixture(params=["cache behind", "cache caught up"])
def payments(request: pytest.FixtureRequest, chain: FakeChain, clock: FakeClock) -> Payments:
    cache = MemoryResultCache(caught_up=request.param == "cache caught up")
    cache.payments = Payments({"PERSISTENCE_MODULE": "eventsourcing.popo"}, chains=FakeChains(chain),
                              fee_payers=KeypairFeePayers([FEE_PAYER]), locks=InProcessLocks(), cache=cache,
                              clock=clock)
    return cache.payments


def payment(amount: int = 1_000, *, network: str = DEVNET.caip2) -> tuple[PaymentPayload, Requirements]:
    tx = build_exact_payment(PAYER, fee_payer=FEE_PAYER.pubkey(), mint=DEVNET.usdc_mint, pay_to=PAY_TO,
                             amount=amount, blockhash=Hash.new_unique())
    requirements = Requirements(SCHEME_EXACT, network, amount, DEVNET.usdc_mint, str(PAY_TO))
    return PaymentPayload(transaction=to_base64(tx)), requirements


def history(payments: Payments, payload: PaymentPayload, requirements: Requirements) -> list[str]:
    key = payments._request(CLIENT, payload, requirements).key
    aggregate = payments.get_payment(key)
    return [type(e).__name__ for e in payments.repository.event_store.get(aggregate.id)]


def test_a_settled_payment_reads_received_approved_submitted_confirmed(payments, chain):
    payload, requirements = payment()
    outcome = payments.settle(CLIENT, payload, requirements)
    assert outcome.success and outcome.payer == str(PAYER.pubkey()) and outcome.network == DEVNET.caip2
    assert history(payments, payload, requirements) == ["Received", "Approved", "SettlementSubmitted", "Confirmed"]
    assert len(chain.sent) == 1
    # the broadcast is the transaction the settle's evaluation simulated: its signatures are known good
    assert chain.simulated == [True] and chain.sent_verified == [True]


def test_the_chain_simulates_the_co_signed_transaction_trusting_its_checked_signatures(payments, chain):
    """The client's signature is verified by the exact inspection, the fee payer's is made here: the simulation is
    told so, and it gets exactly the client's transaction with the fee payer's signature verifying in slot 0."""
    payload, requirements = payment()
    simulated: list[bytes] = []
    simulate = chain.simulate
    chain.simulate = lambda tx, **flags: simulated.append(tx) or simulate(tx, **flags)
    assert payments.verify(CLIENT, payload, requirements).is_valid
    client_tx = VersionedTransaction.from_bytes(decode(payload.transaction))
    signed = VersionedTransaction.from_bytes(simulated[0])
    assert chain.simulated == [True] and signed.message == client_tx.message
    assert signed.signatures[1:] == client_tx.signatures[1:]
    assert signed.verify_with_results() == [True, True]

    other, requirements = payment()
    other_tx = VersionedTransaction.from_bytes(decode(other.transaction))
    forged = VersionedTransaction.populate(other_tx.message, [other_tx.signatures[0], Signature.new_unique()])
    refused = payments.verify(CLIENT, PaymentPayload(transaction=to_base64(forged)), requirements)
    assert (refused.invalid_reason, refused.invalid_message) == (Code.INVALID_PAYLOAD,
                                                                 "the payer's signature does not verify")
    assert chain.simulated == [True]  # refused before the chain is asked


def test_verify_twice_answers_the_recorded_result_as_a_replay(payments):
    payload, requirements = payment()
    first = payments.verify(CLIENT, payload, requirements)
    second = payments.verify(CLIENT, payload, requirements)
    assert first.is_valid and not first.replayed
    assert second.is_valid and second.replayed
    assert history(payments, payload, requirements) == ["Received", "Approved"]


def test_a_recorded_payment_is_answered_as_recorded_by_a_verify_the_cache_does_not_answer(payments, chain):
    """A verify the cache does not answer evaluates and inserts without reading first; a payment recorded before
    still answers as recorded (its replay, or the conflict of terms), also when the chain cannot be asked, and
    nothing more is recorded."""
    payload, requirements = payment()
    reads: list[object] = []
    get = payments.repository.get
    payments.repository.get = lambda *args, **kwargs: reads.append(args[0]) or get(*args, **kwargs)
    first = payments.verify(CLIENT, payload, requirements)
    assert first.is_valid and reads == []  # a new payment: evaluated and inserted, nothing read first
    key = payments._request(CLIENT, payload, requirements).key
    recorded = payments.recorder.max_notification_id()
    chain.simulation = Simulation(ok=False, error="spent meanwhile", error_code="InstructionError")
    again = payments.verify(CLIENT, payload, requirements)
    assert again.is_valid and again.replayed and again.payer == first.payer
    other_terms = Requirements(SCHEME_EXACT, DEVNET.caip2, requirements.amount, DEVNET.usdc_mint,
                               str(Keypair().pubkey()))
    assert payments.verify(CLIENT, payload, other_terms).invalid_reason == Code.INVALID_PAYMENT_REQUIREMENTS

    def unreachable(transaction: bytes, **flags: object) -> Simulation:
        raise ChainUnavailableError("the RPC node does not answer")

    chain.simulate = unreachable
    assert payments.verify(CLIENT, payload, requirements) == again
    with pytest.raises(ChainUnavailableError):  # a payment never recorded: the failure stands
        payments.verify(CLIENT, *payment(2_000))
    assert payments.recorder.max_notification_id() == recorded
    assert payments.get_payment(key).verify_outcome is not None


def test_a_second_settle_of_a_settled_payment_is_a_duplicate_settlement_carrying_the_original(payments, chain):
    payload, requirements = payment()
    first = payments.settle(CLIENT, payload, requirements)
    again = payments.settle(CLIENT, payload, requirements)
    assert first.success
    assert not again.success and again.error_reason == Code.DUPLICATE_SETTLEMENT
    assert (again.transaction, again.network, again.payer) == (first.transaction, first.network, first.payer)
    assert first.transaction in again.error_message
    assert len(chain.sent) == 1
    # Answered from the cache or the event store alike, any number of times.
    assert payments.settle(CLIENT, payload, requirements).error_reason == Code.DUPLICATE_SETTLEMENT


def test_a_verify_of_a_settled_payment_is_invalid_duplicate_settlement(payments):
    payload, requirements = payment()
    assert payments.verify(CLIENT, payload, requirements).is_valid
    assert payments.verify(CLIENT, payload, requirements).is_valid  # only approved: the stored result
    assert payments.settle(CLIENT, payload, requirements).success
    after = payments.verify(CLIENT, payload, requirements)
    assert not after.is_valid and after.invalid_reason == Code.DUPLICATE_SETTLEMENT
    assert after.payer == str(PAYER.pubkey())


def test_the_idempotency_key_of_the_answered_settle_replays_its_success_and_no_other_does(payments, chain):
    payload, requirements = payment()
    first = payments.settle(CLIENT, payload, requirements, "order-17")
    replay = payments.settle(CLIENT, payload, requirements, "order-17")
    assert first.success and not first.replayed
    assert replay.success and replay.replayed and replay == first.as_replay()
    assert payments.settle(CLIENT, payload, requirements, "order-18").error_reason == Code.DUPLICATE_SETTLEMENT
    assert payments.settle(CLIENT, payload, requirements).error_reason == Code.DUPLICATE_SETTLEMENT
    assert payments.settle(CLIENT, payload, requirements, "order-17").success
    assert len(chain.sent) == 1


def test_an_idempotency_key_sent_with_another_payment_is_refused_naming_it(payments):
    payload, requirements = payment()
    assert payments.settle(CLIENT, payload, requirements, "order-17").success
    other_payload, other_requirements = payment()
    refused = payments.settle(CLIENT, other_payload, other_requirements, "order-17")
    assert refused.error_reason == Code.INVALID_PAYLOAD and "order-17" in refused.error_message
    key = payments._request(CLIENT, other_payload, other_requirements).key
    assert payments.get_payment(key) is None  # nothing recorded


def test_the_retry_after_settlement_pending_is_the_one_success(payments, chain):
    chain.statuses = [SignatureStatus(Confirmation.PENDING)] * 100
    payload, requirements = payment()
    pending = payments.settle(CLIENT, payload, requirements)
    assert pending.pending and not pending.success
    chain.statuses = []
    assert payments.settle(CLIENT, payload, requirements).success
    assert payments.settle(CLIENT, payload, requirements).error_reason == Code.DUPLICATE_SETTLEMENT


def test_a_payment_confirmed_by_a_background_follow_up_still_answers_its_next_settle_success_once(payments, chain):
    chain.statuses = [SignatureStatus(Confirmation.PENDING)] * 100
    payload, requirements = payment()
    payments.settle(CLIENT, payload, requirements)
    key = payments._request(CLIENT, payload, requirements).key
    chain.statuses = []
    assert payments.follow_up(key) is PaymentState.CONFIRMED
    assert payments.verify(CLIENT, payload, requirements).is_valid  # nobody was told yet: not a duplicate
    retry = payments.settle(CLIENT, payload, requirements)
    assert retry.success and not retry.replayed
    assert payments.settle(CLIENT, payload, requirements).error_reason == Code.DUPLICATE_SETTLEMENT
    assert history(payments, payload, requirements)[-2:] == ["Confirmed", "SuccessAnswered"]
    assert len(chain.sent) == 1


def test_an_unseen_pending_transaction_is_re_sent_identically_until_it_lands(payments, chain):
    chain.statuses = [SignatureStatus(Confirmation.UNKNOWN)] * 20 + [SignatureStatus(Confirmation.CONFIRMED)]
    payload, requirements = payment()
    outcome = payments.settle(CLIENT, payload, requirements)
    assert outcome.success
    assert len(chain.sent) >= 2 and len(set(chain.sent)) == 1  # the same bytes every time


def test_one_transaction_settles_one_payment_when_the_first_broadcast_was_lost(payments, chain):
    # Merchant A's broadcast is lost on the way (a server fault: 500, the payment stays submitted) ...
    other = Client(id="merchant:2", registered=True, env=KeyEnv.TEST, capabilities=CLIENT.capabilities)
    payload, requirements = payment()
    real_send = chain.send
    chain.send = lambda transaction, **flags: (_ for _ in ()).throw(ConnectionError("dropped"))
    with pytest.raises(ConnectionError):
        payments.settle(CLIENT, payload, requirements)
    chain.send = real_send
    # ... merchant B presents the same transaction: the transaction is A's, B is refused ...
    chain.statuses = [SignatureStatus(Confirmation.UNKNOWN)]
    second = payments.settle(other, payload, requirements)
    assert second.error_reason == Code.DUPLICATE_SETTLEMENT and not chain.sent
    # ... and A's retry re-sends its own transaction and is the one success.
    chain.statuses = [SignatureStatus(Confirmation.UNKNOWN)] * 10
    first = payments.settle(CLIENT, payload, requirements)
    assert first.success and len(set(chain.sent)) == 1
    claims = [e for e in payments.repository.event_store.recorder.select_notifications(1, 100)
              if e.topic.endswith("Claim.Made")]
    assert len(claims) == 1


def test_a_forged_twin_verified_first_does_not_change_the_genuine_payments_answer(payments):
    genuine_payload, requirements = payment()
    genuine = VersionedTransaction.from_bytes(decode(genuine_payload.transaction))
    forged = build_exact_payment(Keypair(), fee_payer=FEE_PAYER.pubkey(), mint=DEVNET.usdc_mint, pay_to=PAY_TO,
                                 amount=requirements.amount, blockhash=Hash.new_unique())
    # The forger copies the genuine payment's client signature onto a transaction of its own.
    twin = VersionedTransaction.populate(forged.message, [forged.signatures[0], genuine.signatures[1]])
    rejected = payments.verify(CLIENT, PaymentPayload(transaction=to_base64(twin)), requirements)
    assert not rejected.is_valid and rejected.invalid_reason == Code.INVALID_PAYLOAD
    outcome = payments.verify(CLIENT, genuine_payload, requirements)
    assert outcome.is_valid and not outcome.replayed


def test_a_pay_to_and_memo_pair_settles_once(payments, chain):
    requirements = Requirements(SCHEME_EXACT, DEVNET.caip2, 1_000, DEVNET.usdc_mint, str(PAY_TO),
                                extra={"memo": "invoice-42"})
    transactions = [build_exact_payment(PAYER, fee_payer=FEE_PAYER.pubkey(), mint=DEVNET.usdc_mint, pay_to=PAY_TO,
                                        amount=1_000, blockhash=Hash.new_unique(), memo=b"invoice-42")
                    for _ in range(2)]
    first = payments.settle(CLIENT, PaymentPayload(transaction=to_base64(transactions[0])), requirements)
    second = payments.settle(CLIENT, PaymentPayload(transaction=to_base64(transactions[1])), requirements)
    assert first.success
    assert second.error_reason == Code.DUPLICATE_SETTLEMENT and "memo" in second.error_message
    assert len(chain.sent) == 1


def test_every_refusal_says_what_is_wrong(payments, chain):
    payload, requirements = payment()
    wrong_amount = Requirements(SCHEME_EXACT, DEVNET.caip2, 999, DEVNET.usdc_mint, str(PAY_TO))
    outcome = payments.verify(CLIENT, payload, wrong_amount)
    assert outcome.invalid_reason == Code.AUTHORIZATION_VALUE and "999" in outcome.invalid_message
    chain.refuse, chain.statuses = "Blockhash not found", [SignatureStatus(Confirmation.UNKNOWN)]
    failed = payments.settle(CLIENT, *payment())
    assert failed.error_reason == Code.SUBMISSION_FAILED and "Blockhash not found" in failed.error_message


def test_settle_past_the_confirmation_budget_is_pending_with_its_signature(payments, chain):
    chain.statuses = [SignatureStatus(Confirmation.PENDING)] * 1000
    payload, requirements = payment()
    outcome = payments.settle(CLIENT, payload, requirements)
    assert outcome.error_reason == Code.SETTLEMENT_PENDING and outcome.pending
    assert outcome.transaction and outcome.network == DEVNET.caip2
    assert history(payments, payload, requirements) == ["Received", "Approved", "SettlementSubmitted"]


def test_settle_retried_while_pending_never_broadcasts_twice(payments, chain):
    chain.statuses = [SignatureStatus(Confirmation.PENDING)] * 100
    payload, requirements = payment()
    pending = payments.settle(CLIENT, payload, requirements)
    chain.statuses = [SignatureStatus(Confirmation.CONFIRMED)]
    confirmed = payments.settle(CLIENT, payload, requirements)
    assert confirmed.success and confirmed.transaction == pending.transaction
    assert len(chain.sent) == 1
    assert history(payments, payload, requirements)[-1] == "Confirmed"


def test_a_pending_settlement_whose_blockhash_expired_unseen_fails_without_resending(payments, chain):
    chain.statuses = [SignatureStatus(Confirmation.PENDING)] * 100
    payload, requirements = payment()
    payments.settle(CLIENT, payload, requirements)
    chain.statuses, chain.blockhash_valid = [SignatureStatus(Confirmation.UNKNOWN)], False
    failed = payments.settle(CLIENT, payload, requirements)
    assert not failed.success and failed.error_reason == Code.SUBMISSION_FAILED
    assert len(chain.sent) == 1


def test_a_refused_broadcast_is_submission_failed_and_terminal(payments, chain):
    chain.refuse, chain.statuses = "Blockhash not found", [SignatureStatus(Confirmation.UNKNOWN)]
    payload, requirements = payment()
    outcome = payments.settle(CLIENT, payload, requirements)
    assert outcome.error_reason == Code.SUBMISSION_FAILED
    assert history(payments, payload, requirements) == ["Received", "Approved", "SettlementSubmitted", "Failed"]
    chain.refuse = None
    assert payments.settle(CLIENT, payload, requirements).replayed


def test_a_broadcast_refused_as_already_processed_is_the_chains_outcome_not_a_failure(payments, chain):
    """Another sender's copy of the same bytes landed first (a follow-up that did not see this settle's lock): the
    transfer happened, so the settle awaits it and answers success, never `submission_failed`."""
    chain.refuse = "Transaction simulation failed: This transaction has already been processed"
    chain.statuses = [SignatureStatus(Confirmation.CONFIRMED)]
    payload, requirements = payment()
    outcome = payments.settle(CLIENT, payload, requirements)
    assert outcome.success and outcome.transaction
    assert history(payments, payload, requirements)[-2:] == ["SettlementSubmitted", "Confirmed"]
    assert payments.settle(CLIENT, payload, requirements).error_reason == Code.DUPLICATE_SETTLEMENT


def test_failed_simulation_is_rejected_with_the_last_five_log_lines(payments, chain):
    chain.simulation = Simulation(ok=False, error="insufficient funds", error_code="InstructionError",
                                  logs=[f"log {i}" for i in range(9)])
    payload, requirements = payment()
    outcome = payments.verify(CLIENT, payload, requirements)
    assert outcome.invalid_reason == Code.SIMULATION_FAILED
    assert outcome.simulation_details == {"error": "insufficient funds", "errorCode": "InstructionError",
                                          "logs": ["log 4", "log 5", "log 6", "log 7", "log 8"]}


def test_a_settle_after_a_rejected_verify_fails_with_the_same_reason_without_touching_the_chain(payments, chain):
    chain.simulation = Simulation(ok=False, error="no funds", error_code="InstructionError")
    payload, requirements = payment()
    payments.verify(CLIENT, payload, requirements)
    chain.simulation = Simulation(ok=True)
    outcome = payments.settle(CLIENT, payload, requirements)
    assert outcome.error_reason == Code.SIMULATION_FAILED and not chain.sent
    assert history(payments, payload, requirements) == ["Received", "Rejected", "Failed"]


def test_a_concurrent_duplicate_is_refused_while_the_first_holds_the_lock(payments):
    payload, requirements = payment()
    key = payments._request(CLIENT, payload, requirements).key
    with payments._locks.hold(key, 10) as held:
        assert held
        outcome = payments.settle(CLIENT, payload, requirements)
    assert outcome.error_reason == Code.DUPLICATE_REQUEST
    assert payments.get_payment(key) is None


def test_a_request_that_gets_the_lock_reads_the_event_store_only_and_the_cache_answers_while_it_is_held(chain,
                                                                                                       clock):
    """The lock first; the cache only for a settle that finds it held (one read, not two, for a new payment), where
    a terminal result still answers and anything else is `duplicate_request`. A verify takes no lock and reads no
    cache: the event store answers it, held or not (docs/facilitator.md)."""
    cache = MemoryResultCache(caught_up=True)
    reads: list[tuple[str, str]] = []
    get = cache.get
    cache.get = lambda key, operation: reads.append((key, operation)) or get(key, operation)
    payments = cache.payments = Payments({"PERSISTENCE_MODULE": "eventsourcing.popo"}, chains=FakeChains(chain),
                                         fee_payers=KeypairFeePayers([FEE_PAYER]), locks=InProcessLocks(),
                                         cache=cache, clock=clock)
    chain.simulation = Simulation(ok=False, error="insufficient funds", error_code="InstructionError")
    payload, requirements = payment()
    first = payments.verify(CLIENT, payload, requirements)
    again = payments.settle(CLIENT, payload, requirements)
    assert first.invalid_reason == again.error_reason == Code.SIMULATION_FAILED
    assert reads == []  # the lock was free: the event store answered
    key = payments._request(CLIENT, payload, requirements).key
    chain.simulation = Simulation(ok=True)
    with payments._locks.hold(key, 10) as held:
        assert held
        busy = payments.settle(CLIENT, payload, requirements)
        busy_verify = payments.verify(CLIENT, payload, requirements)
        other = payments.settle(CLIENT, *payment())  # another payment: its own lock, free
    assert busy == again.as_replay()  # a terminal result: from the cache, while another request holds the payment
    assert busy_verify == first.as_replay()  # from the event store, no lock asked
    assert reads == [(key, "settle")] and other.success
    approved_payload, approved = payment()
    approved_key = payments._request(CLIENT, approved_payload, approved).key
    assert payments.verify(CLIENT, approved_payload, approved).is_valid
    with payments._locks.hold(approved_key, 10):
        refused = payments.settle(CLIENT, approved_payload, approved)
        assert payments.verify(CLIENT, approved_payload, approved).is_valid
    assert refused.error_reason == Code.DUPLICATE_REQUEST  # an approval is not terminal: not in the cache
    assert payments.get_payment(approved_key).state is PaymentState.APPROVED  # nothing recorded under the lock


def test_two_verifies_racing_on_a_new_payment_record_it_once_and_answer_alike(payments, chain):
    """Both evaluate before either inserts: the event store refuses the second insert of the payment (its id is
    uuid5 of its key), and the one that lost answers the recorded result, as a replay."""
    payload, requirements = payment()
    simulate, inner = chain.simulate, []

    def racing(transaction: bytes, **flags: object) -> Simulation:
        if not inner:  # the outer verify's simulation: another verify of the payment runs to its end meanwhile
            inner.append(None)
            inner.append(payments.verify(CLIENT, payload, requirements))
        return simulate(transaction, **flags)

    chain.simulate = racing
    outer = payments.verify(CLIENT, payload, requirements)
    assert outer.is_valid and inner[1].is_valid and outer.payer == inner[1].payer
    assert (inner[1].replayed, outer.replayed) == (False, True)  # the inner one inserted first; the outer lost
    assert history(payments, payload, requirements) == ["Received", "Approved"]


def test_a_settle_that_a_verify_of_the_new_payment_beats_to_the_store_settles_from_its_record_once(payments, chain):
    """A verify takes no lock: it may record a new payment while a settle of it holds the lock and simulates. The
    settle's save then conflicts before anything is sent; it reads the verify's record and settles from it."""
    payload, requirements = payment()
    simulate, verified = chain.simulate, []

    def racing(transaction: bytes, **flags: object) -> Simulation:
        if not verified:  # the settle's simulation: a verify of the same payment runs to its end meanwhile
            verified.append(None)
            verified.append(payments.verify(CLIENT, payload, requirements))
        return simulate(transaction, **flags)

    chain.simulate = racing
    outcome = payments.settle(CLIENT, payload, requirements)
    assert verified[1].is_valid and not verified[1].replayed  # the verify recorded the payment first
    assert outcome.success and len(chain.sent) == 1
    assert history(payments, payload, requirements) == ["Received", "Approved", "SettlementSubmitted", "Confirmed"]


def _payment_and_claim(key: str) -> tuple[Payment, Claim]:
    aggregate = Payment(idempotency_key=key, client_id=CLIENT.id, network=DEVNET.caip2, asset=DEVNET.usdc_mint,
                        amount=1_000, pay_to=str(PAY_TO), terms_digest="d" * 64, client_signature="s",
                        extensions={}, resource=None, message_hash="m" * 64)
    aggregate.approve(str(PAYER.pubkey()), str(FEE_PAYER.pubkey()), "blockhash")
    return aggregate, Claim(kind=ClaimKind.TRANSACTION, subject=f"tx-{key}", payment_id=str(aggregate.id))


def _notifications(app: Application[Any]) -> list[tuple[Any, ...]]:
    return [(n.id, n.originator_id, n.originator_version, n.topic, n.state)
            for n in app.recorder.select_notifications(start=1, limit=10)]


def test_a_payment_store_save_records_what_the_librarys_save_does_all_of_a_request_or_none():
    """`PaymentStore.save` puts the events of the payment and of its request's claims in the event store (the
    library's public `EventStore.put`; `Payments.save` stays the library's own): the very notifications
    `Application.save` records, in one `insert_events`, so a claim already taken stops the payment too."""
    assert Payments.save is Application.save
    library, ours = (Payments({"PERSISTENCE_MODULE": "eventsourcing.popo"}) for _ in range(2))
    payment_, claim = _payment_and_claim("k1")
    twins = copy.deepcopy((payment_, claim))  # the same pending events, timestamps included
    library.save(payment_, claim)
    ours._store.save(twins[0], SimpleNamespace(claims=[twins[1]]))
    assert _notifications(ours) == _notifications(library)
    assert [n[3].rsplit(".", 1)[-1] for n in _notifications(ours)] == ["Received", "Approved", "Made"]

    payment_, _ = _payment_and_claim("k2")
    _, taken = _payment_and_claim("k1")  # the claim k1's payment holds: its id exists
    with pytest.raises(DuplicateRequestError):
        ours._store.save(payment_, SimpleNamespace(claims=[taken]))
    with pytest.raises(AggregateNotFoundError):
        ours.repository.get(payment_.id)
    assert ours.recorder.max_notification_id() == 3


def test_a_payment_store_over_a_snapshotting_application_saves_with_the_librarys_save():
    """What `insert_events` alone would skip: an application that snapshots (or caches aggregates) is saved by
    `save`, and so is one whose `save` is its own, a `Leader` prompting its followers."""

    class SnapshottingPayments(Payments):
        snapshotting_intervals = {Payment: 2}

    app = SnapshottingPayments({"PERSISTENCE_MODULE": "eventsourcing.popo"})
    payment_, _ = _payment_and_claim("k1")
    app._store.save(payment_)
    assert app.snapshots is not None and [s.originator_version for s in app.snapshots.get(payment_.id)] == [2]

    class LeadingPayments(Payments, Leader[UUID]):
        pass

    class Follower(RecordingEventReceiver[UUID]):
        def __init__(self) -> None:
            self.received: list[int] = []

        def receive_recording_event(self, new_recording_event: Any) -> None:
            self.received += [r.notification.id for r in new_recording_event.recordings]

    leader, follower = LeadingPayments({"PERSISTENCE_MODULE": "eventsourcing.popo"}), Follower()
    leader.lead(follower)
    leader._store.save(_payment_and_claim("k2")[0])
    assert follower.received == [1, 2]


def test_the_same_transaction_presented_with_other_terms_is_refused_not_replayed(payments):
    payload, requirements = payment()
    assert payments.verify(CLIENT, payload, requirements).is_valid
    other = Requirements(SCHEME_EXACT, DEVNET.caip2, requirements.amount, DEVNET.usdc_mint, str(Keypair().pubkey()))
    outcome = payments.verify(CLIENT, payload, other)
    assert outcome.invalid_reason == Code.INVALID_PAYMENT_REQUIREMENTS and not outcome.replayed


def test_request_checks_record_nothing(payments):
    payload, requirements = payment()
    unsupported = Requirements("upto", DEVNET.caip2, 1_000, DEVNET.usdc_mint, str(PAY_TO))
    assert payments.verify(CLIENT, payload, unsupported).invalid_reason == Code.UNSUPPORTED_SCHEME
    elsewhere = Requirements(SCHEME_EXACT, "solana:unknown", 1_000, DEVNET.usdc_mint, str(PAY_TO))
    assert payments.verify(CLIENT, payload, elsewhere).invalid_reason == Code.INVALID_NETWORK
    other_asset = Requirements(SCHEME_EXACT, DEVNET.caip2, 1_000, MAINNET.usdc_mint, str(PAY_TO))
    assert payments.verify(CLIENT, payload, other_asset).invalid_reason == Code.CAPABILITY_NOT_ENABLED
    assert payments.recorder.max_notification_id() in (None, 0)


def test_a_test_key_cannot_pay_on_mainnet(payments, chain):
    payments._chains.for_network = lambda caip2: chain  # serve mainnet too
    payload, requirements = payment(network=MAINNET.caip2)
    with pytest.raises(KeyEnvironmentError):
        payments.verify(CLIENT, payload, requirements)


def test_a_missing_destination_account_fails_fast_with_a_clear_reason(payments, chain):
    chain.accounts_exist = False
    chain.simulation = Simulation(ok=False, error="invalid account data", error_code="InstructionError")
    payload, requirements = payment()
    outcome = payments.verify(CLIENT, payload, requirements)
    assert outcome.invalid_reason == Code.SIMULATION_FAILED
    assert outcome.simulation_details["errorCode"] == "AccountNotFound"
    assert "does not exist" in outcome.simulation_details["error"]


def test_state_after_settle_keeps_the_verify_outcome_apart(payments):
    payload, requirements = payment()
    payments.settle(CLIENT, payload, requirements)
    key = payments._request(CLIENT, payload, requirements).key
    aggregate = payments.get_payment(key)
    assert aggregate.state is PaymentState.CONFIRMED and aggregate.verify_outcome is PaymentState.APPROVED
    assert payments.verify(CLIENT, payload, requirements).invalid_reason == Code.DUPLICATE_SETTLEMENT


def recorded_under_another_key(payments: Payments, payload: PaymentPayload, requirements: Requirements, *,
                               confirmed: bool, client: Client = CLIENT) -> Payment:
    """The payment as an earlier release recorded it: under a key derived otherwise, its transaction claimed."""
    request = payments._request(client, payload, requirements)
    earlier = receive(request)
    earlier = Payment(**{**{k: getattr(earlier, k) for k in (
        "client_id", "network", "asset", "amount", "pay_to", "terms_digest", "client_signature", "extensions",
        "resource", "max_timeout_seconds")}, "idempotency_key": "derived-by-an-earlier-release"})
    earlier.approve(str(PAYER.pubkey()), str(FEE_PAYER.pubkey()), "blockhash")
    earlier.submit("the-earlier-signature", str(FEE_PAYER.pubkey()), "blockhash", payload.transaction)
    if confirmed:
        earlier.confirm(answered=True)
    payments.save(earlier, Claim(kind=ClaimKind.TRANSACTION, subject=request.message_hash,
                                 payment_id=str(earlier.id)))
    return earlier


def test_a_payment_recorded_under_an_earlier_key_is_answered_from_its_record(payments, chain):
    payload, requirements = payment()
    recorded_under_another_key(payments, payload, requirements, confirmed=True)
    for key in (None, "order-1"):
        again = payments.settle(CLIENT, payload, requirements, request_key=key)
        assert (again.success, again.error_reason, again.transaction) == \
            (False, Code.DUPLICATE_SETTLEMENT, "the-earlier-signature")
    chain.simulation = Simulation(ok=False, error="already processed", error_code="AlreadyProcessed")
    verified = payments.verify(CLIENT, payload, requirements)
    assert verified.invalid_reason == Code.DUPLICATE_SETTLEMENT and "the-earlier-signature" in verified.invalid_message
    assert chain.sent == [] and payments.get_payment(payments._request(CLIENT, payload, requirements).key) is None


def test_a_pending_payment_recorded_under_an_earlier_key_is_reconciled_not_broadcast_again(payments, chain):
    payload, requirements = payment()
    earlier = recorded_under_another_key(payments, payload, requirements, confirmed=False)
    settled = payments.settle(CLIENT, payload, requirements, request_key="order-2")
    assert (settled.success, settled.transaction) == (True, "the-earlier-signature")
    assert payments.repository.get(earlier.id).answer_key == "order-2"
    assert payments.settle(CLIENT, payload, requirements, request_key="order-2").replayed


def test_another_clients_record_of_the_transaction_is_not_taken_for_this_payment(payments, chain):
    payload, requirements = payment()
    other = Client(id="merchant:2", registered=True, env=KeyEnv.TEST, capabilities=CLIENT.capabilities)
    recorded_under_another_key(payments, payload, requirements, confirmed=True, client=other)
    refused = payments.settle(CLIENT, payload, requirements)
    assert refused.error_reason == Code.DUPLICATE_SETTLEMENT and refused.transaction is None
    assert chain.sent == []
