"""The x402 `exact` scheme on Solana: the rules a client's partially-signed payment transaction must meet.

`inspect_exact` checks the rules of docs/architecture.md ("The transaction we accept") in a fixed order and
returns the facts of an accepted transaction, or raises `PaymentRuleError` naming the first rule broken.
Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from solders.message import Message, MessageV0
from solders.transaction import VersionedTransaction

from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.networks import Programs
from domain.solana_tx import (
    ResolvedInstruction,
    associated_token_address,
    decode_transaction,
    decode_wire,
    ensure_well_formed,
    lookup_tables,
    message_bytes,
    message_hash,
    parse_address,
    payment_fingerprint,
    resolve_accounts,
    resolve_instructions,
    signed_message,
    with_fee_payer_signature,
    with_fee_payer_signature_wire,
)

__all__ = [
    "ExactLimits",
    "ExactPayment",
    "associated_token_address",
    "decode_transaction",
    "decode_wire",
    "inspect_exact",
    "lookup_tables",
    "message_bytes",
    "message_hash",
    "payment_fingerprint",
    "signed_message",
    "with_fee_payer_signature",
    "with_fee_payer_signature_wire",
]

MIN_INSTRUCTIONS, MAX_INSTRUCTIONS = 3, 7
SET_COMPUTE_UNIT_LIMIT, SET_COMPUTE_UNIT_PRICE, TRANSFER_CHECKED = 2, 3, 12


@dataclass(frozen=True)
class ExactLimits:
    """The configured caps on the priority fee a client may make the service pay."""

    max_compute_unit_limit: int = 400_000
    max_compute_unit_price: int = 5_000_000  # micro-lamports per compute unit


@dataclass(frozen=True)
class ExactPayment:
    """The facts of an accepted `exact` transaction."""

    fee_payer: str
    payer: str
    source: str
    destination: str
    mint: str
    token_program: str
    amount: int
    decimals: int
    blockhash: str
    compute_unit_limit: int
    compute_unit_price: int


@dataclass(frozen=True)
class _Transfer:
    token_program: str
    source: str
    mint: str
    destination: str
    authority: str
    amount: int
    decimals: int


DEFAULT_LIMITS = ExactLimits()
_NO_TABLES: Mapping[str, Sequence[str]] = MappingProxyType({})


def inspect_exact(
    tx: VersionedTransaction,
    *,
    asset: str,
    pay_to: str,
    amount: int,
    fee_payers: Collection[str],
    limits: ExactLimits = DEFAULT_LIMITS,
    loaded: Mapping[str, Sequence[str]] = _NO_TABLES,
    memo: str | None = None,
    message: bytes | None = None,
) -> ExactPayment:
    """Check `tx` against the payment requirements; `loaded` maps each lookup table to its addresses, `memo` is
    the requirements' `extra.memo` when they carry one, `message` the transaction's message bytes when the caller
    has them (`signed_message` of its wire bytes; else they are encoded again)."""
    asset = parse_address(asset, Code.INVALID_PAYMENT_REQUIREMENTS, "asset")
    pay_to = parse_address(pay_to, Code.INVALID_PAYMENT_REQUIREMENTS, "payTo")
    ensure_well_formed(tx)
    tx_message = tx.message  # solders copies the message at every `tx.message`: it is read once
    accounts = resolve_accounts(tx_message, loaded)  # the static keys first: the signers, the fee payer first
    instructions = resolve_instructions(tx_message, accounts)

    _check_count(instructions)
    units, price = _compute_budget(instructions)
    transfer = _transfer(instructions[2])
    payer = transfer.authority
    _check_trailing(instructions[3:], payer)
    _check_memo(instructions[3:], memo, payer)
    _check_priority_fee(units, price, limits, payer)
    fee_payer = accounts[0]
    _check_fee_payer(fee_payer, fee_payers, transfer, instructions)
    _check_terms(transfer, asset=asset, pay_to=pay_to, amount=amount)
    required = tx_message.header.num_required_signatures
    _check_signers(accounts[:required], fee_payer, payer)
    _check_client_signatures(tx, tx_message, required, payer, message)
    return ExactPayment(
        fee_payer=fee_payer,
        payer=payer,
        source=transfer.source,
        destination=transfer.destination,
        mint=transfer.mint,
        token_program=transfer.token_program,
        amount=transfer.amount,
        decimals=transfer.decimals,
        blockhash=str(tx_message.recent_blockhash),
        compute_unit_limit=units,
        compute_unit_price=price,
    )


def _check_count(instructions: Sequence[ResolvedInstruction]) -> None:
    """Rule 1: 3 to 7 instructions."""
    if not MIN_INSTRUCTIONS <= len(instructions) <= MAX_INSTRUCTIONS:
        raise _topology(
            f"{len(instructions)} instructions; expected {MIN_INSTRUCTIONS} to {MAX_INSTRUCTIONS}"
        )


def _compute_budget(instructions: Sequence[ResolvedInstruction]) -> tuple[int, int]:
    """Rule 2: SetComputeUnitLimit at index 0 and SetComputeUnitPrice at index 1, once each."""
    limits = [i for i, ix in enumerate(instructions) if _is_compute_budget(ix, SET_COMPUTE_UNIT_LIMIT, 5)]
    prices = [i for i, ix in enumerate(instructions) if _is_compute_budget(ix, SET_COMPUTE_UNIT_PRICE, 9)]
    if not limits:
        raise PaymentRuleError(
            Code.MISSING_COMPUTE_BUDGET_LIMIT,
            "no SetComputeUnitLimit instruction (compute budget, 5 data bytes)",
        )
    if not prices:
        raise PaymentRuleError(
            Code.MISSING_COMPUTE_BUDGET_PRICE,
            "no SetComputeUnitPrice instruction (compute budget, 9 data bytes)",
        )
    if limits != [0]:
        raise _topology(f"SetComputeUnitLimit at index {_indexes(limits)}; expected once, at index 0")
    if prices != [1]:
        raise _topology(f"SetComputeUnitPrice at index {_indexes(prices)}; expected once, at index 1")
    return _le(instructions[0].data[1:5]), _le(instructions[1].data[1:9])


def _transfer(ix: ResolvedInstruction) -> _Transfer:
    """Rule 3: instruction 2 is TransferChecked of SPL Token or Token-2022 (extra accounts: multisig)."""
    if not (
        ix.program in Programs.TOKEN_PROGRAMS
        and len(ix.data) == 10
        and ix.data[0] == TRANSFER_CHECKED
        and len(ix.accounts) >= 4
    ):
        raise _topology(
            f"instruction 2 is program {ix.program} with {len(ix.data)} data bytes and {len(ix.accounts)} "
            "accounts; expected TransferChecked (Token or Token-2022, 10 data bytes, at least 4 accounts)"
        )
    source, mint, destination, authority = ix.accounts[:4]
    return _Transfer(ix.program, source, mint, destination, authority, _le(ix.data[1:9]), ix.data[9])


def _check_trailing(trailing: Sequence[ResolvedInstruction], payer: str) -> None:
    """Rule 3: after the transfer, only Memo or Lighthouse instructions."""
    for index, ix in enumerate(trailing, start=3):
        if ix.program not in Programs.TRAILING:
            raise _topology(
                f"instruction {index} is program {ix.program}; expected Memo or Lighthouse", payer
            )


def _check_memo(trailing: Sequence[ResolvedInstruction], memo: str | None, payer: str) -> None:
    """Rule 3b: with `extra.memo` in the requirements, exactly one Memo instruction, carrying exactly it."""
    if memo is None:
        return
    memos = [ix for ix in trailing if ix.program == Programs.MEMO]
    if len(memos) != 1:
        raise PaymentRuleError(
            Code.MEMO_COUNT, f"{len(memos)} Memo instructions; the requirements' extra.memo needs exactly one",
            payer=payer,
        )
    if memos[0].data != memo.encode():
        raise PaymentRuleError(Code.MEMO_MISMATCH, "the Memo instruction's data differs from extra.memo", payer=payer)


def _check_priority_fee(units: int, price: int, limits: ExactLimits, payer: str) -> None:
    """Rule 4: the compute-unit limit and price stay within the configured caps."""
    if units > limits.max_compute_unit_limit:
        raise PaymentRuleError(
            Code.PRIORITY_FEE_EXCEEDS_LIMIT,
            f"compute unit limit {units} exceeds the cap of {limits.max_compute_unit_limit}",
            payer=payer,
        )
    if price > limits.max_compute_unit_price:
        raise PaymentRuleError(
            Code.PRIORITY_FEE_EXCEEDS_LIMIT,
            f"compute unit price {price} micro-lamports exceeds the cap of {limits.max_compute_unit_price}",
            payer=payer,
        )


def _check_fee_payer(
    fee_payer: str,
    fee_payers: Collection[str],
    transfer: _Transfer,
    instructions: Sequence[ResolvedInstruction],
) -> None:
    """Rules 5-7: the service pays only fees, never tokens, and lends its key to no instruction."""
    payer = transfer.authority
    if fee_payer not in fee_payers:
        raise PaymentRuleError(
            Code.INVALID_FEE_PAYER, f"fee payer {fee_payer} is not one of this service's signers", payer=payer
        )
    facilitator_accounts = {
        associated_token_address(key, transfer.mint, transfer.token_program) for key in fee_payers
    }
    if transfer.authority in fee_payers or transfer.source in facilitator_accounts:
        raise PaymentRuleError(
            Code.FACILITATOR_CANNOT_BE_PAYER,
            f"the transfer moves the service's own tokens (authority {transfer.authority}, "
            f"source {transfer.source})",
            payer=payer,
        )
    for index, ix in enumerate(instructions):
        if fee_payer in ix.accounts:
            raise PaymentRuleError(
                Code.INVALID_FEE_PAYER,
                f"fee payer {fee_payer} appears in the accounts of instruction {index}",
                payer=payer,
            )


def _check_terms(transfer: _Transfer, *, asset: str, pay_to: str, amount: int) -> None:
    """Rules 8-10: the right asset, to the ATA of `payTo`, for exactly the required amount."""
    payer = transfer.authority
    if transfer.mint != asset:
        raise PaymentRuleError(
            Code.ASSET_MISMATCH, f"transfer mint {transfer.mint}; expected {asset}", payer=payer
        )
    expected = associated_token_address(pay_to, asset, transfer.token_program)
    if transfer.destination != expected:
        raise PaymentRuleError(
            Code.RECIPIENT_MISMATCH,
            f"transfer destination {transfer.destination}; expected {expected}, the token account of "
            f"{pay_to}",
            payer=payer,
        )
    if transfer.amount != amount:
        raise PaymentRuleError(
            Code.AUTHORIZATION_VALUE,
            f"transfer amount {transfer.amount}; expected exactly {amount}",
            payer=payer,
        )


def _check_signers(required_signers: Sequence[str], fee_payer: str, payer: str) -> None:
    """Rule 11a: the fee payer pays for two signatures at most, its own and the transfer authority's."""
    signers = set(required_signers)
    if not signers <= {fee_payer, payer}:
        others = ", ".join(sorted(signers - {fee_payer, payer}))
        raise PaymentRuleError(
            Code.INVALID_PAYLOAD,
            f"the transaction needs signatures of {others}; the fee payer pays only for its own and the transfer "
            "authority's",
            payer=payer,
        )


def _check_client_signatures(tx: VersionedTransaction, tx_message: Message | MessageV0, required: int, payer: str,
                             message: bytes | None = None) -> None:
    """Rule 11: the authority signs, and every signer but the fee payer carries a verifying signature. This is
    the one check of the client's signatures in a verify: the simulation trusts it (docs/performance.md).
    `tx_message`: `tx.message`, `required` its header's count of signatures."""
    signers = list(tx_message.account_keys)[:required]
    if payer not in {str(key) for key in signers}:
        raise PaymentRuleError(
            Code.INVALID_PAYLOAD,
            f"transfer authority {payer} is not a signer of the transaction",
            payer=payer,
        )
    signed = message_bytes(tx) if message is None else message
    for key, signature in list(zip(signers, tx.signatures, strict=True))[1:]:
        if not signature.verify(key, signed):
            whose = "the payer's" if str(key) == payer else f"signer {key}'s"
            raise PaymentRuleError(Code.INVALID_PAYLOAD, f"{whose} signature does not verify", payer=payer)


def _is_compute_budget(ix: ResolvedInstruction, discriminator: int, size: int) -> bool:
    return ix.program == Programs.COMPUTE_BUDGET and len(ix.data) == size and ix.data[0] == discriminator


def _indexes(indexes: Sequence[int]) -> str:
    return ", ".join(map(str, indexes))


def _le(data: bytes) -> int:
    return int.from_bytes(data, "little")


def _topology(message: str, payer: str | None = None) -> PaymentRuleError:
    return PaymentRuleError(Code.INSTRUCTION_TOPOLOGY, message, payer=payer)
