"""Pending settlements carried on while nobody waits for them.

A settle answered `settlement_pending` stays SUBMITTED until a settle is retried. This follower takes the SUBMITTED
payments from the payments read model and calls `Payments.follow_up` on each: the identical signed transaction is
re-sent while its blockhash lives, a confirmation is recorded (the merchant's next settle is then the one success),
and an expired or failed one ends FAILED with its reason. `follow_up` takes the payment's lock without waiting, so
a settle in progress always has precedence: the follower runs where that lock is seen (`runs_in_the_api_worker`).

The first pass runs as soon as the follower starts, not `INTERVAL_SECONDS` later: after a crash (every process
killed between a broadcast and its confirmation) the payments left SUBMITTED are reconciled at once, so the
merchants' retries find them CONFIRMED. A lock the dead process held lapses within its lease (a few seconds,
interfaces/adapters/redis.py); a payment still locked is tried again on the next pass.
"""

from __future__ import annotations

import logging
import threading

from interfaces.container import Container

log = logging.getLogger("paywarden.followup")

INTERVAL_SECONDS = 2.0
BATCH = 200


def runs_in_the_api_worker(container: Container) -> bool:
    """Where the follower runs: beside the settles whose locks it takes. Redis locks are every process's, so the
    projection worker runs it. In-process locks (the embedded store, one API worker) exclude only their own
    process's requests: run in the projection worker, the follower re-sent a payment the API worker had recorded
    and not yet sent, whose own send was then refused as already processed and the landed transfer recorded FAILED
    (`submission_failed`); so the API worker runs it (interfaces/http/facilitator/wsgi.py)."""
    return container.redis is None


def start_follower(container: Container) -> threading.Event:
    """The follower on a daemon thread (a greenlet under gevent); set the event returned to stop it."""
    stop = threading.Event()
    threading.Thread(target=follow_up_pending, args=(container, stop), name="settlement-followup",
                     daemon=True).start()
    return stop


def follow_up_once(container: Container, batch: int = BATCH) -> dict[str, int]:
    """One pass over the pending settlements; how many ended in each state."""
    if container.payment_list is None:
        return {}
    outcomes: dict[str, int] = {}
    for row in container.payment_list.get_page(state="SUBMITTED", limit=batch).items:
        state = container.payments.follow_up(row.idempotency_key)
        name = state.value if state is not None else "busy"
        outcomes[name] = outcomes.get(name, 0) + 1
    return outcomes


def follow_up_pending(container: Container, stop: threading.Event, interval: float = INTERVAL_SECONDS) -> None:
    """Until `stop`: a pass at once, then one every `interval` seconds; a failing pass (chain or store down) is
    logged, not fatal."""
    while not stop.is_set():
        try:
            if outcomes := follow_up_once(container):
                log.info("pending settlements followed up", extra={"outcomes": outcomes})
        except Exception:
            log.exception("following up pending settlements failed; retrying")
        stop.wait(interval)
