"""RFC 8785 JSON Canonicalization Scheme (JCS): one byte string per JSON value, whoever serialises it.

Object members are sorted by their names' UTF-16 code units, no whitespace is written, strings use the minimal
escapes of RFC 8785 §3.2.2.2, and numbers are written as ECMAScript's `Number.prototype.toString` writes them
(§3.2.2.3). One deliberate extension: an integer outside ±(2**53 - 1), which I-JSON cannot carry as a number
(amounts are u64), is written exactly in decimal instead of being refused or rounded; every integer within that
range is written exactly as RFC 8785 writes it.
"""

from __future__ import annotations

import json
import math
from typing import Any


class CanonicalError(ValueError):
    """A value JSON cannot carry: NaN or infinity, a lone surrogate, a non-string key, a foreign type."""


_json_string = json.JSONEncoder(ensure_ascii=False).encode


def canonical(value: Any) -> bytes:
    """The RFC 8785 encoding of a JSON value (dict, list, str, int, float, bool, None) as UTF-8 bytes."""
    parts: list[str] = []
    _write(value, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalError("a string holds a lone surrogate, which JSON text cannot carry") from None


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(number(value))
    elif isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise CanonicalError("object member names must be strings")
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16)):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, element in enumerate(value):
            if i:
                out.append(",")
            _write(element, out)
        out.append("]")
    else:
        raise CanonicalError(f"{type(value).__name__} is not a JSON value")


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _string(text: str) -> str:
    # The standard library's escaping is RFC 8785's: `"` and `\\` escaped, \b \f \n \r \t by name, every other
    # control character as \u00xx (lowercase hex), everything else written as itself (ensure_ascii=False).
    return _json_string(text)


def number(value: float) -> str:
    """ECMAScript Number::toString(value) (ECMA-262 §6.1.6.1.20) from the shortest round-trip digits."""
    if math.isnan(value) or math.isinf(value):
        raise CanonicalError("NaN and infinity are not JSON numbers")
    if value == 0:
        return "0"  # also -0
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # value = 0.digits × 10**n, with `digits` the k significant digits (no trailing zeros)
    n = len(whole) + int(exponent or 0) if whole != "0" else int(exponent or 0) - (len(fraction) - len(
        fraction.lstrip("0")))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    exp = f"e+{e}" if e >= 0 else f"e-{-e}"
    if k == 1:
        return sign + digits + exp
    return sign + digits[0] + "." + digits[1:] + exp
