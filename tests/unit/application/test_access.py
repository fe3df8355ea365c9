"""The Access application's rules with fake ports: each refusal has its code, and a nonce grants once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from application.access import Access, AccessRefusedError, SignedIn
from domain.access import grant_id
from domain.proxy_service import Route

NOW = datetime(2026, 1, 10, 12, tzinfo=UTC)
URL = "https://gw.example/articles/a"
NETWORK = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
ADDRESS = "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU"


class SignIns:
    def __init__(self, signed: SignedIn) -> None:
        self.signed = signed

    def check(self, header: str, origin: str) -> SignedIn:
        return self.signed


class Paid:
    def __init__(self, at: datetime | None) -> None:
        self.at = at
        self.asked: list[tuple[str, str, str]] = []

    def last_paid(self, payer: str, service_id: str, route_id: str) -> datetime | None:
        self.asked.append((payer, service_id, route_id))
        return self.at


def route(**rule: object) -> Route:
    return Route.checked(id="r1", method="GET", path="/articles/*", price=10, network=NETWORK, asset=ADDRESS,
                         pay_to=ADDRESS, **{"access": "once-paid", **rule})


def access(paid_at: datetime | None = NOW - timedelta(hours=1), **signed: str) -> tuple[Access, Paid]:
    fields = {"address": ADDRESS, "uri": URL, "chain_id": NETWORK, "nonce": "n1", **signed}
    paid = Paid(paid_at)
    return Access(sign_ins=SignIns(SignedIn(**fields)), paid=paid, now=lambda: NOW), paid


def refused(app: Access, r: Route) -> str:
    with pytest.raises(AccessRefusedError) as refusal:
        app.enter("header", origin="https://gw.example", resource=URL, service_id="s1", route=r)
    return refusal.value.code


def test_a_paid_wallet_is_granted_once_per_nonce_and_the_grant_is_an_event():
    app, paid = access()
    grant = app.enter("header", origin="https://gw.example", resource=URL, service_id="s1", route=route())
    assert grant.address == ADDRESS and grant.until is None and paid.asked == [(ADDRESS, "s1", "r1")]
    recorded = app.get_grant(grant_id("n1"))
    assert recorded is not None and (recorded.service_id, recorded.route_id) == ("s1", "r1")
    assert refused(app, route()) == "siwx_nonce_used"


@pytest.mark.parametrize(("paid_at", "signed", "rule", "code"), [
    (None, {}, {}, "siwx_not_paid"),
    (NOW - timedelta(seconds=61), {}, {"access_seconds": 60}, "siwx_access_expired"),
    (NOW, {"uri": "https://gw.example/articles/b"}, {}, "siwx_other_resource"),
    (NOW, {"chain_id": "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"}, {}, "siwx_other_chain"),
])
def test_each_refusal_has_its_code_and_records_nothing(paid_at, signed, rule, code):
    app, _ = access(paid_at, **signed)
    assert refused(app, route(**rule)) == code
    assert app.get_grant(grant_id("n1")) is None


def test_a_day_pass_within_its_period_says_until_when():
    app, _ = access(NOW - timedelta(seconds=59))
    grant = app.enter("h", origin="https://gw.example", resource=URL, service_id="s1", route=route(access_seconds=60))
    assert grant.until == NOW + timedelta(seconds=1)


def test_a_per_request_route_takes_no_sign_in():
    app, _ = access()
    assert refused(app, route(access="per-request")) == "siwx_not_accepted"

