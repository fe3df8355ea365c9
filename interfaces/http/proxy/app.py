"""The transparent proxy: `{proxy_url}/{slug}/{rest}?{query}` charged with x402 and forwarded to the service.

A plain WSGI application (the upstream's headers, Set-Cookie included, pass through untouched, and bodies stream
both ways). Per request: find the service by slug (404), refuse it inactive (503 `service_inactive`) or on a domain that
is blocked or no longer verified (503 `domain_blocked`/`domain_unverified`, serving.py), match the
route as the x402 SDK does (404), refuse an ambiguous path (400), bound the body (413); without
PAYMENT-SIGNATURE answer 402 with PAYMENT-REQUIRED; with it, take the payment through the `Payments` application
in-process and forward (docs/proxy.md has the whole flow, and why `settle: after` settles only on an upstream
answer below 400).
"""

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

from application.outcomes import ProxyDecision, ProxyStep, SettleOutcome
from application.payments import Payments
from application.ports import FeePayers
from application.proxy_services import ProxyServices
from domain.clients import Capability, Client, merchant_client_id
from domain.codes import Code
from domain.errors import PaymentRuleError
from domain.merchant import merchant_id
from domain.proxy_service import ProxyService, Route
from domain.routes import PathRefusedError, forwarding_path
from domain.x402 import PaymentPayload, Requirements
from interfaces.adapters.outbound import OutboundClient, OutboundError, OutboundResponse
from interfaces.http.proxy import metrics
from interfaces.http.proxy.forwarding import Origin, raw_path, request_headers, response_headers, upstream_headers
from interfaces.http.proxy.payment import (
    BadPaymentHeaderError,
    encode_header,
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
                 trusted_proxies: tuple[str, ...] = (), metrics_token: str = "") -> None:
        """`public_url`: the proxy's public address (PAYWARDEN_PROXY_URL), the only source of the gateway URLs
        that 402s and the discovery catalog show; without it (a sandbox run without `up` or `serve`) each
        service's own gateway path on the listener's address, never a client's `Host`."""
        self._proxies, self._payments, self._accounts = proxies, payments, accounts
        self._fee_payers, self._outbound, self._public_url = fee_payers, outbound, public_url.rstrip("/")
        self._domains, self._trusted, self._metrics_token = domains, trusted_proxies, metrics_token

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
        try:
            x.path = forwarding_path("/" + rest)
        except PathRefusedError as refused:
            raise Reply(400, {"error": "invalid_path", "message": str(refused)}) from None
        route = self._proxies.match(service, x.method, x.path)  # priced on the very path the upstream gets
        if route is None:
            raise Reply(404, {"error": "no_route", "message": f"no route of this service matches {x.method}"})
        x.route = route
        body = self._body(x, service)
        terms = requirements(route, self._fee_payers.addresses(route.network)[0])
        url = self._gateway_url(x)
        signature = x.environ.get("HTTP_PAYMENT_SIGNATURE")
        if not signature:
            raise self._payment_required(route, terms, url, "PAYMENT-SIGNATURE header is required")
        client = self._client(service)
        try:
            payload = parse_signature(signature, route, terms, url)
            x.payment_hash = self._payments.payment_key(client, payload, terms)
        except (BadPaymentHeaderError, PaymentRuleError) as bad:
            raise self._payment_required(route, terms, url, str(bad) or "invalid_payload") from None
        if route.settle == "before":
            return self._settle_first(x, client, payload, terms, url, body, start_response)
        return self._settle_after(x, client, payload, terms, url, body, start_response)

    def _settle_after(self, x: Exchange, client: Client, payload: PaymentPayload, terms: Requirements, url: str,
                      body: bytes, start_response: StartResponse) -> Iterable[bytes]:
        """Admit (verify, count the forward), forward, settle on an upstream answer below 400, pass the answer
        on: only with the payment's one success answer (docs/proxy.md, "The delivery rule")."""
        decision = self._payments.admit_forward(client, payload, terms, self._via(x))
        if decision.step is ProxyStep.REFUSE:
            raise self._refused(x, decision, terms, url)
        if decision.step is ProxyStep.SETTLE:  # broadcast by an earlier request: its success is this delivery
            return self._settle_first(x, client, payload, terms, url, body, start_response)
        upstream = self._forward(x, body)
        if upstream.status >= 400:
            return self._pass(x, upstream, None, start_response)  # the upstream's answer; no charge
        try:
            outcome = self._payments.settle(client, payload, terms, via=self._via(x))
        except BaseException:
            upstream.close()
            raise
        if not outcome.success:
            upstream.close()
            self._unsettled(x, outcome, terms, url)
        return self._pass(x, upstream, outcome, start_response)

    def _settle_first(self, x: Exchange, client: Client, payload: PaymentPayload, terms: Requirements, url: str,
                      body: bytes, start_response: StartResponse) -> Iterable[bytes]:
        """`settle: before` (for upstreams that must not run twice): forward only with the success answer."""
        outcome = self._payments.settle(client, payload, terms, via=self._via(x))
        if not outcome.success:
            self._unsettled(x, outcome, terms, url)
        return self._pass(x, self._forward(x, body), outcome, start_response)

    def _refused(self, x: Exchange, decision: ProxyDecision, terms: Requirements, url: str) -> Reply:
        if decision.reason == Code.DUPLICATE_REQUEST:
            return Reply(409, {"error": decision.reason, "message": decision.message or ""},
                         [("Retry-After", "1"), ("Cache-Control", "no-store")], outcome="duplicate")
        return self._payment_required(x.matched[1], terms, url, decision.reason or "invalid_payment")

    @staticmethod
    def _via(x: Exchange) -> str:
        service, route = x.matched
        return f"proxy:{service.id}:{route.id}"

    def _unsettled(self, x: Exchange, outcome: SettleOutcome, terms: Requirements, url: str) -> None:
        response = encode_header(settle_response(False, outcome.transaction, outcome.network, outcome.payer,
                                                 outcome.error_reason))
        if outcome.pending:
            raise Reply(202, {"status": "settlement_pending", "transaction": outcome.transaction,
                              "message": "the payment is on its way; retry with the same PAYMENT-SIGNATURE"},
                        [("Retry-After", str(RETRY_AFTER_SECONDS)), ("PAYMENT-RESPONSE", response),
                         ("Cache-Control", "no-store")], outcome="pending")
        raise self._payment_required(x.matched[1], terms, url, outcome.error_reason or "settle_failed",
                                     [("PAYMENT-RESPONSE", response)])

    # -- upstream -----------------------------------------------------------------------------------------

    def _forward(self, x: Exchange, body: bytes) -> OutboundResponse:
        query = str(x.environ.get("QUERY_STRING") or "")
        service, route = x.matched
        url = service.base_url.rstrip("/") + x.path + (f"?{query}" if query else "")
        origin = Origin.of(x.environ, self._base_url(x), self._trusted)
        headers = upstream_headers(request_headers(x.environ), x.payment_hash, self._proxies.upstream_auth(service),
                                   origin, cookies=service.pass_cookies)
        started = time.perf_counter()
        try:
            response = self._outbound.request(x.method, url, headers, body if body or x.method not in (
                "GET", "HEAD", "DELETE", "OPTIONS") else None)
        except OutboundError as failed:
            metrics.upstream_error(x, failed.reason)
            raise Reply(502, {"error": failed.reason, "message": "the service's backend did not answer; "
                              "no payment was taken" if route.settle == "after" else
                              "the service's backend did not answer"}, outcome="upstream_failed") from None
        finally:
            metrics.upstream_latency(x, time.perf_counter() - started)
        if response.status >= 500:
            response.close()
            metrics.upstream_error(x, f"status_{response.status}")
            raise Reply(502, {"error": "upstream_error", "status": response.status,
                              "message": "the service's backend failed; no payment was taken"
                              if route.settle == "after" else "the service's backend failed"},
                        outcome="upstream_failed")
        return response

    def _pass(self, x: Exchange, upstream: OutboundResponse, outcome: SettleOutcome | None,
              start_response: StartResponse) -> Iterator[bytes]:
        headers = response_headers(upstream.headers, cookies=x.matched[0].pass_cookies)
        if outcome is not None:
            headers.append(("PAYMENT-RESPONSE", encode_header(settle_response(
                True, outcome.transaction, outcome.network, outcome.payer))))
        start_response(f"{upstream.status} {_reason(upstream.status)}", headers)
        status = "served" if outcome is not None else "upstream_4xx"
        self._log(x, upstream.status, status)
        return self._stream(x, upstream)

    def _stream(self, x: Exchange, upstream: OutboundResponse) -> Iterator[bytes]:
        sent = 0
        try:
            for chunk in upstream.stream():
                sent += len(chunk)
                yield chunk
        except OutboundError as broken:
            metrics.upstream_error(x, broken.reason)
            log.warning("upstream body broke off: %s", broken.reason, extra=self._fields(x, 0, reason=broken.reason))
        finally:
            upstream.close()
            metrics.bytes_streamed(x, "response", sent)

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
        if str(x.environ.get("HTTP_TRANSFER_ENCODING", "")).lower() != "chunked":
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
        body = payment_required(route, terms, url, error)
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
