"""Paywarden as a witnessed log: each new checkpoint is submitted to the configured witnesses (C2SP `tlog-witness`
`add-checkpoint`, with an RFC 6962 consistency proof from the size each last cosigned), and each valid cosignature
(C2SP `tlog-cosignature`) is kept beside the checkpoint, so `GET /audit/log/checkpoint` and every export carry it.

`PAYWARDEN_AUDIT_WITNESSES` names them: comma-separated `URL KEY` pairs (the witness's submission prefix and its
verifier key `name+keyid+base64(0x04 || key)`). A witness that refuses a checkpoint is logged at ERROR with its
answer: a refusal for inconsistency (409 at the same size, 422) means the log no longer extends what it cosigned.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from domain import merkle
from domain.checkpoint import NoteError
from domain.cosignature import WitnessEndpoint, cosignatures
from interfaces.audit.signing import ed25519_verify
from projections.audit_log import AuditLogView

TIMEOUT_SECONDS = 10.0
log = logging.getLogger("paywarden.audit")


@dataclass(frozen=True)
class Outcome:
    witness: str
    cosigned: bool
    detail: str  # the cosignature line, or the witness's refusal


def submit(view: AuditLogView, witnesses: tuple[WitnessEndpoint, ...], size: int, note: str,
           client: httpx.Client | None = None) -> list[Outcome]:
    """Ask every witness that has not cosigned `size` yet to cosign the checkpoint `note`; keep what they sign."""
    outcomes: list[Outcome] = []
    own = client or httpx.Client(timeout=TIMEOUT_SECONDS)
    try:
        for witness in witnesses:
            if view.cosigned_size(witness.key.name) == size:
                continue
            outcome = _ask(view, own, witness, size, note)
            if not outcome.cosigned:
                log.error("witness %s refused the audit checkpoint of size %d: %s", witness.key.name, size,
                          outcome.detail)
            outcomes.append(outcome)
    finally:
        if client is None:
            own.close()
    return outcomes


def _ask(view: AuditLogView, client: httpx.Client, witness: WitnessEndpoint, size: int, note: str) -> Outcome:
    old = view.cosigned_size(witness.key.name) or 0
    answer: httpx.Response | None = None
    for _ in range(2):  # a witness that knows another size says so (409): ask once more from that size
        if old > size:
            return Outcome(witness.key.name, False, f"it cosigned size {old}, larger than this log's {size}")
        proof = merkle.consistency_proof(old, view.leaves(size)) if 0 < old < size else []
        body = f"old {old}\n" + "".join(base64.b64encode(p).decode() + "\n" for p in proof) + "\n" + note
        try:
            answer = client.post(f"{witness.url}/add-checkpoint", content=body.encode(),
                                 headers={"Content-Type": "text/plain; charset=utf-8"})
        except httpx.HTTPError as unreachable:
            return Outcome(witness.key.name, False, f"unreachable: {unreachable}")
        if answer.status_code == 409 and answer.headers.get("content-type", "").startswith("text/x.tlog.size"):
            said = answer.text.strip()
            if said.isdigit() and int(said) != old:
                old = int(said)
                continue
        break
    assert answer is not None
    if answer.status_code != 200:
        return Outcome(witness.key.name, False, f"{answer.status_code} {answer.text.strip()[:300]}")
    try:
        signed = cosignatures(note + answer.text, [witness.key], ed25519_verify)
    except NoteError as bad:
        return Outcome(witness.key.name, False, f"its answer is not a valid cosignature: {bad}")
    if not signed:
        return Outcome(witness.key.name, False, "its answer carries no cosignature by its key")
    view.record_cosignature(size, witness.key.name, signed[0].line, datetime.now(UTC).isoformat())
    return Outcome(witness.key.name, True, signed[0].line)
