"""Low-level reading of Solana transactions with solders: decoding, account resolution, signing bytes.

Pure functions over bytes and solders values; every malformed input becomes a `PaymentRuleError` with a code.
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import NamedTuple

from solders.message import Message, MessageV0, to_bytes_versioned
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import SanitizeError, VersionedTransaction

from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.networks import Programs

# Solana's packet data size: a larger transaction can never be broadcast, so it is refused before decoding.
MAX_TRANSACTION_BYTES = 1232
MAX_TRANSACTION_BASE64 = 4 * -(-MAX_TRANSACTION_BYTES // 3)
SIGNATURE_BYTES = 64

_ASSOCIATED_TOKEN_PROGRAM = Pubkey.from_string(Programs.ASSOCIATED_TOKEN)


class ResolvedInstruction(NamedTuple):
    """An instruction with its program and accounts as base58 addresses (lookup tables resolved)."""

    program: str
    accounts: tuple[str, ...]
    data: bytes


def decode_transaction(transaction_b64: str) -> VersionedTransaction:
    """Strictly decode a base64 wire transaction (legacy or v0); else INVALID_TRANSACTION_FORMAT."""
    return decode_wire(transaction_b64)[0]


def decode_wire(transaction_b64: str) -> tuple[VersionedTransaction, bytes]:
    """`decode_transaction`, with the bytes it came in: canonical, exactly `bytes(tx)`."""
    if not isinstance(transaction_b64, str):
        raise _malformed(f"transaction must be a base64 string, got {type(transaction_b64).__name__}")
    if len(transaction_b64) > MAX_TRANSACTION_BASE64:
        raise _malformed(
            f"transaction is {len(transaction_b64)} base64 characters; at most {MAX_TRANSACTION_BASE64}"
        )
    try:
        raw = binascii.a2b_base64(transaction_b64, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise _malformed(f"transaction is not valid base64 ({exc})") from None
    try:
        tx = VersionedTransaction.from_bytes(raw)
    except ValueError as exc:
        raise _malformed(f"transaction bytes are not a Solana transaction ({exc})") from None
    # bincode ignores trailing bytes; re-encoding must give back exactly what the client sent.
    if (encoded := bytes(tx)) != raw:
        raise _malformed(f"transaction has {len(raw) - len(encoded)} trailing or non-canonical bytes")
    ensure_well_formed(tx)
    return tx, raw


def ensure_well_formed(tx: VersionedTransaction) -> None:
    """Solana's own sanitize: indexes in range, one signature per required signer, programs not loaded."""
    try:
        tx.sanitize()
    except SanitizeError as exc:
        raise _malformed(f"transaction is malformed: {exc}") from None


def message_bytes(tx: VersionedTransaction) -> bytes:
    """The exact bytes signers sign (a v0 message carries the 0x80 version prefix)."""
    return bytes(to_bytes_versioned(tx.message))


def signed_message(wire: bytes) -> bytes:
    """The message bytes of a canonical wire transaction (`decode_wire`'s), what its signers sign: the bytes
    after its signatures, equal to `message_bytes` of the decoded transaction without encoding it again."""
    count, offset = _short_vec(wire)
    return wire[offset + SIGNATURE_BYTES * count:]


def lookup_tables(tx: VersionedTransaction) -> tuple[str, ...]:
    """The address-lookup-table accounts a v0 message references; `()` for a legacy message."""
    message = tx.message  # a copy at every read
    if not isinstance(message, MessageV0):
        return ()
    return tuple(str(lookup.account_key) for lookup in message.address_table_lookups)


def resolve_accounts(message: Message | MessageV0, loaded: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """Static keys, then writable loaded addresses (tables in order), then readonly ones, as Solana does.
    `message`: the transaction's (`tx.message`, which solders copies at every read: read it once)."""
    static = tuple(map(str, message.account_keys))
    if not isinstance(message, MessageV0):
        return static
    writable: list[str] = []
    readonly: list[str] = []
    for lookup in message.address_table_lookups:
        table = str(lookup.account_key)
        if table not in loaded:
            raise PaymentRuleError(Code.INVALID_PAYLOAD, f"address lookup table {table} could not be loaded")
        writable += (_loaded_address(table, loaded[table], index) for index in lookup.writable_indexes)
        readonly += (_loaded_address(table, loaded[table], index) for index in lookup.readonly_indexes)
    return (*static, *writable, *readonly)


def resolve_instructions(message: Message | MessageV0, accounts: Sequence[str]) -> tuple[ResolvedInstruction, ...]:
    """The message's instructions with addresses in place of indexes (`accounts`: its `resolve_accounts`); the
    transaction must be well formed."""
    return tuple(
        ResolvedInstruction(accounts[ix.program_id_index], tuple(map(accounts.__getitem__, bytes(ix.accounts))),
                            bytes(ix.data))
        for ix in message.instructions
    )


def message_hash(tx: VersionedTransaction, message: bytes | None = None) -> str:
    """Hex SHA-256 of the signed message: what identifies a transaction before any signature is trusted.
    `message`: the transaction's message bytes when the caller has them (`signed_message`)."""
    return hashlib.sha256(message_bytes(tx) if message is None else message).hexdigest()


def payment_fingerprint(tx: VersionedTransaction) -> str:
    """The client's signature (base58), else the fee payer's, else the hex SHA-256 of the message."""
    signatures = list(tx.signatures)
    unset = Signature.default()
    for signature in (*signatures[1:], *signatures[:1]):
        if signature != unset:
            return str(signature)
    return hashlib.sha256(message_bytes(tx)).hexdigest()


def with_fee_payer_signature(tx: VersionedTransaction, signature: bytes) -> bytes:
    """The serialized transaction with signatures[0] replaced by the fee payer's 64-byte signature."""
    if len(signature) != SIGNATURE_BYTES:
        raise ValueError(f"a signature is {SIGNATURE_BYTES} bytes, got {len(signature)}")
    signatures = [Signature.from_bytes(signature), *list(tx.signatures)[1:]]
    return bytes(VersionedTransaction.populate(tx.message, signatures))


def with_fee_payer_signature_wire(wire: bytes, signature: bytes) -> bytes:
    """`with_fee_payer_signature` of a canonical wire transaction (`decode_wire`'s), without decoding and
    encoding it again: the same bytes with the 64 bytes of signatures[0] replaced."""
    if len(signature) != SIGNATURE_BYTES:
        raise ValueError(f"a signature is {SIGNATURE_BYTES} bytes, got {len(signature)}")
    count, offset = _short_vec(wire)
    if count < 1 or len(wire) < offset + SIGNATURE_BYTES * count:
        raise ValueError("the transaction has no fee payer signature to replace")
    return wire[:offset] + signature + wire[offset + SIGNATURE_BYTES:]


@lru_cache(maxsize=4096)  # pure, and a verify derives the same few (payTo's, the fee payers') each time
def associated_token_address(owner: str, mint: str, token_program: str) -> str:
    """The associated token account of `owner` for `mint` under `token_program` (Token or Token-2022)."""
    seeds = [bytes(Pubkey.from_string(key)) for key in (owner, token_program, mint)]
    address, _bump = Pubkey.find_program_address(seeds, _ASSOCIATED_TOKEN_PROGRAM)
    return str(address)


def parse_address(value: str, code: Code, what: str) -> str:
    """`value` in canonical base58 if it is a 32-byte address, else PaymentRuleError(code)."""
    try:
        return str(Pubkey.from_string(value))
    except (ValueError, TypeError):
        raise PaymentRuleError(code, f"{what} {value!r} is not a base58 Solana address") from None


def _loaded_address(table: str, addresses: Sequence[str], index: int) -> str:
    if index >= len(addresses):
        raise PaymentRuleError(
            Code.INVALID_PAYLOAD,
            f"address lookup table {table} holds {len(addresses)} addresses; the message uses index {index}",
        )
    return parse_address(addresses[index], Code.INVALID_PAYLOAD, f"lookup table {table} entry {index}")


def _short_vec(data: bytes) -> tuple[int, int]:
    """The compact-u16 length prefix (Solana's short_vec) at the start of `data`: its value, its size in bytes."""
    value = 0
    for index in range(min(3, len(data))):
        value |= (data[index] & 0x7F) << (7 * index)
        if data[index] < 0x80:
            return value, index + 1
    raise ValueError("no short_vec length at the start of the transaction")


def _malformed(message: str) -> PaymentRuleError:
    return PaymentRuleError(Code.INVALID_TRANSACTION_FORMAT, message)
