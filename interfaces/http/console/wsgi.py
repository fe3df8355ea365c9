"""The WSGI entry point of the console under gunicorn: configuration from the environment, one container per
worker (`paywarden serve --console-bind`)."""

from __future__ import annotations

from interfaces.config import load_config
from interfaces.container import build
from interfaces.http.console.app import create_app
from interfaces.runtime.closing import on_worker_exit
from interfaces.wiring import console_collaborators

container = build(load_config())
on_worker_exit(container.close)  # its pools closed as the worker exits, not by finalizers at shutdown
application = create_app(console_collaborators(container))
