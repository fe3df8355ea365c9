"""What every `paywarden` command module shares: the container a command works on, and the quick exit of the
workers `serve` starts. `main.py` imports the command modules; they import this, and this imports none of them."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from interfaces.config import beside_running_stack, load_config

if TYPE_CHECKING:  # the container's imports (stores, chains, Redis) wait until a command needs one
    from interfaces.container import Container


def container(*, beside_up: bool = True) -> Container:
    """The container of a command. `beside_up`: a command a person runs beside `paywarden up` prints the proxy's
    and console's addresses and uses the chain that `up` serves (interfaces.config.beside_running_stack); the
    workers `serve` starts (`project`, `webhooks`) take their configuration as given."""
    from interfaces.container import build
    from interfaces.runtime.startup import startup_error

    config = beside_running_stack(load_config()) if beside_up else load_config()
    try:  # a command a person runs verifies nothing: no in-process sandbox chain (LiteSVM) to build and fund
        return build(config, local_chain=not beside_up)
    except Exception as failure:  # an unreachable database or Redis: a message naming the variable, no traceback
        refused = startup_error(config, failure)
        if refused is None:
            raise
        raise refused from None


def leave(code: int) -> int:
    """A worker `serve` started, whose loop has ended (every batch committed or rolled back): leave without the
    interpreter's teardown, which under load took most of a second of `up`'s 2 s to stop."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
