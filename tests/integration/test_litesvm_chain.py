"""The in-process chain over the sandbox: real SPL programs, a cluster's blockhash lifetime, no replays."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from solders.address_lookup_table_account import AddressLookupTableAccount
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import MessageV0, to_bytes_versioned
from solders.pubkey import Pubkey
from solders.token.associated import get_associated_token_address
from solders.transaction import VersionedTransaction

from application.ports import Confirmation, SubmissionError
from domain.networks import USDC_DECIMALS, Programs
from interfaces.adapters.chain.litesvm import LiteSvmChain
from interfaces.sandbox.chain import LAMPORTS_PER_SIGNATURE, Sandbox

USDC = 10**USDC_DECIMALS


@dataclass
class Wallets:
    fee_payer: Keypair
    payer: Keypair
    merchant: Keypair


def transfer_checked(
    sandbox: Sandbox,
    fee_payer: Keypair,
    owner: Keypair,
    to: Pubkey,
    amount: int,
    *,
    blockhash: str | None = None,
    mint: str | None = None,
    token_program: str = Programs.TOKEN,
    decimals: int = USDC_DECIMALS,
    lookup_tables: list[AddressLookupTableAccount] | None = None,
) -> VersionedTransaction:
    """An SPL TransferChecked from `owner`'s associated token account to `to`'s, signed by both."""
    mint_key, program = Pubkey.from_string(mint or sandbox.usdc_mint), Pubkey.from_string(token_program)
    source = get_associated_token_address(owner.pubkey(), mint_key, program)
    destination = get_associated_token_address(to, mint_key, program)
    instruction = Instruction(
        program,
        bytes([12]) + amount.to_bytes(8, "little") + bytes([decimals]),
        [
            AccountMeta(source, False, True),
            AccountMeta(mint_key, False, False),
            AccountMeta(destination, False, True),
            AccountMeta(owner.pubkey(), True, False),
        ],
    )
    recent = Hash.from_string(blockhash or sandbox.latest_blockhash()[0])
    message = MessageV0.try_compile(fee_payer.pubkey(), [instruction], lookup_tables or [], recent)
    return VersionedTransaction(message, [fee_payer, owner] if fee_payer != owner else [owner])


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox()


@pytest.fixture
def chain(sandbox: Sandbox) -> LiteSvmChain:
    return LiteSvmChain(sandbox)


@pytest.fixture
def wallets(sandbox: Sandbox) -> Wallets:
    wallets = Wallets(Keypair(), Keypair(), Keypair())
    sandbox.airdrop(str(wallets.fee_payer.pubkey()), 10**9)
    sandbox.mint_usdc(str(wallets.payer.pubkey()), 5 * USDC)
    sandbox.mint_usdc(str(wallets.merchant.pubkey()), 0)
    return wallets


def pay(sandbox: Sandbox, wallets: Wallets, amount: int, **options) -> VersionedTransaction:
    merchant = wallets.merchant.pubkey()
    return transfer_checked(sandbox, wallets.fee_payer, wallets.payer, merchant, amount, **options)


def balances(sandbox: Sandbox, wallets: Wallets) -> tuple[int, int, int]:
    return (
        sandbox.token_balance(str(wallets.payer.pubkey())),
        sandbox.token_balance(str(wallets.merchant.pubkey())),
        sandbox.sol_balance(str(wallets.fee_payer.pubkey())),
    )


def test_simulating_a_funded_transfer_checked_succeeds_with_the_token_program_logs(sandbox, chain, wallets):
    simulation = chain.simulate(bytes(pay(sandbox, wallets, USDC)))

    assert simulation.ok and simulation.error == "" and simulation.error_code == ""
    assert "Program log: Instruction: TransferChecked" in simulation.logs
    assert simulation.logs[-1] == f"Program {Programs.TOKEN} success"
    assert balances(sandbox, wallets)[:2] == (5 * USDC, 0)  # a simulation moves nothing


def test_simulating_a_transfer_the_payer_cannot_fund_fails_with_the_program_logs(sandbox, chain, wallets):
    simulation = chain.simulate(bytes(pay(sandbox, wallets, 6 * USDC)))

    assert not simulation.ok
    assert simulation.error_code == "InstructionError"
    assert simulation.error == "Error processing Instruction 0: custom program error: 0x1"
    assert "Program log: Error: insufficient funds" in simulation.logs
    assert simulation.logs[-1] == f"Program {Programs.TOKEN} failed: custom program error: 0x1"


def test_simulating_with_a_fee_payer_without_sol_fails_before_execution(sandbox, chain, wallets):
    unknown = transfer_checked(sandbox, Keypair(), wallets.payer, wallets.merchant.pubkey(), USDC)
    poor = Keypair()
    sandbox.airdrop(str(poor.pubkey()), LAMPORTS_PER_SIGNATURE)  # short of a two-signature fee
    short = transfer_checked(sandbox, poor, wallets.payer, wallets.merchant.pubkey(), USDC)

    assert chain.simulate(bytes(unknown)).error_code == "AccountNotFound"
    assert chain.simulate(bytes(unknown)).error.startswith("Attempt to debit an account")
    assert chain.simulate(bytes(short)).error_code == "InsufficientFundsForFee"


def test_a_signature_that_does_not_verify_fails_simulation_and_is_refused(sandbox, chain, wallets):
    tx = pay(sandbox, wallets, USDC)
    forged = VersionedTransaction.populate(tx.message, [tx.signatures[0], Keypair().sign_message(b"other")])

    simulation = chain.simulate(bytes(forged))
    assert (simulation.ok, simulation.error_code) == (False, "SignatureFailure")
    with pytest.raises(SubmissionError, match="signature verification failure"):
        chain.send(bytes(forged))
    assert balances(sandbox, wallets)[:2] == (5 * USDC, 0)


def test_the_sandboxs_default_simulation_still_verifies_every_signature(sandbox, wallets):
    """`Sandbox.simulate(tx)` with its defaults is what the reference facilitator of `paywarden-bench reference` calls:
    its work (every signature checked, the post-simulation accounts) is unchanged by Paywarden's cheaper options."""
    tx = pay(sandbox, wallets, USDC)
    forged = VersionedTransaction.populate(tx.message, [tx.signatures[0], Keypair().sign_message(b"other")])

    assert sandbox.simulate(forged).err == "SignatureFailure"
    full, lean = sandbox.simulate(tx), sandbox.simulate(tx, accounts=False)
    assert full.ok and str(wallets.fee_payer.pubkey()) in full.accounts and lean.accounts == {}
    assert (lean.err, lean.logs, lean.units_consumed) == (full.err, full.logs, full.units_consumed)


def test_with_signatures_verified_the_simulation_skips_only_the_signature_checks(sandbox, chain, wallets):
    """`signatures_verified` is the caller's word that it checked the signatures: the in-process simulation then
    trusts them (a forged one passes, so only a caller that verified may say so) and checks all the rest."""
    tx = pay(sandbox, wallets, USDC)
    forged = VersionedTransaction.populate(tx.message, [tx.signatures[0], Keypair().sign_message(b"other")])
    unfunded = pay(sandbox, wallets, 6 * USDC)

    assert chain.simulate(bytes(forged), signatures_verified=True).ok
    assert chain.simulate(bytes(forged)).error_code == "SignatureFailure"
    assert chain.simulate(bytes(unfunded), signatures_verified=True).error_code == "InstructionError"
    with pytest.raises(SubmissionError, match="signature verification failure"):
        chain.send(bytes(forged))  # a broadcast verifies unless its caller says it did
    chain.send(bytes(tx))
    assert chain.simulate(bytes(tx), signatures_verified=True).error_code == "AlreadyProcessed"
    old = pay(sandbox, wallets, USDC - 1)
    sandbox.advance(145)
    assert chain.simulate(bytes(old), signatures_verified=True).error_code == "BlockhashNotFound"


def test_with_signatures_verified_a_send_skips_only_the_signature_checks(sandbox, chain, wallets):
    """A settle's broadcast (its client's signature verified by the exact inspection, the fee payer's made by
    Paywarden) skips the signature checks of the preflight and the execution, and nothing else: a payer short of
    funds, a second landing and an expired blockhash are still refused before anything lands."""
    tx = pay(sandbox, wallets, USDC)
    unfunded = pay(sandbox, wallets, 6 * USDC)
    forged = VersionedTransaction.populate(unfunded.message, [unfunded.signatures[0],
                                                              Keypair().sign_message(b"other")])
    before = balances(sandbox, wallets)

    for refused in (unfunded, forged):  # the forged signature passes; the preflight still refuses the amount
        with pytest.raises(SubmissionError, match="custom program error|insufficient"):
            chain.send(bytes(refused), signatures_verified=True)
    assert balances(sandbox, wallets) == before and sandbox.transaction(str(unfunded.signatures[0])) is None
    assert chain.send(bytes(tx), signatures_verified=True) == str(tx.signatures[0])
    assert balances(sandbox, wallets)[:2] == (before[0] - USDC, before[1] + USDC)
    with pytest.raises(SubmissionError, match="already been processed"):
        chain.send(bytes(tx), signatures_verified=True)
    old = pay(sandbox, wallets, USDC - 1)
    sandbox.advance(160)
    with pytest.raises(SubmissionError, match="[Bb]lockhash not found"):
        chain.send(bytes(old), signatures_verified=True)


def test_litesvm_checks_nothing_but_signatures_with_its_verification(sandbox, wallets):
    """The sandbox runs LiteSVM with its own verification off (`_precheck` has checked the signatures): that loses
    no other check. With valid signatures, transactions that a node refuses for their accounts (one listed twice,
    more than a transaction may lock) or their funds get the same outcome with LiteSVM's verification on as off.
    Pins the LiteSVM that solders ships: an upgrade that checks more when verifying fails here."""
    def variant(keys, transfer=None):
        m = pay(sandbox, wallets, transfer or USDC).message
        message = MessageV0(m.header, keys(list(m.account_keys)), m.recent_blockhash, list(m.instructions), [])
        signed = to_bytes_versioned(message)
        return VersionedTransaction.populate(
            message, [wallets.fee_payer.sign_message(signed), wallets.payer.sign_message(signed)])

    cases = [
        variant(lambda keys: keys),
        variant(lambda keys: keys, 6 * USDC),
        variant(lambda keys: [*keys, keys[-1]]),
        variant(lambda keys: [*keys, *(Pubkey.new_unique() for _ in range(130))]),
        transfer_checked(sandbox, Keypair(), wallets.payer, wallets.merchant.pubkey(), USDC),
    ]
    for tx in cases:
        trusted = sandbox.simulate(tx)
        sandbox._svm.with_sigverify(True)  # LiteSVM's own verification, as the sandbox ran it before
        try:
            verified = sandbox.simulate(tx)
        finally:
            sandbox._svm.with_sigverify(False)
        assert (trusted.err, trusted.logs, trusted.units_consumed) == (verified.err, verified.logs,
                                                                      verified.units_consumed)


def test_a_send_without_preflight_still_checks_signatures_and_refuses_a_replay(sandbox, wallets):
    """The localnet's `skipPreflight` path: with LiteSVM's own verification (and its status cache) off, the
    sandbox's check is the only one, and it refuses a forged signature and a second landing of one transaction."""
    tx = pay(sandbox, wallets, USDC)
    forged = VersionedTransaction.populate(tx.message, [tx.signatures[0], Keypair().sign_message(b"other")])
    before = balances(sandbox, wallets)

    assert sandbox.send(forged, preflight=False).err == "SignatureFailure"
    assert balances(sandbox, wallets) == before
    assert sandbox.send(tx, preflight=False).ok
    assert sandbox.send(tx, preflight=False).err == "AlreadyProcessed"
    assert balances(sandbox, wallets)[:2] == (before[0] - USDC, before[1] + USDC)


def test_sending_moves_exactly_the_amount_and_charges_the_signature_fee(sandbox, chain, wallets):
    payer_before, merchant_before, sol_before = balances(sandbox, wallets)
    tx = pay(sandbox, wallets, 1_234_567)

    signature = chain.send(bytes(tx))

    assert signature == str(tx.signatures[0])
    assert balances(sandbox, wallets) == (
        payer_before - 1_234_567,
        merchant_before + 1_234_567,
        sol_before - 2 * LAMPORTS_PER_SIGNATURE,
    )
    assert chain.signature_status(signature).confirmation is Confirmation.CONFIRMED
    landed = sandbox.transaction(signature)
    assert landed.fee == 2 * LAMPORTS_PER_SIGNATURE and landed.err is None


def test_a_second_send_of_the_same_transaction_is_refused_and_nothing_moves_twice(sandbox, chain, wallets):
    tx = bytes(pay(sandbox, wallets, USDC))
    chain.send(tx)
    after_first = balances(sandbox, wallets)

    with pytest.raises(SubmissionError, match="This transaction has already been processed"):
        chain.send(tx)
    sandbox.advance(10)
    with pytest.raises(SubmissionError, match="already been processed"):
        chain.send(tx)

    assert balances(sandbox, wallets) == after_first
    assert chain.simulate(tx).error_code == "AlreadyProcessed"


def test_unknown_signature_is_unknown(chain):
    never_sent = str(Keypair().sign_message(b"never sent"))
    assert chain.signature_status(never_sent).confirmation is Confirmation.UNKNOWN
    assert chain.signature_status("not base58 at all").confirmation is Confirmation.UNKNOWN


def test_a_transaction_that_failed_on_chain_is_failed_with_its_fee_paid(sandbox, chain, wallets):
    # Only a broadcast that skips preflight (the localnet's skipPreflight) can land a failing transaction.
    tx = pay(sandbox, wallets, 6 * USDC)
    before = balances(sandbox, wallets)

    outcome = sandbox.send(tx, preflight=False)

    assert outcome.landed and outcome.err == {"InstructionError": [0, {"Custom": 1}]}
    status = chain.signature_status(outcome.signature)
    assert status.confirmation is Confirmation.FAILED
    assert status.error == "Error processing Instruction 0: custom program error: 0x1"
    assert balances(sandbox, wallets) == (before[0], before[1], before[2] - 2 * LAMPORTS_PER_SIGNATURE)


def test_a_blockhash_expires_after_150_slots_and_preflight_allows_144(sandbox, chain, wallets):
    blockhash, last_valid_height = sandbox.latest_blockhash()
    assert last_valid_height == sandbox.slot + 150

    old = bytes(pay(sandbox, wallets, 1, blockhash=blockhash))
    sandbox.advance(144)
    assert chain.simulate(old).ok
    sandbox.advance(1)
    assert chain.simulate(old).error_code == "BlockhashNotFound"
    assert chain.is_blockhash_valid(blockhash)  # still valid for a leader; too old to forward
    sandbox.advance(5)
    assert chain.is_blockhash_valid(blockhash)
    sandbox.advance(1)
    assert not chain.is_blockhash_valid(blockhash)


def test_an_expired_blockhash_is_refused_and_nothing_moves(sandbox, chain, wallets):
    tx = pay(sandbox, wallets, USDC)
    sandbox.advance(151)

    simulation = chain.simulate(bytes(tx))
    assert (simulation.error_code, simulation.error) == ("BlockhashNotFound", "Blockhash not found")
    with pytest.raises(SubmissionError, match="Transaction simulation failed: Blockhash not found"):
        chain.send(bytes(tx))
    assert sandbox.send(tx, preflight=False).err == "BlockhashNotFound"  # a leader drops it too
    assert balances(sandbox, wallets)[:2] == (5 * USDC, 0)
    assert chain.signature_status(str(tx.signatures[0])).confirmation is Confirmation.UNKNOWN


def test_a_blockhash_the_chain_never_produced_is_not_found(sandbox, chain, wallets):
    made_up = str(Hash.new_unique())
    assert not chain.is_blockhash_valid(made_up)
    simulation = chain.simulate(bytes(pay(sandbox, wallets, 1, blockhash=made_up)))
    assert simulation.error_code == "BlockhashNotFound"


def test_accounts_exist_once_funded(sandbox, chain, wallets):
    merchant_ata = get_associated_token_address(
        wallets.merchant.pubkey(), Pubkey.from_string(sandbox.usdc_mint), Pubkey.from_string(Programs.TOKEN)
    )
    assert chain.account_exists(sandbox.usdc_mint)
    assert chain.account_exists(str(merchant_ata))
    assert not chain.account_exists(str(Keypair().pubkey()))
    assert not chain.account_exists("not an address")


def test_lookup_table_addresses_are_read_in_order_and_resolve_in_a_v0_transaction(sandbox, chain, wallets):
    mint, program = Pubkey.from_string(sandbox.usdc_mint), Pubkey.from_string(Programs.TOKEN)
    destination = get_associated_token_address(wallets.merchant.pubkey(), mint, program)
    entries = [str(Keypair().pubkey()), str(destination), str(mint)]
    table = sandbox.create_lookup_table(entries)

    assert list(chain.lookup_table_addresses(table)) == entries
    assert list(chain.lookup_table_addresses(sandbox.usdc_mint)) == []  # not a lookup table
    assert list(chain.lookup_table_addresses(str(Keypair().pubkey()))) == []

    lookup = AddressLookupTableAccount(Pubkey.from_string(table), [Pubkey.from_string(e) for e in entries])
    tx = pay(sandbox, wallets, 250_000, lookup_tables=[lookup])
    assert tx.message.address_table_lookups  # the destination and the mint come from the table
    signature = chain.send(bytes(tx))

    assert sandbox.token_balance(str(wallets.merchant.pubkey())) == 250_000
    writable, readonly = sandbox.transaction(signature).loaded_addresses
    assert (writable, readonly) == ((str(destination),), (str(mint),))


def test_token_2022_mints_and_transfers_through_the_real_program(sandbox, chain, wallets):
    mint = str(Keypair().pubkey())
    sandbox.create_mint(mint, 6, Programs.TOKEN_2022)
    sandbox.mint_tokens(mint, str(wallets.payer.pubkey()), 3 * USDC)
    sandbox.mint_tokens(mint, str(wallets.merchant.pubkey()), 0)

    tx = pay(sandbox, wallets, USDC, mint=mint, token_program=Programs.TOKEN_2022)
    chain.send(bytes(tx))

    assert sandbox.token_balance(str(wallets.merchant.pubkey()), mint) == USDC
    assert sandbox.token_balance(str(wallets.payer.pubkey()), mint) == 2 * USDC


def test_concurrent_senders_each_land_once(sandbox, chain, wallets):
    transactions = [bytes(pay(sandbox, wallets, 1000 + i)) for i in range(16)]
    errors: list[Exception] = []

    def send(tx: bytes) -> None:
        for _ in range(2):  # every transaction is sent twice, concurrently with the others
            try:
                chain.send(tx)
            except SubmissionError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=send, args=(tx,)) for tx in transactions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(errors) == 16 and all("already been processed" in str(e) for e in errors)
    assert sandbox.token_balance(str(wallets.merchant.pubkey())) == sum(1000 + i for i in range(16))
