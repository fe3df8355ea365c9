"""Every keep-alive connection of a gevent worker takes its turn: the worker yields to the hub after each answer.

gunicorn's gevent worker serves a keep-alive connection in one greenlet, in a loop: read a request, answer it, read
the next. Nothing in a verify yields (SQLite, the in-process LiteSVM and the CPU work all run on the hub's thread),
and reading the next request does not yield either when its bytes are already there (a client that sends again as
soon as it has its answer). Under `paywarden bench`'s 32 clients one connection was served up to 45 times in a row
(counted in a `pre_request` hook) while others waited: the answers came every few milliseconds (p50 7 ms), but a
client whose connection was passed over waited over a second (p99 0.8-1.3 s, 48 to 154 verifies per client in a run
of 3,000). Sleeping until the loop's next iteration after each answer puts the greenlet behind every connection
whose request is ready: 92-96 verifies per client, p99 ~2.5x p50, as the reference facilitator's asyncio loop gives
(docs/performance.md, "The tail").

Neither of gevent's two ways to yield without a timer does it. `gevent.sleep(0)` may resume the greenlet before the
loop polls for I/O (gevent's documentation says so): in the test, a connection with 400 requests waiting kept the
worker for ~50 answers while another's one request waited (2-7 with the timer). `gevent.idle()` resumes only when
nothing else is pending, which a worker whose requests wait on PostgreSQL and Redis may not reach for a long time.
"""

from __future__ import annotations

from typing import Any

import gevent  # type: ignore[import-untyped]  # gevent ships no type information


def take_turns(worker: Any, req: Any, environ: Any, resp: Any) -> None:
    """gunicorn's `post_request` hook: before this connection's next request is read, the hub polls for I/O and
    runs every greenlet that is ready (any sleep above 0 waits for the loop's next iteration)."""
    gevent.sleep(0.000001)
