"""Witness cosignatures of checkpoints: C2SP `tlog-cosignature` v1 (Ed25519), https://c2sp.org/tlog-cosignature.

A cosignature is a signed-note signature line `— <witness name> base64(key id || u64 timestamp || signature)` over
the message `cosignature/v1\\ntime <timestamp>\\n` followed by the checkpoint's note text. The key id is
`SHA-256(name || "\\n" || 0x04 || public key)[:4]`, and a witness's verifier key reads
`name+keyid+base64(0x04 || public key)`. A policy asks for `k` valid cosignatures among a set of witness keys.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from domain.checkpoint import SIGNATURE_PREFIX, NoteError, open_note

COSIGNATURE_V1 = 0x04
KEY_ID_SIZE, TIMESTAMP_SIZE, SIGNATURE_SIZE = 4, 8, 64


@dataclass(frozen=True)
class WitnessKey:
    """A witness's public key (its cosignatures verify under it)."""

    name: str
    key_id: bytes
    public_key: bytes

    def encoded(self) -> str:
        raw = bytes([COSIGNATURE_V1]) + self.public_key
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(raw).decode()}"


def witness_key_id(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([COSIGNATURE_V1]) + public_key).digest()[:KEY_ID_SIZE]


def witness_key(name: str, public_key: bytes) -> WitnessKey:
    if not name or any(c.isspace() or c == "+" for c in name):
        raise NoteError("a witness name is non-empty, with no spaces and no '+'")
    if len(public_key) != 32:
        raise NoteError("a witness key is a 32-byte Ed25519 public key")
    return WitnessKey(name, witness_key_id(name, public_key), public_key)


def parse_witness_key(encoded: str) -> WitnessKey:
    """`name+keyid+base64(0x04 || key)`."""
    name, _, rest = encoded.strip().partition("+")
    id_hex, _, key_b64 = rest.partition("+")
    try:
        raw, declared = base64.b64decode(key_b64, validate=True), bytes.fromhex(id_hex)
    except (binascii.Error, ValueError):
        raise NoteError("a witness key reads name+keyid+base64key") from None
    if len(declared) != KEY_ID_SIZE or len(raw) != 33 or raw[0] != COSIGNATURE_V1:
        raise NoteError("a witness key is a cosignature/v1 Ed25519 key (type 0x04, 32 bytes)")
    key = witness_key(name, raw[1:])
    if key.key_id != declared:
        raise NoteError(f"the witness key's id {id_hex} does not match its name and public key")
    return key


def signed_message(timestamp: int, text: str) -> bytes:
    """What a cosignature signs: the header, the time, the checkpoint's note text (no signature lines)."""
    if not 0 <= timestamp < 1 << 63:
        raise NoteError("a cosignature's time is a POSIX timestamp below 2^63")
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def cosignature_line(key: WitnessKey, timestamp: int, signature: bytes) -> str:
    blob = key.key_id + timestamp.to_bytes(TIMESTAMP_SIZE, "big") + signature
    return f"{SIGNATURE_PREFIX}{key.name} {base64.b64encode(blob).decode()}"


@dataclass(frozen=True)
class Cosigned:
    witness: str
    timestamp: int
    line: str


Verify = Callable[[bytes, bytes, bytes], bool]  # (public key, message, signature) -> valid


def cosignatures(note: str, keys: Iterable[WitnessKey], verify: Verify) -> list[Cosigned]:
    """The valid cosignatures of `note` by `keys`, one per witness; lines by other keys are ignored (the
    signed-note rule), a line by a known key that does not verify is an error."""
    text, signatures = open_note(note)
    known = {(k.name, k.key_id): k for k in keys}
    found: dict[str, Cosigned] = {}
    for s in signatures:
        key = known.get((s.name, s.key_id))
        if key is None:
            continue
        if len(s.signature) != TIMESTAMP_SIZE + SIGNATURE_SIZE:
            raise NoteError(f"the cosignature by {s.name} is not a timestamp and an Ed25519 signature")
        timestamp = int.from_bytes(s.signature[:TIMESTAMP_SIZE], "big")
        if not verify(key.public_key, signed_message(timestamp, text), s.signature[TIMESTAMP_SIZE:]):
            raise NoteError(f"the cosignature by {s.name} ({s.key_id.hex()}) does not verify")
        line = f"{SIGNATURE_PREFIX}{s.name} {base64.b64encode(s.key_id + s.signature).decode()}"
        found[key.name] = Cosigned(key.name, timestamp, line)
    return list(found.values())


@dataclass(frozen=True)
class WitnessPolicy:
    """`quorum` valid cosignatures among `keys`."""

    quorum: int
    keys: tuple[WitnessKey, ...]

    @classmethod
    def parse(cls, text: str) -> WitnessPolicy:
        """`K:KEY[,KEY…]`: K of these witness keys (each `name+keyid+base64key`)."""
        quorum, sep, keys = text.partition(":")
        if not sep or not quorum.isdigit():
            raise NoteError("a witness policy reads K:KEY[,KEY…] (K of these witness keys)")
        parsed = tuple(parse_witness_key(k) for k in keys.split(",") if k.strip())
        if not 1 <= int(quorum) <= len(parsed):
            raise NoteError(f"a policy of {len(parsed)} witness keys asks for 1 to {len(parsed)} of them")
        if len({k.name for k in parsed}) != len(parsed):
            raise NoteError("a witness policy names each witness once")
        return cls(int(quorum), parsed)

    def check(self, note: str, verify: Verify) -> list[Cosigned]:
        """The cosignatures that satisfy the policy; NoteError naming what is missing otherwise."""
        found = cosignatures(note, self.keys, verify)
        if len(found) < self.quorum:
            have = ", ".join(c.witness for c in found) or "none"
            raise NoteError(f"the checkpoint carries {len(found)} of the {self.quorum} witness cosignatures the "
                            f"policy asks for (cosigned by: {have})")
        return found


@dataclass(frozen=True)
class WitnessEndpoint:
    url: str  # the submission prefix: `{url}/add-checkpoint`
    key: WitnessKey


def parse_witnesses(text: str) -> tuple[WitnessEndpoint, ...]:
    """`URL KEY[, URL KEY …]`; NoteError naming what is wrong."""
    found = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        url, _, key = item.partition(" ")
        if not url.startswith(("http://", "https://")) or not key.strip():
            raise NoteError(f"a witness is `URL KEY` (its submission prefix and verifier key); got {item[:80]!r}")
        found.append(WitnessEndpoint(url.rstrip("/"), parse_witness_key(key)))
    if len({w.key.name for w in found}) != len(found):
        raise NoteError("each witness is named once")
    return tuple(found)
