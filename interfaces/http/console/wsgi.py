"""The WSGI entry point of the console under gunicorn: configuration from the environment, one container per
worker (`paywarden serve --console-bind`)."""

from __future__ import annotations

from interfaces.config import load_config
from interfaces.container import build
from interfaces.http.console.app import create_app
from interfaces.http.console.collaborators import from_container

container = build(load_config())
collaborators = from_container(container)
application = create_app(collaborators)
