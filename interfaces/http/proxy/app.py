"""The transparent proxy: `{proxy_url}/{slug}/{rest}?{query}` charged with x402 and forwarded to the service.

A plain WSGI application (the upstream's headers, Set-Cookie included, pass through untouched). Per request: find
the service by slug (404), refuse it inactive (503 `service_inactive`) or on a domain that is blocked or no longer
verified (503 `domain_blocked`/`domain_unverified`, serving.py), match the route as the x402 SDK does (404), refuse
an ambiguous path (400), refuse a body in a transfer coding it does not decode (501) and bound the body (413);
without PAYMENT-SIGNATURE answer 402 with PAYMENT-REQUIRED; with it, one call: `Payments.deliver` with this
request's `Upstream`, whose one result is mapped to HTTP here (docs/proxy.md, "The delivery rule"): the proxy
decides nothing about money."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from application.access import Access, AccessRefusedError
from application.deliveries import (
    Declined,
    DeliveryResult,
    Duplicate,
    FailedCharged,
    FailedUncharged,
    Pending,
    Refused,
    Served,
)
from application.errors import UpstreamFailedError
from application.outcomes import SettleOutcome
from application.payment_identifiers import AlreadyServed, Identified, IdentifierReused
from application.payments import Payments
from application.ports import FeePayers, Upstream, UpstreamAnswer
from application.proxy_services import ProxyServices
from domain.clients import Capability, Client, merchant_client_id
from domain.codes import Code
from domain.mcp_tools import KIND_MCP
from domain.merchant import merchant_id
from domain.proxy_service import ProxyService, Route
from domain.routes import PathRefusedError, forwarding_path
from domain.x402 import Requirements
from interfaces.adapters.outbound import OutboundClient, OutboundError
from interfaces.http.proxy import metrics
from interfaces.http.proxy.access import ONCE_PAID, extensions, identified_answer, origin_of
from interfaces.http.proxy.forwarding import (
    Origin,
    answer_body,
    raw_path,
    request_headers,
    response_headers,
    upstream_headers,
)
from interfaces.http.proxy.mcp import McpGateway
from interfaces.http.proxy.payment import (
    BadPaymentHeaderError,
    encode_header,
    identifier_of,
    parse_signature,
    payment_required,
    requirements,
    settle_response,
)
from interfaces.http.proxy.serving import DomainCheck
from interfaces.runtime.metrics_registry import exposition
from projections.accounts import AccountsView

log = logging.getLogger("paywarden.proxy")
OPERATIONS = "/.well-known/paywarden/"
RETRY_AFTER_SECONDS = 2
StartResponse = Callable[..., Any]


class Reply(Exception):
    """An answer the proxy gives itself (not the upstream's): status, JSON body, extra headers."""

    def __init__(self, status: int, body: dict[str, Any], headers: Iterable[tuple[str, str]] = (),
                 outcome: str = "refused") -> None:
        super().__init__(body.get("error", status))
        self.status, self.body, self.headers, self.outcome = status, body, list(headers), outcome


@dataclass
class Exchange:
    """One proxied request as it goes: what was asked, what it matched, the payment's hash once known."""

    environ: dict[str, Any]
    method: str
    slug: str = ""
    service: ProxyService | None = None
    route: Route | None = None
    path: str = "/"
    payment_hash: str = ""
    started: float = 0.0

    @property
    def matched(self) -> tuple[ProxyService, Route]:
        """The service and route the request matched; every step after the match has them."""
        if self.service is None or self.route is None:
            raise RuntimeError("the request has not matched a route yet")
        return self.service, self.route


class ProxyApp:
    def __init__(self, proxies: ProxyServices, payments: Payments, accounts: AccountsView, fee_payers: FeePayers,
                 outbound: OutboundClient, public_url: str = "", domains: DomainCheck | None = None,
                 trusted_proxies: tuple[str, ...] = (), metrics_token: str = "", access: Access | None = None) -> None:
        """`public_url`: the proxy's public address (PAYWARDEN_PROXY_URL), the only source of the gateway URLs
        that 402s and the discovery catalog show; without it (a sandbox run without `up` or `serve`) each
        service's own gateway path on the listener's address, never a client's `Host`."""
        self._proxies, self._payments, self._accounts = proxies, payments, accounts
        self._fee_payers, self._outbound, self._public_url = fee_payers, outbound, public_url.rstrip("/")
        self._domains, self._trusted, self._metrics_token = domains, trusted_proxies, metrics_token
        self._mcp = McpGateway(proxies, payments, fee_payers, outbound, client_of=self._client,
                               base_url_of=self._base_url, body_of=self._body, refuse=Reply, log_answer=self._log,
                               trusted_proxies=trusted_proxies)
        self._access = access

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        exchange = Exchange(environ, str(environ.get("REQUEST_METHOD", "GET")).upper(), started=time.perf_counter())
        try:
            return self._handle(exchange, start_response)
        except Reply as reply:
            return self._reply(exchange, start_response, reply)
        except Exception:
            log.exception("proxy request failed", extra=self._fields(exchange, 500))
            return self._reply(exchange, start_response,
                               Reply(500, {"error": "proxy_error", "message": "unexpected error; retry"},
                                     outcome="error"))

    # -- the flow -----------------------------------------------------------------------------------------

    def _handle(self, x: Exchange, start_response: StartResponse) -> Iterable[bytes]:
        if raw_path(x.environ).startswith(OPERATIONS):  # no slug starts with a dot
            return self._operations(x, start_response)
        slug, _, rest = raw_path(x.environ).lstrip("/").partition("/")
        x.slug = slug.lower()
        service = self._proxies.get_by_slug(x.slug) if slug else None
        if service is None:
            raise Reply(404, {"error": "unknown_service", "message": "no service has this slug"})
        x.service = service
        if not service.active:
            raise Reply(503, {"error": "service_inactive", "message": "this service is not taking traffic"})
        if self._domains is not None and (refused := self._domains.refusal(service)) is not None:
            raise Reply(503, {"error": refused[0], "message": refused[1]})
        if service.kind == KIND_MCP:  # the gateway URL is an MCP server's endpoint (docs/mcp.md)
            return self._mcp.handle(x, rest, start_response)
        try:
            x.path = forwarding_path("/" + rest)
        except PathRefusedError as refused:
            raise Reply(400, {"error": "invalid_path", "message": str(refused)}) from None
        route = self._proxies.match(service, x.method, x.path)  # priced on the very path the upstream gets
        if route is None:
            raise Reply(404, {"error": "no_route", "message": f"no route of this service matches {x.method} {x.path}"})
        x.route = route
        body = self._body(x, service)
        terms = requirements(route, self._fee_payers.addresses(route.network)[0])
        url = self._gateway_url(x)
        signature = x.environ.get("HTTP_PAYMENT_SIGNATURE")
        why, sign_in = "PAYMENT-SIGNATURE header is required", x.environ.get("HTTP_SIGN_IN_WITH_X")
        try:  # a once-paid route's returning wallet; refused, a payment sent with it still counts
            if sign_in and route.access == ONCE_PAID and self._access:
                return self._signed_in(x, self._access, str(sign_in), url, body, start_response)
        except AccessRefusedError as no:
            why = f"{no.code}: {no.message}"
        if not signature:
            raise self._payment_required(route, terms, url, why)
        try:
            payload = parse_signature(signature, route, url)
        except BadPaymentHeaderError as bad:
            raise self._payment_required(route, terms, url, str(bad)) from None
        result = self._payments.deliver(self._client(service), payload, terms, via=self._via(x),
                                        upstream=self._upstream(x, body), settle_first=route.settle == "before",
                                        identifier=identifier_of(payload))
        x.payment_hash = result.key
        return self._answer(x, result, terms, url, start_response)

    def _answer(self, x: Exchange, result: DeliveryResult | Identified, terms: Requirements, url: str,
                start_response: StartResponse) -> Iterable[bytes]:
        """The delivery's result as HTTP (docs/proxy.md, "The delivery rule"): nothing is decided here."""
        match result:
            case Served(answer=answer, settlement=settlement):
                return self._pass(x, answer, settlement, start_response)
            case Declined(answer=answer):
                return self._pass(x, answer, None, start_response)
            case Pending(settlement=settlement, message=message):
                raise Reply(202, {"status": "settlement_pending", "transaction": settlement.transaction,
                                  "message": message},
                            [("Retry-After", str(RETRY_AFTER_SECONDS)), ("PAYMENT-RESPONSE", _receipt(settlement)),
                             ("Cache-Control", "no-store")], outcome="pending")
            case Duplicate(message=message):
                raise Reply(409, {"error": Code.DUPLICATE_REQUEST.value, "message": message},
                            [("Retry-After", "1"), ("Cache-Control", "no-store")], outcome="duplicate")
            case Refused(reason=reason, settlement=settlement):
                extra = [] if settlement is None else [("PAYMENT-RESPONSE", _receipt(settlement))]
                raise self._payment_required(x.matched[1], terms, url, reason or "invalid_payment", extra)
            case FailedUncharged(reason=reason, message=message, status=status):
                metrics.upstream_error(x, reason if status is None else f"status_{status}")
                raise Reply(502, _failure(reason, message, status), outcome="upstream_failed")
            case FailedCharged(reason=reason, message=message, status=status, settlement=settlement):
                metrics.upstream_error(x, reason if status is None else f"status_{status}")
                body = {**_failure(reason, message, status), "transaction": settlement.transaction,
                        "attemptsLeft": result.attempts_left}
                raise Reply(502, body, [("PAYMENT-RESPONSE", _receipt(settlement)), ("Cache-Control", "no-store")],
                            outcome="upstream_failed_charged")
            case AlreadyServed() | IdentifierReused():
                raise Reply(409, *identified_answer(result), outcome="duplicate")
        raise AssertionError(f"unknown delivery result {result!r}")

    def _signed_in(self, x: Exchange, access: Access, header: str, url: str, body: bytes,
                   start_response: StartResponse) -> Iterable[bytes]:
        """Sign-In-With-X granted by `Access`: forwarded unpaid, the answer passed on whatever it is (no money)."""
        service, route = x.matched
        grant = access.enter(header, origin=origin_of(url), resource=url, service_id=str(service.id), route=route)
        try:
            return self._pass(x, self._upstream(x, body, signed_in=grant.address)(""), None, start_response,
                              "signed_in")
        except UpstreamFailedError as failed:
            metrics.upstream_error(x, failed.reason)
            raise Reply(502, _failure(failed.reason, failed.message, None), outcome="upstream_failed") from None

    @staticmethod
    def _via(x: Exchange) -> str:
        service, route = x.matched
        return f"proxy:{service.id}:{route.id}"

    # -- upstream -----------------------------------------------------------------------------------------

    def _upstream(self, x: Exchange, body: bytes, signed_in: str = "") -> Upstream:
        """The `Upstream` the delivery forwards through (`signed_in`: a grant's wallet instead of a payment key)."""

        def forward(payment_key: str) -> UpstreamAnswer:
            x.payment_hash = payment_key
            query = str(x.environ.get("QUERY_STRING") or "")
            service, _ = x.matched
            url = service.base_url.rstrip("/") + x.path + (f"?{query}" if query else "")
            origin = Origin.of(x.environ, self._base_url(x), self._trusted)
            headers = upstream_headers(request_headers(x.environ), payment_key, self._proxies.upstream_auth(service),
                                       origin, cookies=service.pass_cookies, signed_in=signed_in)
            started = time.perf_counter()
            try:
                response = self._outbound.request(x.method, url, headers, body if body or x.method not in (
                    "GET", "HEAD", "DELETE", "OPTIONS") else None)
            except OutboundError as failed:
                raise UpstreamFailedError(failed.reason, "the service's backend did not answer") from None
            finally:
                metrics.upstream_latency(x, time.perf_counter() - started)
            return UpstreamAnswer(response.status, response.headers, answer_body(x, response, "the service's"),
                                  response.close)

        return forward

    def _pass(self, x: Exchange, upstream: UpstreamAnswer, settlement: SettleOutcome | None,
              start_response: StartResponse, outcome: str = "") -> Iterator[bytes]:
        headers = response_headers(upstream.headers, cookies=x.matched[0].pass_cookies)
        if settlement is not None:
            headers.append(("PAYMENT-RESPONSE", _receipt(settlement)))
        start_response(f"{upstream.status} {_reason(upstream.status)}", headers)
        self._log(x, upstream.status, outcome or ("served" if settlement is not None else "upstream_4xx"))
        return self._stream(x, upstream)

    def _stream(self, x: Exchange, upstream: UpstreamAnswer) -> Iterator[bytes]:
        try:
            yield b""  # the headers (PAYMENT-RESPONSE among them) go out now, not with the upstream's first bytes
            yield from upstream.body
        except UpstreamFailedError as broken:  # a streamed answer (`settle: before`) cut short after its headers
            metrics.upstream_error(x, broken.reason)
            log.warning("upstream body broke off: %s", broken.reason, extra=self._fields(x, 0, reason=broken.reason))
        finally:
            upstream.close()

    # -- pieces -------------------------------------------------------------------------------------------

    def _operations(self, x: Exchange, start_response: StartResponse) -> list[bytes]:
        """`/.well-known/paywarden/healthz` and `/metrics` of the proxy's own processes (for the scraper only)."""
        path = raw_path(x.environ)[len(OPERATIONS):]
        if path == "healthz":
            start_response("200 OK", [("Content-Type", "application/json"), ("Cache-Control", "no-store")])
            return [b'{"status": "ok"}']
        if path == "metrics" and self._operator(x):
            data, content_type = exposition(_NoExtra())
            start_response("200 OK", [("Content-Type", content_type), ("Cache-Control", "no-store")])
            return [data]
        raise Reply(404, {"error": "not_found", "message": "no such operations endpoint"})

    def _operator(self, x: Exchange) -> bool:
        """The proxy's metrics name every merchant's slugs: they go to `Authorization: Bearer
        PAYWARDEN_PROXY_METRICS_TOKEN`, or without a token set to a loopback peer that no proxy stands in front of."""
        if self._metrics_token:
            sent = str(x.environ.get("HTTP_AUTHORIZATION") or "")
            return hmac.compare_digest(sent.encode(), f"Bearer {self._metrics_token}".encode())
        try:
            loopback = ipaddress.ip_address(str(x.environ.get("REMOTE_ADDR") or "")).is_loopback
        except ValueError:
            return False
        return loopback and not any(x.environ.get(h) for h in ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED"))

    def _body(self, x: Exchange, service: ProxyService) -> bytes:
        coding = str(x.environ.get("HTTP_TRANSFER_ENCODING") or "").strip().lower()
        if coding and coding != "chunked":  # never forwarded empty: the proxy decodes no other coding
            raise Reply(501, {"error": "unsupported_transfer_coding",
                              "message": f"request bodies sent with Transfer-Encoding {coding!r} are not accepted; "
                                         "send the body with Content-Length or as plain chunked"})
        limit = service.body_limit
        length = str(x.environ.get("CONTENT_LENGTH") or "").strip()
        if length and (not length.isdigit() or int(length) > limit):
            raise Reply(413, {"error": "body_too_large", "message": f"request bodies are at most {limit} bytes"})
        stream = x.environ["wsgi.input"]
        data = stream.read(int(length)) if length else self._read_unsized(stream, limit, x)
        if len(data) > limit:
            raise Reply(413, {"error": "body_too_large", "message": f"request bodies are at most {limit} bytes"})
        metrics.bytes_streamed(x, "request", len(data))
        return data

    @staticmethod
    def _read_unsized(stream: Any, limit: int, x: Exchange) -> bytes:
        if str(x.environ.get("HTTP_TRANSFER_ENCODING") or "").strip().lower() != "chunked":
            return b""
        data = stream.read(limit + 1)
        return data or b""

    def _client(self, service: ProxyService) -> Client:
        """The service's merchant as the payment's client, its capabilities from the accounts read model (as an
        API key's are), not a replay of the Merchant."""
        uuid = str(merchant_id(service.merchant))
        return Client(id=merchant_client_id(uuid), registered=True, merchant=service.merchant,
                      capabilities=frozenset(Capability(*c) for c in self._accounts.get_capabilities(uuid)))

    def _gateway_url(self, x: Exchange) -> str:
        return f"{self._base_url(x)}/{x.slug}{x.path}"

    def _base_url(self, x: Exchange) -> str:
        """The configured public address; else the listener's own (the server's name and port, which the
        server sets, not the client's `Host`)."""
        if self._public_url:
            return self._public_url
        host, port = str(x.environ.get("SERVER_NAME") or "localhost"), str(x.environ.get("SERVER_PORT") or "")
        if (sock := x.environ.get("gunicorn.socket")) is not None:  # gunicorn names the server after `Host`
            host, port = (str(part) for part in sock.getsockname()[:2])
        scheme = str(x.environ.get("wsgi.url_scheme", "http"))
        default = {"http": "80", "https": "443"}.get(scheme)
        return f"{scheme}://{host}" + (f":{port}" if port and port != default else "")

    def _payment_required(self, route: Route, terms: Requirements, url: str, error: str,
                          extra: Iterable[tuple[str, str]] = ()) -> Reply:
        body = payment_required(route, terms, url, error, lambda accepts: extensions(route, url, accepts))
        return Reply(402, body, [("PAYMENT-REQUIRED", encode_header(body)), ("Cache-Control", "no-store"),
                                 *extra], outcome="payment_required")

    def _reply(self, x: Exchange, start_response: StartResponse, reply: Reply) -> list[bytes]:
        data = json.dumps(reply.body).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *reply.headers]
        start_response(f"{reply.status} {_reason(reply.status)}", headers)
        self._log(x, reply.status, reply.outcome, reason=str(reply.body.get("error") or ""))
        return [data] if x.method != "HEAD" else []

    def _log(self, x: Exchange, status: int, outcome: str, reason: str = "") -> None:
        metrics.outcome(x, outcome)
        level = logging.WARNING if status >= 500 else logging.INFO
        log.log(level, "%s %s %s", x.method, x.slug, status, extra=self._fields(x, status, outcome=outcome,
                                                                                reason=reason))

    @staticmethod
    def _fields(x: Exchange, status: int, **more: str) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "service": x.slug, "route": x.route.id if x.route else None, "method": x.method, "status": status,
            "payment_hash": x.payment_hash or None, "duration_ms": round((time.perf_counter() - x.started) * 1000, 2),
        }
        fields.update({k: v for k, v in more.items() if v})
        return fields


class _NoExtra:
    def collect(self) -> Iterator[Any]:
        return iter(())


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _receipt(settlement: SettleOutcome) -> str:
    """The `PAYMENT-RESPONSE` header of a settle's answer."""
    return encode_header(settle_response(settlement.success, settlement.transaction, settlement.network,
                                         settlement.payer, None if settlement.success else settlement.error_reason))


def _failure(reason: str, message: str, status: int | None) -> dict[str, Any]:
    return {"error": reason, "message": message, **({"status": status} if status is not None else {})}
