"""`create_app(container) -> falcon.App`: the pure factory of the Paywarden API."""

from __future__ import annotations

from typing import Any

import falcon

from interfaces.container import Container
from interfaces.http.common.auth import Authenticator, AuthMiddleware
from interfaces.http.common.ratelimit import FailedAuthLimit, RateLimiter, RateLimitMiddleware
from interfaces.http.common.requestlog import RequestLogMiddleware
from interfaces.http.discovery.resources import DiscoveryResourcesResource
from interfaces.http.discovery.search import DiscoverySearchResource
from interfaces.http.facilitator import errors
from interfaces.http.facilitator.payment_history import PaymentResource
from interfaces.http.facilitator.payments import SettleResource, SupportedResource, VerifyResource
from interfaces.http.ops.health import HealthzResource, ReadyzResource
from interfaces.http.ops.metrics import MetricsResource
from interfaces.http.ops.openapi import OpenApiResource, build_document
from interfaces.runtime.probes import Probes


def create_app(container: Container) -> falcon.App:
    served = sorted(container.chains.by_network)
    authenticator = Authenticator(container.key_lookup(), anonymous=container.config.anonymous, served=served,
                                  usage=container.key_usage, scopes=container.service_scopes)
    config = container.config
    limiter = RateLimiter(config.redis_url or "memory://", config.rate_limit_per_key, config.rate_limit_per_ip)
    failures = FailedAuthLimit(limiter, config.trusted_proxies)
    middleware: list[Any] = [RequestLogMiddleware(), AuthMiddleware(authenticator, failures),
                             RateLimitMiddleware(limiter, config.trusted_proxies)]
    app = falcon.App(middleware=middleware)
    app.req_options.strip_url_path_trailing_slash = True
    verify, settle = VerifyResource(container.payments), SettleResource(container.payments)
    supported = SupportedResource(served, container.fee_payers, container.service_scopes)
    for prefix in ("", "/v1"):
        app.add_route(f"{prefix}/verify", verify)
        app.add_route(f"{prefix}/settle", settle)
        app.add_route(f"{prefix}/supported", supported)
    app.add_route("/v1/payments/{payment_id}", PaymentResource(container.payment_list))
    app.add_route("/discovery/resources", DiscoveryResourcesResource(container.catalog, container.discovery_cache))
    app.add_route("/discovery/search", DiscoverySearchResource(container.catalog, container.discovery_cache))
    probes = Probes(container)  # operability: no auth, no rate limit
    app.add_route("/healthz", HealthzResource())
    app.add_route("/readyz", ReadyzResource(probes))
    app.add_route("/metrics", MetricsResource(probes, container.webhooks_view))
    app.add_route("/openapi.json", OpenApiResource(build_document(anonymous=config.anonymous)))
    errors.register(app)
    return app
