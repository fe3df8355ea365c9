"""The proxy's WSGI entry point gunicorn loads (`paywarden serve --proxy-bind`): one container per worker."""

from __future__ import annotations

from interfaces.config import load_config
from interfaces.container import build
from interfaces.http.proxy.factory import create_app
from interfaces.runtime.closing import on_worker_exit
from interfaces.wiring import proxy_collaborators

container = build(load_config())
on_worker_exit(container.close)  # its pools closed as the worker exits, not by finalizers at shutdown
application = create_app(proxy_collaborators(container))
