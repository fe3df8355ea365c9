"""Signature encodings (pure)."""

from __future__ import annotations

from solders.signature import Signature


def base58_signature(signature: bytes) -> str:
    return str(Signature.from_bytes(signature))
