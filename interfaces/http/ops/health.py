"""GET /healthz (the process answers) and GET /readyz (what it depends on answers): no auth, no rate limit."""

from __future__ import annotations

import falcon

from interfaces.runtime.probes import OK, Probes


class HealthzResource:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}
        resp.cache_control = ["no-store"]


class ReadyzResource:
    """200 when every check is "ok"; 503 naming each check and what failed: `{"status", "checks": {name: …}}`."""

    def __init__(self, probes: Probes) -> None:
        self._probes = probes

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        checks = self._probes.readiness()
        ready = all(answer == OK for answer in checks.values())
        resp.status = falcon.HTTP_200 if ready else falcon.HTTP_503
        resp.media = {"status": "ok" if ready else "unavailable", "checks": checks}
        if (books := self._probes.books()) is not None:  # a detail: a mismatch is the auditor's, not the balancer's
            resp.media["books"] = {"last_reconciled": books["last_pass"], "mismatches": books["mismatches"],
                                   "latest": [m["detail"] for m in books["latest"][-3:]]}
        resp.cache_control = ["no-store"]
