"""Route patterns and path normalisation match the x402 SDK's own, case for case; forwarding paths are canonical."""

from __future__ import annotations

import pytest
from x402.http.x402_http_server_base import x402HTTPServerBase as Sdk

from domain.routes import (
    PathRefusedError,
    RoutePatternError,
    check_method,
    check_pattern,
    compile_pattern,
    forwarding_path,
    normalize_path,
)

PATHS = ["/", "/weather", "/weather/", "/Weather/today", "//weather//today/", "/%77eather", "/weather%2Ftoday",
         "/weather%5ctoday", "/a%2", "/a%zz/b", "/premium/%2e%2e/free", "/api/premium", "/api/premium/x/y",
         "/users/42/orders", "/users//orders", "/x?y=1#z", "/a%0ab", "/caf%C3%A9", "/api/premiumx"]
PATTERNS = ["/weather", "/weather/*", "/api/premium/*", "/users/[id]/orders", "/users/:id/orders", "/*", "/a*b",
            "/caf*"]


@pytest.mark.parametrize("path", PATHS)
def test_paths_normalise_as_the_sdk_normalises_them(path):
    assert normalize_path(path) == Sdk._normalize_path(path)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_patterns_match_exactly_the_paths_the_sdk_matches(pattern):
    ours, (_, _, theirs) = compile_pattern(pattern), Sdk._parse_route_pattern(pattern)
    for path in PATHS:
        normalized = normalize_path(path)
        assert bool(ours.match(normalized)) == bool(theirs.match(normalized)), (pattern, path)


def test_a_trailing_wildcard_matches_the_bare_prefix_but_not_a_longer_word():
    regex = compile_pattern("/api/premium/*")
    assert regex.match(normalize_path("/api/premium/"))
    assert regex.match(normalize_path("/api/premium/x"))
    assert not regex.match(normalize_path("/api/premiumx"))


@pytest.mark.parametrize("raw,forwarded", [
    ("/weather/today", "/weather/today"), ("/%77eather", "/weather"), ("/caf%C3%A9", "/caf%C3%A9"),
    ("/a%20b", "/a%20b"), ("/a b", "/a%20b"), ("/x:y@z", "/x:y@z"),
])
def test_the_forwarded_path_is_the_decoded_path_reencoded(raw, forwarded):
    assert forwarding_path(raw) == forwarded


@pytest.mark.parametrize("raw", ["/free/..%2Fpremium", "/free/%2e%2e/premium", "/free/../premium", "/a%5Cb",
                                 "/a%2", "/a%zz", "/a%00b", "/a%0Ab", "/./x"])
def test_a_path_the_upstream_could_read_differently_is_refused(raw):
    with pytest.raises(PathRefusedError):
        forwarding_path(raw)


@pytest.mark.parametrize("pattern", ["", "weather", "/a b", "/a?b", "/a#b", "/" + "a" * 600])
def test_malformed_route_patterns_are_refused(pattern):
    with pytest.raises(RoutePatternError):
        check_pattern(pattern)


def test_methods_are_the_http_ones_or_any():
    assert check_method("get") == "GET" and check_method("*") == "*"
    with pytest.raises(RoutePatternError):
        check_method("BREW")
