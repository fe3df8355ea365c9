"""`create_app(container) -> falcon.App`: the pure factory of the Paywarden API."""

from __future__ import annotations

import falcon

from interfaces.container import Container
from interfaces.http import errors
from interfaces.http.auth import Authenticator, AuthMiddleware
from interfaces.http.payments import SettleResource, SupportedResource, VerifyResource
from interfaces.http.ratelimit import RateLimiter, RateLimitMiddleware


def create_app(container: Container) -> falcon.App:
    served = sorted(container.chains.by_network)
    authenticator = Authenticator(container.accounts, anonymous=container.config.anonymous, served=served)
    config = container.config
    limiter = RateLimiter(config.redis_url or "memory://", config.rate_limit_per_key, config.rate_limit_per_ip)
    app = falcon.App(middleware=[AuthMiddleware(authenticator), RateLimitMiddleware(limiter, config.trusted_proxies)])
    app.req_options.strip_url_path_trailing_slash = True
    verify, settle = VerifyResource(container.payments), SettleResource(container.payments)
    supported = SupportedResource(served, container.fee_payers)
    for prefix in ("", "/v1"):
        app.add_route(f"{prefix}/verify", verify)
        app.add_route(f"{prefix}/settle", settle)
        app.add_route(f"{prefix}/supported", supported)
    errors.register(app)
    return app
