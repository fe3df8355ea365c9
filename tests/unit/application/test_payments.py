"""The Payments application against fake ports: idempotency, pending settlements and reconciliation."""

from __future__ import annotations

import pytest
from solders.hash import Hash
from solders.keypair import Keypair

from application.payments import KeyEnvironmentError, Payments
from application.ports import Confirmation, SignatureStatus, Simulation, SubmissionError
from domain.clients import Capability, Client
from domain.codes import Code
from domain.networks import DEVNET, MAINNET, SCHEME_EXACT, KeyEnv
from domain.payment import PaymentState
from domain.x402 import PaymentPayload, Requirements
from interfaces.exact_client import build_exact_payment, to_base64
from interfaces.inprocess import InProcessLocks, InProcessResultCache
from interfaces.signers import KeypairFeePayers


class FakeChain:
    def __init__(self) -> None:
        self.simulation = Simulation(ok=True)
        self.sent: list[bytes] = []
        self.statuses: list[SignatureStatus] = []
        self.refuse: str | None = None
        self.blockhash_valid = True
        self.accounts_exist = True

    def simulate(self, transaction: bytes) -> Simulation:
        return self.simulation

    def send(self, transaction: bytes) -> str:
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


@pytest.fixture
def payments(chain: FakeChain, clock: FakeClock) -> Payments:
    return Payments({"PERSISTENCE_MODULE": "eventsourcing.popo"}, chains=FakeChains(chain),
                    fee_payers=KeypairFeePayers([FEE_PAYER]), locks=InProcessLocks(),
                    cache=InProcessResultCache(), clock=clock)


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


def test_verify_twice_answers_the_recorded_result_as_a_replay(payments):
    payload, requirements = payment()
    first = payments.verify(CLIENT, payload, requirements)
    second = payments.verify(CLIENT, payload, requirements)
    assert first.is_valid and not first.replayed
    assert second.is_valid and second.replayed
    assert history(payments, payload, requirements) == ["Received", "Approved"]


def test_a_settle_retried_after_confirmation_is_replayed_without_a_second_broadcast(payments, chain):
    payload, requirements = payment()
    first = payments.settle(CLIENT, payload, requirements)
    again = payments.settle(CLIENT, payload, requirements)
    assert again.replayed and again.success and again.transaction == first.transaction
    assert len(chain.sent) == 1


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
    chain.refuse = "Blockhash not found"
    payload, requirements = payment()
    outcome = payments.settle(CLIENT, payload, requirements)
    assert outcome.error_reason == Code.SUBMISSION_FAILED
    assert history(payments, payload, requirements) == ["Received", "Approved", "SettlementSubmitted", "Failed"]
    chain.refuse = None
    assert payments.settle(CLIENT, payload, requirements).replayed


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
    assert payments.verify(CLIENT, payload, requirements).is_valid
