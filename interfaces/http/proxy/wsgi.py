"""The proxy's WSGI entry point gunicorn loads (`paywarden serve --proxy-bind`): one container per worker."""

from __future__ import annotations

from interfaces.config import load_config
from interfaces.container import build
from interfaces.http.proxy.factory import create_proxy_app

container = build(load_config())
application = create_proxy_app(container)
