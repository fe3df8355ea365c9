"""A small C2SP `tlog-witness` (https://c2sp.org/tlog-witness): `POST /add-checkpoint`, cosigning with its own Ed25519
key (C2SP `tlog-cosignature` v1) every checkpoint of a log it knows that is consistent with the last it cosigned.

Its state (per log origin: the size and root hash it last cosigned) is one JSON file, read, checked and replaced
under an exclusive lock of its own (`<state>.lock`), so a rollback race between two submissions cannot happen, and
written (fsync, rename) before the cosignature is answered. An inconsistent checkpoint is refused (409 or 422) and
logged at ERROR with both roots: it is evidence that the log was rewritten.

`paywarden witness keygen NAME` makes its key; `paywarden witness serve` runs it (docs/audit.md).
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from domain import merkle
from domain.checkpoint import NoteError, VerifierKey, open_note, parse_checkpoint, verify_note
from domain.cosignature import COSIGNATURE_V1, WitnessKey, cosignature_line, signed_message, witness_key
from interfaces.audit.signing import ed25519_verify

log = logging.getLogger("paywarden.witness")
MAX_BODY = 64 * 1024
MAX_PROOF_LINES = 63
SIZE_TYPE = "text/x.tlog.size"


@dataclass(frozen=True)
class WitnessSigner:
    name: str
    private_key: Ed25519PrivateKey

    @property
    def key(self) -> WitnessKey:
        return witness_key(self.name, self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))

    def cosign(self, text: str, timestamp: int) -> str:
        return cosignature_line(self.key, timestamp, self.private_key.sign(signed_message(timestamp, text)))

    @classmethod
    def generate(cls, name: str) -> WitnessSigner:
        signer = cls(name, Ed25519PrivateKey.generate())
        signer.key  # noqa: B018 — refuses a bad name now
        return signer

    def encoded(self) -> str:
        """`PRIVATE+KEY+name+keyid+base64(0x04 || seed)`."""
        seed = self.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        encoded_seed = base64.b64encode(bytes([COSIGNATURE_V1]) + seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.key.key_id.hex()}+{encoded_seed}"

    @classmethod
    def parse(cls, encoded: str) -> WitnessSigner:
        parts = encoded.strip().split("+", 4)
        try:
            raw = base64.b64decode(parts[4], validate=True) if len(parts) == 5 else b""
        except binascii.Error:
            raw = b""
        if parts[:2] != ["PRIVATE", "KEY"] or len(raw) != 33 or raw[0] != COSIGNATURE_V1:
            raise NoteError("a witness key file reads PRIVATE+KEY+name+keyid+base64(0x04 || seed)")
        signer = cls(parts[2], Ed25519PrivateKey.from_private_bytes(raw[1:]))
        if signer.key.key_id.hex() != parts[3]:
            raise NoteError("the witness key's id does not match its name and key")
        return signer


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: str


class Witness:
    """Checks and cosigns checkpoints of the logs whose verifier keys it is given."""

    def __init__(self, signer: WitnessSigner, logs: Iterable[VerifierKey], state: Path,
                 clock: Callable[[], float] = time.time) -> None:
        self.signer, self.state, self._clock = signer, state, clock
        self._logs: dict[str, list[VerifierKey]] = {}
        for key in logs:
            self._logs.setdefault(key.name, []).append(key)

    def add_checkpoint(self, body: bytes) -> Answer:
        try:
            old, proof, note = _request(body)
            text, _ = open_note(note)
            checkpoint = parse_checkpoint(text)
        except (NoteError, ValueError) as bad:
            return Answer(400, "text/plain", f"malformed add-checkpoint request: {bad}\n")
        keys = self._logs.get(checkpoint.origin)
        if keys is None:
            return Answer(404, "text/plain", f"unknown log {checkpoint.origin}\n")
        try:
            verify_note(note, keys, ed25519_verify)
        except NoteError as unsigned:
            return Answer(403, "text/plain", f"{unsigned}\n")
        if old > checkpoint.size:
            return Answer(400, "text/plain", f"old size {old} is larger than the checkpoint's {checkpoint.size}\n")
        with self._locked() as records:
            known = records.get(checkpoint.origin, {"size": 0, "root": ""})
            if old != known["size"]:
                return Answer(409, SIZE_TYPE, f"{known['size']}\n")
            root = base64.b64decode(known["root"]) if known["root"] else b""
            if old == checkpoint.size and old and root != checkpoint.root:
                log.error("INCONSISTENT checkpoint of %s: size %d with root %s, but %s was cosigned at that size; "
                          "the log was rewritten", checkpoint.origin, old, _b64(checkpoint.root), known["root"])
                return Answer(409, SIZE_TYPE, f"{known['size']}\n")
            if old == 0 and proof:
                return Answer(422, "text/plain", "a consistency proof from size 0 is empty\n")
            if old:
                try:
                    merkle.verify_consistency(old, checkpoint.size, root, checkpoint.root, proof)
                except merkle.ProofError as inconsistent:
                    log.error("INCONSISTENT checkpoint of %s refused: size %d root %s does not extend the cosigned "
                              "size %d root %s (%s); the log was rewritten", checkpoint.origin, checkpoint.size,
                              _b64(checkpoint.root), old, known["root"], inconsistent)
                    return Answer(422, "text/plain", f"inconsistent: {inconsistent}\n")
            records[checkpoint.origin] = {"size": checkpoint.size, "root": _b64(checkpoint.root)}
            self._save(records)
        line = self.signer.cosign(text, int(self._clock()))
        log.info("cosigned %s at size %d", checkpoint.origin, checkpoint.size)
        return Answer(200, "text/plain; charset=utf-8", line + "\n")

    # -- the state file -------------------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The records, under an exclusive lock of the state file held until the block ends."""
        self.state.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(self.state) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield json.loads(self.state.read_text()) if self.state.is_file() else {}
        finally:
            os.close(fd)  # releases the lock

    def _save(self, records: dict[str, Any]) -> None:
        temporary = self.state.with_name(self.state.name + ".new")
        with temporary.open("w") as out:
            json.dump(records, out, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.state)

    # -- WSGI -----------------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") != "/add-checkpoint":
            answer = Answer(404, "text/plain", "not found\n")
        elif environ.get("REQUEST_METHOD") != "POST":
            answer = Answer(405, "text/plain", "add-checkpoint is a POST\n")
        else:
            length = str(environ.get("CONTENT_LENGTH") or "0")
            if not length.isdigit() or int(length) > MAX_BODY:
                answer = Answer(413, "text/plain", f"a request is at most {MAX_BODY} bytes\n")
            else:
                answer = self.add_checkpoint(environ["wsgi.input"].read(int(length)))
        data = answer.body.encode()
        start_response(f"{answer.status} {_PHRASES.get(answer.status, 'Error')}",
                       [("Content-Type", answer.content_type), ("Content-Length", str(len(data)))])
        return [data]


_PHRASES = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 413: "Content Too Large", 422: "Unprocessable Entity"}


def _request(body: bytes) -> tuple[int, list[bytes], str]:
    """(old size, consistency proof, checkpoint note) of an add-checkpoint body."""
    head, sep, note = body.decode("utf-8").partition("\n\n")
    if not sep:
        raise NoteError("the old size and proof lines end with an empty line")
    lines = head.split("\n")
    if not lines[0].startswith("old "):
        raise NoteError("the first line is `old <size>`")
    size = lines[0][4:]
    if not size.isdigit() or (size != "0" and size.startswith("0")):
        raise NoteError("the old size is a decimal number without leading zeros")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise NoteError(f"at most {MAX_PROOF_LINES} consistency proof lines")
    proof = [base64.b64decode(line, validate=True) for line in lines[1:]]
    if any(len(p) != merkle.HASH_SIZE for p in proof):
        raise NoteError("every proof line is a base64 SHA-256 hash")
    return int(size), proof, note


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
