"""Checkpoints of the audit log in the C2SP `tlog-checkpoint` format, carried in C2SP `signed-note`s.

A checkpoint's text is three lines: the log's origin, the tree size in decimal, the root hash in standard base64.
A signed note is that text, a blank line, and one line per signature: an em dash, a space, the key name, a
space, and the base64 of the 4-byte key id followed by the signature. For Ed25519 (signature type 0x01) the key id
is the first 4 bytes of SHA-256(name || "\\n" || 0x01 || public key), and a verifier key is written
`name+<key id in hex>+<base64(0x01 || public key)>`, as golang.org/x/mod/sumdb/note writes it.

Only the text and the framing live here (pure); the Ed25519 arithmetic is an adapter's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

ED25519 = 0x01
SIGNATURE_PREFIX = "\u2014 "  # "— "
MAX_NOTE_BYTES = 1_000_000


class NoteError(ValueError):
    """A note, checkpoint or key that is malformed, or a signature that does not verify."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        if not self.origin or "\n" in self.origin:
            raise NoteError("a checkpoint's origin is one non-empty line")
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode(), *self.extensions]
        return "".join(f"{line}\n" for line in lines)


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: bytes
    signature: bytes


@dataclass(frozen=True)
class VerifierKey:
    name: str
    key_id: bytes
    public_key: bytes

    def encoded(self) -> str:
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(bytes([ED25519]) + self.public_key).decode()}"


def key_id(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public_key).digest()[:4]


def verifier_key(name: str, public_key: bytes) -> VerifierKey:
    _check_name(name)
    return VerifierKey(name, key_id(name, public_key), public_key)


def parse_verifier_key(encoded: str) -> VerifierKey:
    name, _, rest = encoded.strip().partition("+")
    id_hex, _, key_b64 = rest.partition("+")
    try:
        raw = base64.b64decode(key_b64, validate=True)
        declared = bytes.fromhex(id_hex)
    except (binascii.Error, ValueError):
        raise NoteError("a verifier key reads name+keyid+base64key") from None
    if len(declared) != 4 or not raw or raw[0] != ED25519 or len(raw) != 33:
        raise NoteError("only Ed25519 verifier keys (type 0x01, 32 bytes) are accepted")
    key = verifier_key(name, raw[1:])
    if key.key_id != declared:
        raise NoteError(f"the verifier key's id {id_hex} does not match its name and public key")
    return key


def parse_signing_key(encoded: str) -> tuple[str, bytes]:
    """`PRIVATE+KEY+name+keyid+base64(0x01 || 32-byte seed)` (the sumdb/note signer key): (name, seed)."""
    parts = encoded.strip().split("+", 4)
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
        raise NoteError("a signing key reads PRIVATE+KEY+name+keyid+base64key")
    try:
        raw = base64.b64decode(parts[4], validate=True)
    except binascii.Error:
        raise NoteError("a signing key's last part is base64") from None
    if len(raw) != 33 or raw[0] != ED25519:
        raise NoteError("only Ed25519 signing keys (type 0x01, 32-byte seed) are accepted")
    _check_name(parts[2])
    return parts[2], raw[1:]


def signing_key_text(name: str, seed: bytes, public_key: bytes) -> str:
    _check_name(name)
    return f"PRIVATE+KEY+{name}+{key_id(name, public_key).hex()}+{base64.b64encode(bytes([ED25519]) + seed).decode()}"


def sign_note(text: str, name: str, public_key: bytes, sign: Callable[[bytes], bytes]) -> str:
    """The signed note of `text` (which ends in a newline), signed by `sign` (an Ed25519 signer of bytes)."""
    if not text.endswith("\n") or "\n\n" in text:
        raise NoteError("a note's text is non-empty lines, each ending in a newline")
    blob = key_id(name, public_key) + sign(text.encode())
    return f"{text}\n{SIGNATURE_PREFIX}{name} {base64.b64encode(blob).decode()}\n"


def open_note(note: str) -> tuple[str, list[Signature]]:
    """Split a signed note into its text and its signature lines (unverified)."""
    if len(note.encode()) > MAX_NOTE_BYTES:
        raise NoteError("the note is too large")
    text, sep, signatures = note.rpartition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise NoteError("a signed note is text, a blank line, then signature lines")
    found = []
    for line in signatures[:-1].split("\n"):
        if not line.startswith(SIGNATURE_PREFIX):
            raise NoteError(f"not a signature line: {line[:60]!r}")
        name, _, blob = line.removeprefix(SIGNATURE_PREFIX).rpartition(" ")
        try:
            raw = base64.b64decode(blob, validate=True)
        except binascii.Error:
            raise NoteError(f"signature of {name} is not base64") from None
        if not name or len(raw) < 5:
            raise NoteError("a signature line names its key and carries a key id and a signature")
        found.append(Signature(name, raw[:4], raw[4:]))
    return text + "\n", found


def verify_note(note: str, keys: Iterable[VerifierKey], verify: Callable[[bytes, bytes, bytes], bool]) -> str:
    """The note's text when at least one signature is by one of `keys` and every such signature verifies.

    `verify(public_key, message, signature)` is the Ed25519 check. Signatures by unknown keys are ignored, as
    the signed-note spec says; none by a known key is an error.
    """
    text, signatures = open_note(note)
    known = {(k.name, k.key_id): k for k in keys}
    verified = 0
    for s in signatures:
        key = known.get((s.name, s.key_id))
        if key is None:
            continue
        if not verify(key.public_key, text.encode(), s.signature):
            raise NoteError(f"the signature by {s.name} ({s.key_id.hex()}) does not verify")
        verified += 1
    if not verified:
        names = ", ".join(f"{s.name} ({s.key_id.hex()})" for s in signatures) or "none"
        raise NoteError(f"no signature by a trusted key (signed by: {names})")
    return text


def parse_checkpoint(text: str) -> Checkpoint:
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise NoteError("a checkpoint is origin, size and root hash lines")
    origin, size, root_b64, *extensions = lines[:-1]
    if not size.isdigit() or (size != "0" and size.startswith("0")):
        raise NoteError(f"checkpoint size {size!r} is not a decimal number")
    try:
        root = base64.b64decode(root_b64, validate=True)
    except binascii.Error:
        raise NoteError("checkpoint root hash is not base64") from None
    if len(root) != 32:
        raise NoteError("checkpoint root hash is not 32 bytes")
    return Checkpoint(origin, int(size), root, tuple(extensions))


def _check_name(name: str) -> None:
    if not name or any(c.isspace() or c == "+" for c in name):
        raise NoteError("a key name is non-empty, with no spaces and no '+'")
