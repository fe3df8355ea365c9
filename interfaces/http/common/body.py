"""Reading a request body: JSON only (415 otherwise), at most 64 KB (413 otherwise), strict JSON, an object.

The one JSON reader of the API. Strict means: no `NaN`, `Infinity` or `-Infinity` (Python's json accepts them, RFC
8259 and every strict parser do not), no number that overflows to infinity (`1e999`), and at most
`MAX_JSON_DEPTH` nested arrays/objects. A body sent with `Transfer-Encoding: chunked` (no `Content-Length`) is read
in bounded pieces when the server hands the application a terminated stream (gunicorn does), and refused as soon as
it passes 64 KB; a server that cannot (no `wsgi.input_terminated`) gets 411.
"""

from __future__ import annotations

import json
import math
from typing import Any

import falcon

from domain.codes import Code
from interfaces.http.common.errors import WireError

MAX_BODY_BYTES = 64 * 1024
MAX_JSON_DEPTH = 64  # nested arrays and objects; a payment body needs 4, a bazaar JSON Schema a dozen
READ_CHUNK = 8 * 1024


class NotJson(ValueError):
    """A value Python's json would accept and RFC 8259 does not."""


def read_json(req: falcon.Request) -> dict[str, Any]:
    media_type = (req.content_type or "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise WireError(Code.INVALID_PAYLOAD, falcon.HTTP_415, "Content-Type must be application/json")
    body = parse_json(read_body(req))
    if not isinstance(body, dict):
        raise WireError(Code.INVALID_PAYLOAD, message="the body must be a JSON object")
    return body


def read_body(req: falcon.Request) -> bytes:
    """The raw body, never more than MAX_BODY_BYTES + 1 bytes read from the client."""
    length = req.content_length
    if length is not None:
        if length > MAX_BODY_BYTES:
            raise _too_large()
        return req.bounded_stream.read(length)
    if not req.env.get("wsgi.input_terminated"):
        if req.get_header("Transfer-Encoding"):
            raise WireError(Code.INVALID_PAYLOAD, falcon.HTTP_411, "send the body with a Content-Length")
        return b""
    chunks: list[bytes] = []
    total = 0
    while True:  # the server decodes the chunks and ends the stream; read it a bounded piece at a time
        chunk = req.stream.read(min(READ_CHUNK, MAX_BODY_BYTES + 1 - total))
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            raise _too_large()
        chunks.append(chunk)


def parse_json(raw: bytes) -> Any:
    try:
        value = _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))  # json.loads of bytes
    except NotJson as bad:
        raise WireError(Code.INVALID_PAYLOAD, message=f"the body is not valid JSON: {bad}") from None
    except RecursionError:
        raise _too_deep() from None
    except (UnicodeDecodeError, ValueError):
        raise WireError(Code.INVALID_PAYLOAD, message="the body is not valid JSON") from None
    # Each nested array or object opens with its own bracket: a body with few brackets cannot nest deeper than
    # their count, and only a body with more is walked.
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH and depth(value) > MAX_JSON_DEPTH:
        raise _too_deep()
    # A lone surrogate ("\ud800", or its bytes let through by surrogatepass) is no Unicode text: it has no UTF-8
    # form, so nothing holding it could be stored or answered. Only a body with such an escape or byte is checked;
    # a body without a backslash has no escape (one byte search each, instead of two substring searches).
    if (b"\xed" in raw or (b"\\" in raw and (b"\\ud" in raw or b"\\uD" in raw))) and not _is_text(value):
        raise WireError(Code.INVALID_PAYLOAD, message="the body is not valid JSON: a string holds a lone surrogate, "
                                                      "which is not Unicode text")
    return value


def _is_text(value: Any) -> bool:
    try:
        _TEXT_CHECK.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _constant(name: str) -> Any:
    raise NotJson(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotJson(f"{text[:20]} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_finite)
_TEXT_CHECK = json.JSONEncoder(ensure_ascii=False)


def depth(value: Any) -> int:
    """How many arrays/objects are nested at the deepest point (0 for a scalar); stops past the limit."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def _too_large() -> WireError:
    return WireError(Code.INVALID_PAYLOAD, falcon.HTTP_413, "the body exceeds 64 KB")


def _too_deep() -> WireError:
    return WireError(Code.INVALID_PAYLOAD, message=f"the body nests arrays and objects deeper than {MAX_JSON_DEPTH}")
