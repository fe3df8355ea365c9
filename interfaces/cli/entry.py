"""Entry points that keep Ctrl-C quiet while Python is still importing.

Python turns SIGINT into KeyboardInterrupt from its first instruction, so a command interrupted while it imports
prints a traceback. Here SIGINT keeps its default action (end the process, silently) through the imports:

- `paywarden` (the console script) restores KeyboardInterrupt once `interfaces.cli.main` is imported; `main()` then
  ends a Ctrl-C quietly with status 130.
- `python -m interfaces.cli.entry MODULE [ARG ...]` runs MODULE as `__main__` with SIGINT's default action until the
  module installs its own handler (gunicorn's arbiter, `paywarden serve`'s supervisor). `paywarden up` and
  `paywarden serve` start their children through it, so Ctrl-C at any moment stops them without a traceback.
"""

import runpy
import signal
import sys


def paywarden() -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    from interfaces.cli.main import main

    signal.signal(signal.SIGINT, signal.default_int_handler)
    return main()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    module = sys.argv.pop(1)
    sys.argv[0] = module
    runpy.run_module(module, run_name="__main__", alter_sys=True)
