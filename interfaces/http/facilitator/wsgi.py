"""The WSGI entry point gunicorn loads: configuration from the environment, one container per worker.

With `PAYWARDEN_CONSOLE_BIND` (`paywarden serve --console-bind`), gunicorn also listens there and requests that
arrive on that listener go to the merchant console (interfaces/http/console/), sharing the worker's container.
With `PAYWARDEN_LOCALNET_BIND` (`paywarden up`, one worker), the worker hosts the sandbox chain
(interfaces/sandbox/localnet_host.py): its own chain calls are in-process, and the localnet's JSON-RPC is served on
that listener for everyone else. With in-process locks (no Redis) the worker also follows up pending settlements
(interfaces/runtime/followup.py, `runs_in_the_api_worker`): only here does a settle's lock exclude the follower."""

from __future__ import annotations

import dataclasses
import os
from wsgiref.types import WSGIApplication

from interfaces.config import load_config
from interfaces.container import build
from interfaces.http.console.app import by_listener
from interfaces.http.facilitator.app import create_app
from interfaces.runtime.closing import on_worker_exit
from interfaces.runtime.followup import runs_in_the_api_worker, start_follower
from interfaces.runtime.probes import Probes
from interfaces.wiring import api_collaborators, console_collaborators, probe_targets

localnet = None
if os.environ.get("PAYWARDEN_LOCALNET_BIND"):
    from interfaces.sandbox.localnet_host import LOCALNET_ACCOUNTS, HostedLocalnet, parse_accounts

    localnet = HostedLocalnet(parse_accounts(os.environ.get(LOCALNET_ACCOUNTS, "")))
    # The devnet chain is this sandbox, called in-process (the other processes use the RPC URL to reach it).
    container = build(dataclasses.replace(load_config(), devnet_rpc_url=""), sandbox=localnet.sandbox)
else:
    container = build(load_config())
on_worker_exit(container.close)
follower = start_follower(container) if runs_in_the_api_worker(container) else None
if follower is not None:
    on_worker_exit(follower.set)  # the pending settlements' follower stops before the stores close
probes = Probes(probe_targets(container))  # the API's /readyz and /metrics, and the console's overview
application: WSGIApplication = create_app(api_collaborators(container, probes=probes))
if os.environ.get("PAYWARDEN_CONSOLE_BIND"):
    from interfaces.http.console.app import create_app as create_console

    application = by_listener(application, os.environ["PAYWARDEN_CONSOLE_BIND"],
                              create_console(console_collaborators(container, probes=probes)))
if localnet is not None:
    application = by_listener(application, os.environ["PAYWARDEN_LOCALNET_BIND"], localnet.app)
