"""The SDK adapter of Sign-In-With-X refuses what it cannot check with a code, never an exception."""

from __future__ import annotations

import base64
import json

import pytest

from application.access import AccessRefusedError
from interfaces.adapters.siwx import SdkSignIns

URL = "https://gw.example/articles/a"


def test_the_sdk_adapter_refuses_a_non_solana_message_and_a_malformed_one_without_raising():
    evm = {"domain": "gw.example", "address": "0xabc", "uri": URL, "version": "1", "chainId": "eip155:1",
           "type": "eip191", "nonce": "n", "issuedAt": "2026-01-10T12:00:00Z", "signature": "0x00"}
    for payload, code in ((evm, "siwx_other_chain"), ({**evm, "chainId": "solana:x", "type": "ed25519",
                                                       "issuedAt": "yesterday"}, "invalid_siwx_issued_at")):
        header = base64.b64encode(json.dumps(payload).encode()).decode()
        with pytest.raises(AccessRefusedError) as refusal:
            SdkSignIns().check(header, "https://gw.example")
        assert refusal.value.code == code
