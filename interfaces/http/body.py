"""Reading a request body: JSON only (415 otherwise), at most 64 KB (413 otherwise), an object."""

from __future__ import annotations

import json
from typing import Any

import falcon

from domain.codes import Code
from interfaces.http.errors import WireError

MAX_BODY_BYTES = 64 * 1024


def read_json(req: falcon.Request) -> dict[str, Any]:
    media_type = (req.content_type or "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise WireError(Code.INVALID_PAYLOAD, falcon.HTTP_415, "Content-Type must be application/json")
    if req.content_length is not None and req.content_length > MAX_BODY_BYTES:
        raise WireError(Code.INVALID_PAYLOAD, falcon.HTTP_413, "the body exceeds 64 KB")
    raw = req.bounded_stream.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise WireError(Code.INVALID_PAYLOAD, falcon.HTTP_413, "the body exceeds 64 KB")
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise WireError(Code.INVALID_PAYLOAD, message="the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise WireError(Code.INVALID_PAYLOAD, message="the body must be a JSON object")
    return body
