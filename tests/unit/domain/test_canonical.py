"""RFC 8785 canonical JSON: the RFC author's published vectors, and the `rfc8785` package as a second opinion."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest
import rfc8785

from domain.canonical import CanonicalError, canonical, number

VECTORS = Path(__file__).parent / "jcs"


@pytest.mark.parametrize("name", ["arrays", "french", "structures", "unicode", "values", "weird"])
def test_the_published_jcs_vectors_canonicalise_byte_for_byte(name):
    parsed = json.loads((VECTORS / f"{name}.input.json").read_text(encoding="utf-8"))
    assert canonical(parsed) == (VECTORS / f"{name}.output.json").read_bytes()


# RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript serialisations.
APPENDIX_B = [
    ("0000000000000000", "0"), ("8000000000000000", "0"), ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"), ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"), ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"), ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"), ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"), ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"), ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"), ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"), ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"), ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"), ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "text"), APPENDIX_B)
def test_numbers_serialise_as_ecmascript_does(bits, text):
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert number(value) == text
    assert rfc8785.dumps(value).decode() == text  # the package agrees with the table we copied


def test_ten_thousand_random_doubles_match_the_rfc8785_package():
    rng = random.Random(8785)
    for _ in range(10_000):
        value = struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0]
        if value != value or value in (float("inf"), float("-inf")):
            continue
        assert number(value) == rfc8785.dumps(value).decode()


def test_nested_documents_match_the_rfc8785_package():
    rng = random.Random(6962)
    alphabet = ["a", "B", "é", "€", "😂", "\n", "\u0001", "\"", "\\", "/", "\u007f", "\ufb33"]

    def value(depth):
        kind = rng.randrange(7 if depth < 4 else 4)
        if kind == 0:
            return rng.choice([None, True, False])
        if kind == 1:
            return rng.randint(-(2**53) + 1, 2**53 - 1)
        if kind == 2:
            return rng.uniform(-1e6, 1e6)
        if kind == 3:
            return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
        if kind in (4, 5):
            return {"".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4))): value(depth + 1)
                    for _ in range(rng.randrange(4))}
        return [value(depth + 1) for _ in range(rng.randrange(4))]

    for _ in range(500):
        doc = value(0)
        assert canonical(doc) == rfc8785.dumps(doc)


def test_u64_amounts_are_written_exactly():
    assert canonical({"amount": 18446744073709551615}) == b'{"amount":18446744073709551615}'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1: "x"}, b"bytes", "\ud800", {"k": object()}])
def test_values_json_cannot_carry_are_refused(bad):
    with pytest.raises(CanonicalError):
        canonical(bad)
