"""The client side of an x402 `exact` payment on Solana: build and sign the partially-signed transaction.

Mirrors the x402 SDK client (SetComputeUnitLimit, SetComputeUnitPrice, TransferChecked, Memo) in small
composable pieces, so tests, the benchmark and demos can also build the transactions the service must refuse.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from typing import Literal

from solders.address_lookup_table_account import AddressLookupTableAccount
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import Message, MessageV0, to_bytes_versioned
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction

from domain.exact import associated_token_address
from domain.networks import Programs

COMPUTE_BUDGET = Pubkey.from_string(Programs.COMPUTE_BUDGET)
TOKEN = Pubkey.from_string(Programs.TOKEN)
TOKEN_2022 = Pubkey.from_string(Programs.TOKEN_2022)
MEMO = Pubkey.from_string(Programs.MEMO)
LIGHTHOUSE = Pubkey.from_string(Programs.LIGHTHOUSE)


def compute_unit_limit_ix(units: int) -> Instruction:
    return Instruction(COMPUTE_BUDGET, bytes([2]) + units.to_bytes(4, "little"), [])


def compute_unit_price_ix(micro_lamports: int) -> Instruction:
    return Instruction(COMPUTE_BUDGET, bytes([3]) + micro_lamports.to_bytes(8, "little"), [])


def transfer_checked_ix(
    source: Pubkey,
    mint: Pubkey,
    destination: Pubkey,
    authority: Pubkey,
    amount: int,
    decimals: int = 6,
    token_program: Pubkey = TOKEN,
) -> Instruction:
    accounts = [
        AccountMeta(source, is_signer=False, is_writable=True),
        AccountMeta(mint, is_signer=False, is_writable=False),
        AccountMeta(destination, is_signer=False, is_writable=True),
        AccountMeta(authority, is_signer=True, is_writable=False),
    ]
    return Instruction(
        token_program, bytes([12]) + amount.to_bytes(8, "little") + bytes([decimals]), accounts
    )


def memo_ix(data: bytes) -> Instruction:
    return Instruction(MEMO, data, [])


def sign_as_client(
    instructions: Sequence[Instruction],
    *,
    fee_payer: Pubkey,
    signers: Sequence[Keypair],
    blockhash: Hash,
    version: Literal["v0", "legacy"] = "v0",
    lookup_tables: Sequence[AddressLookupTableAccount] = (),
) -> VersionedTransaction:
    """Compile and sign with `signers`; the fee payer's slot (and any signer not given) stays default."""
    message: MessageV0 | Message
    if version == "v0":
        message = MessageV0.try_compile(fee_payer, list(instructions), list(lookup_tables), blockhash)
    else:
        message = Message.new_with_blockhash(list(instructions), fee_payer, blockhash)
    signed = to_bytes_versioned(message)
    keypairs = {keypair.pubkey(): keypair for keypair in signers}
    required = list(message.account_keys)[: message.header.num_required_signatures]
    signatures = [Signature.default()] + [
        keypairs[key].sign_message(signed) if key in keypairs else Signature.default() for key in required[1:]
    ]
    return VersionedTransaction.populate(message, signatures)


def build_exact_payment(
    payer: Keypair,
    *,
    fee_payer: Pubkey | str,
    mint: Pubkey | str,
    pay_to: Pubkey | str,
    amount: int,
    blockhash: Hash,
    decimals: int = 6,
    token_program: Pubkey | str = TOKEN,
    compute_unit_limit: int = 20_000,
    compute_unit_price: int = 1,
    memo: bytes | None = None,
    version: Literal["v0", "legacy"] = "v0",
) -> VersionedTransaction:
    """The transaction an x402 client sends: `payer`'s ATA to `pay_to`'s ATA, signed by `payer` only."""
    mint, program = _key(mint), _key(token_program)
    source = _key(associated_token_address(str(payer.pubkey()), str(mint), str(program)))
    destination = _key(associated_token_address(str(pay_to), str(mint), str(program)))
    instructions = [
        compute_unit_limit_ix(compute_unit_limit),
        compute_unit_price_ix(compute_unit_price),
        transfer_checked_ix(source, mint, destination, payer.pubkey(), amount, decimals, program),
        # A random memo, as the SDK adds, so two payments of the same amount are distinct transactions.
        memo_ix(os.urandom(16).hex().encode() if memo is None else memo),
    ]
    return sign_as_client(
        instructions, fee_payer=_key(fee_payer), signers=[payer], blockhash=blockhash, version=version
    )


def to_base64(tx: VersionedTransaction) -> str:
    return base64.b64encode(bytes(tx)).decode("ascii")


def _key(value: Pubkey | str) -> Pubkey:
    return value if isinstance(value, Pubkey) else Pubkey.from_string(value)
