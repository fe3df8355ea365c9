"""The WSGI entry point gunicorn loads: configuration from the environment, one container per worker."""

from __future__ import annotations

from interfaces.config import load_config
from interfaces.container import build
from interfaces.http.app import create_app

container = build(load_config())
application = create_app(container)
