"""The WSGI entry point gunicorn loads: configuration from the environment, one container per worker.

With `PAYWARDEN_CONSOLE_BIND` (`paywarden serve --console-bind`), gunicorn also listens there and requests that
arrive on that listener go to the merchant console (interfaces/http/console/), sharing the worker's container."""

from __future__ import annotations

import os

from interfaces.config import load_config
from interfaces.container import build
from interfaces.http.facilitator.app import create_app

container = build(load_config())
application = create_app(container)
if os.environ.get("PAYWARDEN_CONSOLE_BIND"):
    from interfaces.http.console.app import by_listener
    from interfaces.http.console.app import create_app as create_console
    from interfaces.http.console.collaborators import from_container

    application = by_listener(application, os.environ["PAYWARDEN_CONSOLE_BIND"],
                              create_console(from_container(container)))
