"""Route patterns and request paths, matched exactly as the x402 SDK's HTTP server matches them.

Pattern syntax (x402 SDK `x402HTTPResourceServer`): `*` any run of characters, `[param]` and `:param` one path
segment, a trailing `/*` also matching the bare prefix; matching is case-insensitive. A request path is normalised
as the SDK does: percent-escapes decoded one segment at a time (a byte decoded to `/` or `\\` is re-escaped, so no
decoded byte creates a segment), repeated slashes folded, the trailing slash dropped.

The proxy forwards the path it matched, not the raw one: `forwarding_path` refuses a path whose decoded segments
are `.`/`..` or contain `/`, `\\`, `;`, control characters, or malformed escapes, and re-encodes the rest
canonically, so the upstream cannot read a different path from the one that was priced. `;` is refused, raw or
escaped, because servlet containers (Tomcat, Jetty, Spring) cut a segment at it as a "path parameter":
`/cheap/..;/premium` is `/premium` to them and `/premium;x=1` is `/premium`.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from domain.errors import DomainError

HEX2 = re.compile(r"[0-9A-Fa-f]{2}")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
PATTERN_TEXT = re.compile(r"^/[A-Za-z0-9_\-.~/*:\[\]%@!$&'()+,;=]*$")


class PathRefusedError(DomainError):
    """A request path the proxy does not forward (it could be read differently upstream)."""


class RoutePatternError(DomainError):
    """A route pattern that is not in the x402 SDK's syntax."""


def path_unescape(segment: str) -> str | None:
    """Decode one path segment byte by byte (as the SDK does); None if any escape is malformed."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        if segment[i] != "%":
            out.append(segment[i])
            i += 1
            continue
        if i + 2 >= len(segment):
            return None
        digits = segment[i + 1:i + 3]
        if not HEX2.fullmatch(digits):
            return None
        out.append(chr(int(digits, 16)))
        i += 3
    return "".join(out)


def normalize_path(path: str) -> str:
    """The SDK's `_normalize_path`: what a route pattern is matched against."""
    path = path.split("?")[0].split("#")[0]
    segments = []
    for segment in path.split("/"):
        decoded = path_unescape(segment)
        segments.append(segment if decoded is None else decoded.replace("/", "%2F").replace("\\", "%5C"))
    joined = re.sub(r"/+", "/", "/".join(segments)).rstrip("/")
    return joined or "/"


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The SDK's `_parse_route_pattern` regex for a path pattern (the method is kept apart)."""
    trailing_wildcard = pattern.endswith("/*")
    body = pattern[:-2] if trailing_wildcard else pattern
    regex = "^" + re.escape(body)
    regex = regex.replace(r"\*", ".*?")
    regex = re.sub(r"\\\[([^\]]+)\\\]", r"[^/]+", regex)
    regex = re.sub(r":([a-zA-Z_]\w*)", r"[^/]+", regex)
    if trailing_wildcard:
        regex += r"(?:/.*?)?"
    return re.compile(regex + "$", re.IGNORECASE | re.DOTALL)


def check_pattern(pattern: str) -> str:
    """A route pattern as given, if it is one: starts with `/`, at most 512 printable URL characters."""
    if not isinstance(pattern, str) or not 1 <= len(pattern) <= 512 or not PATTERN_TEXT.fullmatch(pattern):
        raise RoutePatternError("a route path starts with / and uses URL path characters, *, [param] or :param")
    compile_pattern(pattern)
    return pattern


def check_method(method: str) -> str:
    upper = (method or "").strip().upper()
    if upper != "*" and upper not in METHODS:
        raise RoutePatternError(f"method must be one of {', '.join(METHODS)} or *")
    return upper


def matches(method: str, pattern: str, request_method: str, normalized_path: str) -> bool:
    return (method == "*" or method == request_method.upper()) and bool(
        compile_pattern(pattern).match(normalized_path))


def forwarding_path(raw_path: str) -> str:
    """The path to send upstream: each segment decoded and re-encoded canonically; ambiguous paths refused."""
    if not raw_path.startswith("/"):
        raise PathRefusedError("a path starts with /")
    segments = []
    for segment in raw_path.split("/")[1:]:
        decoded = path_unescape(segment)
        if decoded is None:
            raise PathRefusedError("a path segment has a malformed percent-escape")
        if decoded in (".", "..") or "/" in decoded or "\\" in decoded:
            raise PathRefusedError("a path segment decodes to a dot segment or contains a slash or backslash")
        if ";" in decoded:
            raise PathRefusedError("a path segment contains ';' (a path parameter, which upstreams read "
                                   "differently); send the path without it")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
            raise PathRefusedError("a path segment contains a control character")
        segments.append(quote(decoded.encode("latin-1", "strict") if _latin1(decoded) else decoded,
                              safe="!$&'()*+,;=:@-._~"))
    return "/" + "/".join(segments)


def _latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
        return True
    except UnicodeEncodeError:
        return False
