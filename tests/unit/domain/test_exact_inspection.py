"""Inspection of x402 `exact` payment transactions: each rule of docs/architecture.md ("The transaction we
accept"), in order, with its reason code."""

from __future__ import annotations

import base64
import hashlib
import random

import pytest
from solders.address_lookup_table_account import AddressLookupTableAccount
from solders.hash import Hash
from solders.instruction import AccountMeta, CompiledInstruction, Instruction
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.token.associated import get_associated_token_address
from solders.transaction import VersionedTransaction

from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.exact import (
    ExactLimits,
    ExactPayment,
    associated_token_address,
    decode_transaction,
    decode_wire,
    inspect_exact,
    lookup_tables,
    message_bytes,
    message_hash,
    payment_fingerprint,
    signed_message,
    with_fee_payer_signature,
    with_fee_payer_signature_wire,
)
from domain.networks import DEVNET, MAINNET, Programs
from domain.solana_tx import MAX_TRANSACTION_BASE64
from interfaces.sandbox.exact_client import (
    LIGHTHOUSE,
    TOKEN,
    TOKEN_2022,
    build_exact_payment,
    compute_unit_limit_ix,
    compute_unit_price_ix,
    memo_ix,
    sign_as_client,
    to_base64,
    transfer_checked_ix,
)

ASSET = DEVNET.usdc_mint
MINT = Pubkey.from_string(ASSET)
AMOUNT = 10_000
BLOCKHASH = Hash(bytes(range(32)))
FEE_PAYER = Keypair.from_seed(bytes([1]) * 32)
SECOND_SIGNER = Keypair.from_seed(bytes([2]) * 32)
CLIENT = Keypair.from_seed(bytes([3]) * 32)
STRANGER = Keypair.from_seed(bytes([4]) * 32)
MERCHANT = Keypair.from_seed(bytes([5]) * 32).pubkey()
SERVICE = (str(FEE_PAYER.pubkey()), str(SECOND_SIGNER.pubkey()))
PAYER = str(CLIENT.pubkey())


def ata(owner: Pubkey, mint: Pubkey = MINT, program: Pubkey = TOKEN) -> Pubkey:
    return Pubkey.from_string(associated_token_address(str(owner), str(mint), str(program)))


SOURCE, DESTINATION = ata(CLIENT.pubkey()), ata(MERCHANT)


def payment(**overrides) -> VersionedTransaction:
    terms = dict(fee_payer=FEE_PAYER.pubkey(), mint=MINT, pay_to=MERCHANT, amount=AMOUNT, blockhash=BLOCKHASH)
    return build_exact_payment(CLIENT, **(terms | {"memo": b"order-1"} | overrides))


def transfer(**overrides) -> Instruction:
    accounts = dict(
        source=SOURCE, mint=MINT, destination=DESTINATION, authority=CLIENT.pubkey(), amount=AMOUNT
    )
    return transfer_checked_ix(**(accounts | overrides))


def instructions(*trailing: Instruction, transfer_ix: Instruction | None = None) -> list[Instruction]:
    return [compute_unit_limit_ix(20_000), compute_unit_price_ix(1), transfer_ix or transfer(), *trailing]


def signed(ixs: list[Instruction], signers=(CLIENT,), **options) -> VersionedTransaction:
    return sign_as_client(ixs, fee_payer=FEE_PAYER.pubkey(), signers=signers, blockhash=BLOCKHASH, **options)


def inspect(tx: VersionedTransaction, **overrides) -> ExactPayment:
    requirements = dict(asset=ASSET, pay_to=str(MERCHANT), amount=AMOUNT, fee_payers=SERVICE)
    return inspect_exact(tx, **(requirements | overrides))


def assert_rejected(tx, code: Code, payer: str | None = PAYER, **overrides) -> PaymentRuleError:
    with pytest.raises(PaymentRuleError) as rejected:
        inspect(tx, **overrides)
    assert (rejected.value.code, rejected.value.payer) == (code, payer), rejected.value.message
    return rejected.value


def assert_format_rejected(transaction_b64) -> None:
    with pytest.raises(PaymentRuleError) as rejected:
        decode_transaction(transaction_b64)
    assert rejected.value.code is Code.INVALID_TRANSACTION_FORMAT


# Accepted payments


@pytest.mark.parametrize("version", ["v0", "legacy"])
def test_valid_payment_is_accepted_with_its_facts(version):
    tx = decode_transaction(to_base64(payment(version=version)))

    accepted = inspect(tx)

    assert accepted == ExactPayment(
        fee_payer=str(FEE_PAYER.pubkey()),
        payer=PAYER,
        source=str(SOURCE),
        destination=str(DESTINATION),
        mint=ASSET,
        token_program=str(TOKEN),
        amount=AMOUNT,
        decimals=6,
        blockhash=str(BLOCKHASH),
        compute_unit_limit=20_000,
        compute_unit_price=1,
    )


def test_token_2022_transfer_to_the_token_2022_account_is_accepted():
    accepted = inspect(payment(token_program=TOKEN_2022))

    assert accepted.token_program == str(TOKEN_2022)
    assert accepted.destination == str(ata(MERCHANT, program=TOKEN_2022)) != str(DESTINATION)


def test_seven_instructions_with_four_memos_are_accepted():
    assert inspect(signed(instructions(*[memo_ix(b"m")] * 4))).payer == PAYER


def test_lighthouse_instruction_after_the_transfer_is_accepted():
    lighthouse = Instruction(LIGHTHOUSE, b"\x00assert", [])

    assert inspect(signed(instructions(lighthouse, memo_ix(b"m")))).payer == PAYER


def test_fee_payer_slot_may_hold_any_signature():
    tx = payment()
    forged = VersionedTransaction.populate(tx.message, [Signature.new_unique(), *tx.signatures[1:]])

    assert inspect(forged).payer == PAYER


def test_asset_given_on_another_network_is_compared_as_an_address():
    tx = payment(mint=MAINNET.usdc_mint)

    assert inspect(tx, asset=MAINNET.usdc_mint).mint == MAINNET.usdc_mint


# Decoding


@pytest.mark.parametrize("text", ["not base64!", "QUJD=", "QUJDRA==QUJD", "QUJD\nRA==", ""])
def test_bad_base64_is_an_invalid_transaction_format(text):
    assert_format_rejected(text)


def test_non_string_transaction_is_an_invalid_transaction_format():
    assert_format_rejected(None)


def test_valid_base64_of_garbage_bytes_is_an_invalid_transaction_format():
    assert_format_rejected(base64.b64encode(b"\x01" + bytes(range(200))).decode())


def test_transaction_longer_than_a_packet_is_refused_before_decoding():
    assert_format_rejected("A" * (MAX_TRANSACTION_BASE64 + 4))


def test_trailing_bytes_after_the_transaction_are_an_invalid_transaction_format():
    assert_format_rejected(base64.b64encode(bytes(payment()) + b"\x00").decode())


def test_signature_count_disagreeing_with_the_header_is_an_invalid_transaction_format():
    short = VersionedTransaction.populate(payment().message, [Signature.default()])

    assert_format_rejected(to_base64(short))
    assert_rejected(short, Code.INVALID_TRANSACTION_FORMAT, payer=None)


def test_decoding_returns_the_clients_transaction_unchanged():
    tx = payment()

    assert decode_transaction(to_base64(tx)) == tx


# Rule 1: instruction count


def test_two_instructions_break_the_topology():
    tx = signed([compute_unit_limit_ix(20_000), compute_unit_price_ix(1)])

    assert_rejected(tx, Code.INSTRUCTION_TOPOLOGY, payer=None)


def test_eight_instructions_break_the_topology():
    tx = signed(instructions(*[memo_ix(b"m")] * 5))

    assert_rejected(tx, Code.INSTRUCTION_TOPOLOGY, payer=None)


# Rule 2: compute budget


def test_missing_compute_unit_limit_is_reported_as_such():
    tx = signed([compute_unit_price_ix(1), transfer(), memo_ix(b"m")])

    assert_rejected(tx, Code.MISSING_COMPUTE_BUDGET_LIMIT, payer=None)


def test_malformed_compute_unit_limit_counts_as_missing():
    short_limit = Instruction(compute_unit_limit_ix(1).program_id, b"\x02\x00\x01", [])
    tx = signed([short_limit, compute_unit_price_ix(1), transfer()])

    assert_rejected(tx, Code.MISSING_COMPUTE_BUDGET_LIMIT, payer=None)


def test_missing_compute_unit_price_is_reported_as_such():
    tx = signed([compute_unit_limit_ix(20_000), transfer(), memo_ix(b"m")])

    assert_rejected(tx, Code.MISSING_COMPUTE_BUDGET_PRICE, payer=None)


def test_compute_budget_instructions_in_swapped_order_break_the_topology():
    tx = signed([compute_unit_price_ix(1), compute_unit_limit_ix(20_000), transfer()])

    assert_rejected(tx, Code.INSTRUCTION_TOPOLOGY, payer=None)


def test_compute_unit_price_after_the_transfer_breaks_the_topology():
    tx = signed([compute_unit_limit_ix(20_000), transfer(), compute_unit_price_ix(1)])

    assert_rejected(tx, Code.INSTRUCTION_TOPOLOGY, payer=None)


def test_duplicate_compute_unit_limit_breaks_the_topology():
    tx = signed(instructions(compute_unit_limit_ix(20_000)))

    assert_rejected(tx, Code.INSTRUCTION_TOPOLOGY, payer=None)


# Rule 3: the transfer, then only Memo or Lighthouse


def test_memo_before_the_transfer_breaks_the_topology():
    tx = signed([compute_unit_limit_ix(20_000), compute_unit_price_ix(1), memo_ix(b"m"), transfer()])

    assert_rejected(tx, Code.INSTRUCTION_TOPOLOGY, payer=None)


def test_plain_transfer_instead_of_transfer_checked_breaks_the_topology():
    checked = transfer()
    plain = Instruction(TOKEN, b"\x03" + AMOUNT.to_bytes(8, "little"), checked.accounts)

    assert_rejected(signed(instructions(transfer_ix=plain)), Code.INSTRUCTION_TOPOLOGY, payer=None)


def test_transfer_checked_of_an_unknown_program_breaks_the_topology():
    impostor = transfer(token_program=Pubkey.new_unique())

    assert_rejected(signed(instructions(transfer_ix=impostor)), Code.INSTRUCTION_TOPOLOGY, payer=None)


def test_transfer_checked_with_three_accounts_breaks_the_topology():
    checked = transfer()
    truncated = Instruction(TOKEN, checked.data, checked.accounts[:3])

    assert_rejected(signed(instructions(transfer_ix=truncated)), Code.INSTRUCTION_TOPOLOGY, payer=None)


def test_unknown_program_after_the_transfer_breaks_the_topology():
    tx = signed(instructions(Instruction(Pubkey.new_unique(), b"drain", [])))

    assert_rejected(tx, Code.INSTRUCTION_TOPOLOGY)


# Rule 4: priority fee caps


@pytest.mark.parametrize(
    ("units", "price", "accepted"),
    [(400_000, 1, True), (400_001, 1, False), (20_000, 5_000_000, True), (20_000, 5_000_001, False)],
)
def test_compute_unit_limit_and_price_are_capped_inclusively(units, price, accepted):
    tx = payment(compute_unit_limit=units, compute_unit_price=price)

    if accepted:
        assert (inspect(tx).compute_unit_limit, inspect(tx).compute_unit_price) == (units, price)
    else:
        assert_rejected(tx, Code.PRIORITY_FEE_EXCEEDS_LIMIT)


def test_configured_caps_replace_the_defaults():
    limits = ExactLimits(max_compute_unit_limit=10_000, max_compute_unit_price=1)

    assert_rejected(payment(compute_unit_limit=20_000), Code.PRIORITY_FEE_EXCEEDS_LIMIT, limits=limits)


# Rules 5-7: the fee payer


def test_fee_payer_that_is_not_a_service_signer_is_invalid():
    assert_rejected(payment(), Code.INVALID_FEE_PAYER, fee_payers=(str(SECOND_SIGNER.pubkey()),))


def test_transfer_authority_equal_to_the_fee_payer_is_refused():
    own_funds = transfer(source=ata(FEE_PAYER.pubkey()), authority=FEE_PAYER.pubkey())
    tx = signed(instructions(transfer_ix=own_funds), signers=(FEE_PAYER,))

    assert_rejected(tx, Code.FACILITATOR_CANNOT_BE_PAYER, payer=str(FEE_PAYER.pubkey()))


def test_transfer_authority_equal_to_another_service_signer_is_refused():
    tx = signed(
        instructions(transfer_ix=transfer(authority=SECOND_SIGNER.pubkey())), signers=(SECOND_SIGNER,)
    )

    assert_rejected(tx, Code.FACILITATOR_CANNOT_BE_PAYER, payer=str(SECOND_SIGNER.pubkey()))


def test_transfer_from_a_service_signers_token_account_is_refused():
    tx = signed(instructions(transfer_ix=transfer(source=ata(SECOND_SIGNER.pubkey()))))

    assert_rejected(tx, Code.FACILITATOR_CANNOT_BE_PAYER)


def test_fee_payer_as_the_transfer_source_is_invalid():
    tx = signed(instructions(transfer_ix=transfer(source=FEE_PAYER.pubkey())))

    assert_rejected(tx, Code.INVALID_FEE_PAYER)


def test_fee_payer_in_a_lighthouse_instructions_accounts_is_invalid():
    lighthouse = Instruction(LIGHTHOUSE, b"\x00", [AccountMeta(FEE_PAYER.pubkey(), False, False)])

    assert_rejected(signed(instructions(lighthouse)), Code.INVALID_FEE_PAYER)


# Rules 8-10: asset, recipient, amount


def test_wrong_mint_is_an_asset_mismatch():
    assert_rejected(payment(mint=MAINNET.usdc_mint), Code.ASSET_MISMATCH)


def test_destination_owned_by_someone_else_is_a_recipient_mismatch():
    assert_rejected(payment(pay_to=STRANGER.pubkey()), Code.RECIPIENT_MISMATCH)


def test_destination_under_the_other_token_program_is_a_recipient_mismatch():
    wrong_program = transfer(destination=ata(MERCHANT, program=TOKEN_2022))

    assert_rejected(signed(instructions(transfer_ix=wrong_program)), Code.RECIPIENT_MISMATCH)


@pytest.mark.parametrize("amount", [AMOUNT - 1, AMOUNT + 1])
def test_amount_one_unit_off_either_way_is_an_authorization_value_error(amount):
    assert_rejected(payment(amount=amount), Code.AUTHORIZATION_VALUE)


def test_requirements_that_are_not_addresses_are_invalid_requirements():
    assert_rejected(payment(), Code.INVALID_PAYMENT_REQUIREMENTS, payer=None, pay_to="not-an-address")


# Rule 11: the client's signatures


def test_tampered_message_no_longer_verifies():
    raw = bytes(payment())
    tampered = decode_transaction(base64.b64encode(raw.replace(b"order-1", b"order-2")).decode())

    rejection = assert_rejected(tampered, Code.INVALID_PAYLOAD)
    assert "payer's signature does not verify" in rejection.message


def test_unsigned_client_slot_does_not_verify():
    assert_rejected(signed(instructions(), signers=()), Code.INVALID_PAYLOAD)


def test_authority_that_is_not_a_signer_is_an_invalid_payload():
    checked = transfer()
    unsigned = [AccountMeta(meta.pubkey, False, meta.is_writable) for meta in checked.accounts]
    tx = signed(instructions(transfer_ix=Instruction(TOKEN, checked.data, unsigned)))

    rejection = assert_rejected(tx, Code.INVALID_PAYLOAD)
    assert "not a signer" in rejection.message


def test_another_required_signer_without_a_signature_is_an_invalid_payload():
    cosigned_memo = Instruction(memo_ix(b"m").program_id, b"m", [AccountMeta(STRANGER.pubkey(), True, False)])

    assert_rejected(signed(instructions(cosigned_memo)), Code.INVALID_PAYLOAD)


# Address lookup tables


def table(*addresses: Pubkey) -> AddressLookupTableAccount:
    return AddressLookupTableAccount(key=Pubkey.new_unique(), addresses=list(addresses))


def contents(*tables: AddressLookupTableAccount) -> dict[str, list[str]]:
    return {str(t.key): [str(address) for address in t.addresses] for t in tables}


def test_lookup_addresses_resolve_writable_in_table_order_then_readonly():
    writable_a, readonly_b = Pubkey.new_unique(), Pubkey.new_unique()
    first, second = table(MINT, writable_a), table(DESTINATION, readonly_b)
    lighthouse = Instruction(
        LIGHTHOUSE, b"\x00", [AccountMeta(writable_a, False, True), AccountMeta(readonly_b, False, False)]
    )
    tx = signed(instructions(lighthouse), lookup_tables=[first, second])

    accepted = inspect(tx, loaded=contents(first, second))

    assert lookup_tables(tx) == (str(first.key), str(second.key))
    assert (accepted.mint, accepted.destination) == (ASSET, str(DESTINATION))


def test_lookup_table_missing_from_loaded_is_an_invalid_payload():
    tx = signed(instructions(), lookup_tables=[table(DESTINATION)])

    assert_rejected(tx, Code.INVALID_PAYLOAD, payer=None)


def test_lookup_index_beyond_the_loaded_table_is_an_invalid_payload():
    compiled = table(MINT, DESTINATION)
    tx = signed(instructions(), lookup_tables=[compiled])
    shortened = {str(compiled.key): [str(MINT)]}

    assert_rejected(tx, Code.INVALID_PAYLOAD, payer=None, loaded=shortened)


def test_fee_payer_loaded_through_a_lookup_table_is_an_invalid_fee_payer():
    # The table on chain, not the one the client compiled against, decides what the index means.
    placeholder = Pubkey.new_unique()
    compiled = table(placeholder)
    lighthouse = Instruction(LIGHTHOUSE, b"\x00", [AccountMeta(placeholder, False, False)])
    tx = signed(instructions(lighthouse), lookup_tables=[compiled])

    assert_rejected(tx, Code.INVALID_FEE_PAYER, loaded={str(compiled.key): [str(FEE_PAYER.pubkey())]})


def test_legacy_message_references_no_lookup_tables():
    assert lookup_tables(payment(version="legacy")) == ()


# Signing helpers


def test_message_bytes_carry_the_version_prefix_only_for_v0():
    v0, legacy = payment(), payment(version="legacy")

    assert message_bytes(v0) == b"\x80" + bytes(v0.message)
    assert message_bytes(legacy) == bytes(legacy.message)


def test_payment_fingerprint_is_the_clients_signature():
    tx = payment()

    assert payment_fingerprint(tx) == str(tx.signatures[1]) != str(Signature.default())


def test_payment_fingerprint_falls_back_to_the_fee_payer_signature_then_the_message_hash():
    unsigned = signed(instructions(), signers=())
    fee_payer_signed = VersionedTransaction.populate(
        unsigned.message, [FEE_PAYER.sign_message(message_bytes(unsigned)), Signature.default()]
    )

    assert payment_fingerprint(fee_payer_signed) == str(fee_payer_signed.signatures[0])
    assert payment_fingerprint(unsigned) == hashlib.sha256(message_bytes(unsigned)).hexdigest()


def test_two_payments_of_the_same_amount_have_different_fingerprints():
    first, second = payment(memo=None), payment(memo=None)

    assert payment_fingerprint(first) != payment_fingerprint(second)


def test_with_fee_payer_signature_completes_a_transaction_that_verifies():
    tx = payment()
    signature = FEE_PAYER.sign_message(message_bytes(tx))

    completed = VersionedTransaction.from_bytes(with_fee_payer_signature(tx, bytes(signature)))

    assert completed.signatures == [signature, tx.signatures[1]]
    assert completed.message == tx.message
    assert completed.verify_with_results() == [True, True]


def test_with_fee_payer_signature_refuses_a_signature_of_the_wrong_size():
    with pytest.raises(ValueError):
        with_fee_payer_signature(payment(), b"\x01" * 63)


@pytest.mark.parametrize("version", ["v0", "legacy"])
def test_the_wire_bytes_give_the_message_and_the_co_signed_transaction_without_encoding_again(version):
    """What a verify uses instead of encoding the transaction again: the message is the wire's tail after the
    signatures, and co-signing replaces the fee payer's 64 bytes in place, exactly as decoding and encoding would."""
    tx, wire = decode_wire(to_base64(payment(version=version)))
    signature = bytes(FEE_PAYER.sign_message(message_bytes(tx)))

    assert wire == bytes(tx) and decode_transaction(to_base64(tx)) == tx
    assert signed_message(wire) == message_bytes(tx)
    assert message_hash(tx, signed_message(wire)) == message_hash(tx)
    assert with_fee_payer_signature_wire(wire, signature) == with_fee_payer_signature(tx, signature)
    with pytest.raises(ValueError):
        with_fee_payer_signature_wire(wire, signature[:63])
    with pytest.raises(ValueError):
        with_fee_payer_signature_wire(b"\x00" + wire[65:], signature)  # no signature slot
    three = signed(instructions(), signers=(CLIENT, SECOND_SIGNER))  # a third required signer (rule 11a's case)
    assert signed_message(bytes(three)) == message_bytes(three)


def test_inspection_checks_the_client_signature_over_the_message_it_is_given():
    tx = payment()
    other = payment(memo=b"order-2")

    assert inspect(tx, message=message_bytes(tx)).payer == PAYER
    with pytest.raises(PaymentRuleError) as rejected:
        inspect(tx, message=message_bytes(other))
    assert rejected.value.code == Code.INVALID_PAYLOAD and "payer's signature does not verify" in str(rejected.value)


def test_the_associated_token_address_is_derived_once_per_owner_mint_and_program():
    owner, program = Keypair().pubkey(), str(TOKEN)
    first = associated_token_address(str(owner), ASSET, program)
    hits = associated_token_address.cache_info().hits

    assert associated_token_address(str(owner), ASSET, program) == first
    assert associated_token_address.cache_info().hits == hits + 1
    assert first == str(get_associated_token_address(owner, MINT, TOKEN))
    assert associated_token_address.cache_info().maxsize == 4096  # bounded


def test_associated_token_address_matches_the_x402_sdk():
    derive_ata = pytest.importorskip("x402.mechanisms.svm.utils").derive_ata

    for program in (TOKEN, TOKEN_2022):
        ours = associated_token_address(str(MERCHANT), ASSET, str(program))
        assert ours == derive_ata(str(MERCHANT), ASSET, str(program))


# Robustness


def test_mutated_transactions_are_only_ever_rejected_with_a_code():
    looked_up = table(DESTINATION)
    originals = [bytes(payment()), bytes(signed(instructions(memo_ix(b"m")), lookup_tables=[looked_up]))]
    rng = random.Random(402)
    for _ in range(400):
        raw = bytearray(rng.choice(originals))
        for _ in range(rng.randint(1, 3)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        try:
            inspect(decode_transaction(base64.b64encode(raw).decode()), loaded=contents(looked_up))
        except PaymentRuleError as rejected:
            assert isinstance(rejected.code, Code)


def test_out_of_range_index_given_directly_is_an_invalid_transaction_format():
    message = payment().message
    assert isinstance(message, MessageV0)
    stray = CompiledInstruction(program_id_index=200, accounts=bytes([201]), data=b"")
    broken = MessageV0(message.header, message.account_keys, message.recent_blockhash, [stray] * 3, [])

    assert_rejected(
        VersionedTransaction.populate(broken, payment().signatures), Code.INVALID_TRANSACTION_FORMAT, None
    )


# x402 v2 SVM `exact`: extra.memo, and the signatures the fee payer pays for


def test_the_one_memo_equal_to_extra_memo_is_accepted():
    assert inspect(payment(memo=b"invoice-42"), memo="invoice-42").payer == PAYER


def test_a_memo_other_than_extra_memo_is_a_memo_mismatch():
    assert_rejected(payment(memo=b"invoice-43"), Code.MEMO_MISMATCH, memo="invoice-42")


@pytest.mark.parametrize("memos", [0, 2])
def test_extra_memo_needs_exactly_one_memo_instruction(memos):
    tx = signed(instructions(*[memo_ix(b"invoice-42")] * memos))
    assert_rejected(tx, Code.MEMO_COUNT, memo="invoice-42")


def test_a_transaction_needing_a_third_signature_is_refused():
    cosigned_memo = Instruction(Pubkey.from_string(Programs.MEMO), b"x",
                                [AccountMeta(STRANGER.pubkey(), is_signer=True, is_writable=False)])
    tx = signed(instructions(cosigned_memo), signers=(CLIENT, STRANGER))
    rejected = assert_rejected(tx, Code.INVALID_PAYLOAD)
    assert str(STRANGER.pubkey()) in rejected.message
