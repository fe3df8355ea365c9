"""`paywarden-bench reference`'s store figures per request (`StoreTrips`): the difference of two snapshots over the
requests; Redis scripts summed apart because each is one round trip whatever it runs inside."""

from __future__ import annotations

from interfaces.bench.reference import StoreTrips


class Snapshots(StoreTrips):
    def __init__(self, after: dict[str, int]) -> None:
        super().__init__("postgresql://unused", "unused", "redis://unused", settle_seconds=0)
        self.after = after

    def snapshot(self) -> dict[str, int]:
        return self.after


def test_per_request_is_the_difference_over_the_requests_with_the_scripts_summed():
    before = {"PostgreSQL transactions": 100, "Redis evalsha": 10, "Redis get": 7, "Redis ping": 3}
    after = {"PostgreSQL transactions": 300, "Redis evalsha": 610, "Redis eval": 10, "Redis get": 1007,
             "Redis ping": 4}
    figures = Snapshots(after).per_request(before, 200)
    assert figures == {"Redis scripts": 3.05, "Redis get": 5.0, "Redis evalsha": 3.0, "PostgreSQL transactions": 1.0,
                       "Redis eval": 0.05}  # ping: 1 in 200 requests, below 0.01 each, left out
    assert list(figures)[:2] == ["Redis scripts", "Redis get"]  # the scripts first, then the most asked
