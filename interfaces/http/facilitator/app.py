"""`create_app(collaborators) -> falcon.App`: the pure factory of the Paywarden API."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import falcon
import falcon.media

from application.payments import Payments
from application.ports import QueryCache
from interfaces.adapters.key_usage import KeyUsage
from interfaces.adapters.signers import KeypairFeePayers
from interfaces.http.common.auth import Authenticator, AuthMiddleware, KeyLookup
from interfaces.http.common.ratelimit import FailedAuthLimit, RateLimiter, RateLimitMiddleware
from interfaces.http.common.requestlog import RequestLogMiddleware
from interfaces.http.discovery.resources import DiscoveryResourcesResource
from interfaces.http.discovery.search import DiscoverySearchResource
from interfaces.http.facilitator import errors
from interfaces.http.facilitator.payment_history import PaymentResource
from interfaces.http.facilitator.payments import SettleResource, SupportedResource, VerifyResource
from interfaces.http.ops import audit_log
from interfaces.http.ops.health import HealthzResource, ReadyzResource
from interfaces.http.ops.metrics import MetricsResource
from interfaces.http.ops.openapi import OpenApiResource, build_document
from interfaces.runtime.probes import Probes
from projections.catalog import CatalogView
from projections.payment_list import PaymentListView
from projections.service_scopes import ServiceScopesView
from projections.webhooks import WebhooksView

# `resp.media` as falcon's default JSON handler writes it (`json.dumps(media, ensure_ascii=False)`), with one encoder
# made once: `json.dumps` with an option makes a `JSONEncoder` per answer (half of its ~3.5 µs).
JSON_ANSWERS = falcon.media.JSONHandler(dumps=json.JSONEncoder(ensure_ascii=False).encode)


@dataclass(frozen=True)
class Collaborators:
    """What the API is built from (the composition root, interfaces/wiring.py, builds them)."""

    payments: Payments
    fee_payers: KeypairFeePayers
    key_lookup: KeyLookup  # API keys by hash (the accounts read model, cached per process)
    key_usage: KeyUsage  # the console's "last used" of keys
    service_scopes: ServiceScopesView  # keys scoped to a proxy service: its routes
    payment_list: PaymentListView  # GET /v1/payments/{id}
    catalog: CatalogView  # discovery
    discovery_cache: QueryCache
    cursor_key: bytes  # MACs the search's cursors (derived from PAYWARDEN_SECRET_KEY: every host the same)
    probes: Probes  # /readyz and /metrics
    webhooks_view: WebhooksView  # the webhook outbox's figures in /metrics
    served: Sequence[str]  # the networks this deployment serves (CAIP-2)
    anonymous: bool  # a request without an API key is the public identity
    rate_limit_storage: str  # the rate limits' store: Redis's URL, or memory://
    rate_limit_per_key: str
    rate_limit_per_ip: str
    trusted_proxies: tuple[str, ...]
    audit_tiles: audit_log.TileReader  # the audit log as tlog tiles (GET /audit/log/…)


def create_app(c: Collaborators) -> falcon.App:
    served = list(c.served)
    authenticator = Authenticator(c.key_lookup, anonymous=c.anonymous, served=served, usage=c.key_usage,
                                  scopes=c.service_scopes)
    limiter = RateLimiter(c.rate_limit_storage, c.rate_limit_per_key, c.rate_limit_per_ip)
    failures = FailedAuthLimit(limiter, c.trusted_proxies)
    middleware: list[Any] = [RequestLogMiddleware(), AuthMiddleware(authenticator, failures),  # falcon's types
                             RateLimitMiddleware(limiter, c.trusted_proxies)]  # take no plain middleware list
    app = falcon.App(middleware=middleware)
    app.req_options.strip_url_path_trailing_slash = True
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = JSON_ANSWERS
    verify, settle = VerifyResource(c.payments), SettleResource(c.payments)
    supported = SupportedResource(served, c.fee_payers, c.service_scopes)
    for prefix in ("", "/v1"):
        app.add_route(f"{prefix}/verify", verify)
        app.add_route(f"{prefix}/settle", settle)
        app.add_route(f"{prefix}/supported", supported)
    app.add_route("/v1/payments/{payment_id}", PaymentResource(c.payment_list))
    app.add_route("/discovery/resources", DiscoveryResourcesResource(c.catalog, c.discovery_cache))
    app.add_route("/discovery/search", DiscoverySearchResource(c.catalog, c.discovery_cache, c.cursor_key))
    # operability: no auth, no rate limit
    app.add_route("/healthz", HealthzResource())
    app.add_route("/readyz", ReadyzResource(c.probes))
    app.add_route("/metrics", MetricsResource(c.probes, c.webhooks_view))
    audit_log.mount(app, c.audit_tiles)
    app.add_route("/openapi.json", OpenApiResource(build_document(anonymous=c.anonymous)))
    errors.register(app)
    return app
