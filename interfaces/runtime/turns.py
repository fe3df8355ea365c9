"""Every keep-alive connection of a gevent worker takes its turn: the worker yields to the hub after each answer.

gunicorn's gevent worker serves a keep-alive connection in one greenlet, in a loop: read a request, answer it, read
the next. Nothing in a verify yields (SQLite, the in-process LiteSVM and the CPU work all run on the hub's thread),
and reading the next request does not yield either when its bytes are already there (a client that sends again as
soon as it has its answer). Under `paywarden bench`'s 32 clients one connection was served up to 45 times in a row
(counted in a `pre_request` hook) while others waited: the answers came every few milliseconds (p50 7 ms), but a
client whose connection was passed over waited over a second (p99 0.8-1.3 s, 48 to 154 verifies per client in a run
of 3,000). Waiting after each answer until the hub has nothing else to run puts the greenlet behind every
connection whose request is ready and every request still in progress: 93-94 verifies per client of 3,000, p99 ~2-4x
p50, as the reference facilitator's asyncio loop gives (docs/performance.md, "The tail").

The two other ways measured: `gevent.sleep(0)` may resume the greenlet before the loop polls for I/O (gevent's
documentation says so): in the test, a connection with 400 requests waiting kept the worker for ~50 answers while
another's one request waited (2 with `idle()`). A sleep until the loop's next iteration is as fair (2-7 in the test)
but admits the next request before the ones in progress finish: alternating with `idle()` (22:24-22:29, load 3-6),
it verified 397 and 369 /s against 585 and 467 embedded, 283 and 300 against 355 and 475 on PostgreSQL + Redis,
with 12-24% more CPU per verify in the API workers.
"""

from __future__ import annotations

from typing import Any

import gevent  # type: ignore[import-untyped]  # gevent ships no type information


def take_turns(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    """gunicorn's `post_request` hook: this connection's next request is read once the hub has polled for I/O and run
    every greenlet that was ready (libev runs idle watchers when nothing else is pending)."""
    gevent.idle()
