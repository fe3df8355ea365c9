"""The in-memory moving window (`MemoryWindows`) answers as `limits`' own moving window over its memory storage:
the same admissions, the same `Retry-After` (from the library's window statistics), exact under racing threads."""

from __future__ import annotations

import math
import random
import threading
import time

import pytest
from limits import RateLimitItemPerSecond, parse, storage, strategies

from interfaces.http.common.ratelimit import MemoryWindows, RateLimited, RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.123

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(time, "time", fake)
    return fake


def test_the_same_answers_as_the_librarys_moving_window(clock):
    library = strategies.MovingWindowRateLimiter(storage.MemoryStorage())
    ours = MemoryWindows()
    items = [parse("3/second"), parse("5/minute"), parse("1/second")]
    rng = random.Random(16)
    admitted = refused = 0
    for _ in range(3000):
        clock.now += rng.uniform(0, 70) if rng.random() < 0.02 else rng.choice([0.0, rng.uniform(0, 0.3),
                                                                                rng.uniform(0, 2)])
        item, identity = rng.choice(items), ("key", rng.choice(["k1", "k2"]))
        take = rng.random() < 0.7  # a hit, or a test that takes nothing
        answer = ours.admit((item, identity, take))
        assert (answer is None) == (library.hit(item, *identity) if take else library.test(item, *identity))
        if answer is not None:  # the same Retry-After: until the library's oldest entry leaves the window
            reset, _ = library.get_window_stats(item, *identity)
            assert answer == (0, max(1, math.ceil(reset - clock.now)))
        if take:
            admitted, refused = admitted + (answer is None), refused + (answer is not None)
    assert admitted > 300 and refused > 300, (admitted, refused)


def test_the_first_full_window_refuses_and_nothing_is_taken_in_any(clock):
    windows, tested, taken = MemoryWindows(), parse("1/minute"), parse("2/minute")
    assert windows.admit((tested, ("auth", "a"), False), (taken, ("key", "k"), True)) is None
    assert windows.admit((tested, ("auth", "a"), True)) is None  # the tested window was left empty
    clock.now += 20
    assert windows.admit((tested, ("auth", "a"), False), (taken, ("key", "k"), True)) == (0, 40)
    assert windows.admit((taken, ("key", "k"), True)) is None  # the refused request took no entry of the key
    assert windows.admit((tested, ("auth", "b"), False), (taken, ("key", "k"), True)) == (1, 40)


def test_idle_keys_are_dropped_and_busy_ones_kept(clock):
    windows, item = MemoryWindows(), parse("2/minute")
    assert windows.admit((item, ("ip", "a"), True)) is None and windows.admit((item, ("ip", "b"), True)) is None
    clock.now += 50
    assert windows.admit((item, ("ip", "b"), True)) is None
    clock.now += MemoryWindows.SWEEP_SECONDS + 1  # "a" is 61 s old, "b"'s last hit 11 s
    assert windows.admit((item, ("ip", "c"), True)) is None
    assert set(windows._windows) == {item.key_for("ip", "b"), item.key_for("ip", "c")}
    assert windows.admit((item, ("ip", "b"), True)) is None  # its first hit left the window: one slot was free
    assert windows.admit((item, ("ip", "b"), True)) == (0, 49)


def test_racing_threads_are_admitted_exactly_the_budget():
    windows, item = MemoryWindows(), parse("20/minute")
    results: list[bool] = []
    start = threading.Barrier(50)

    def one() -> None:
        start.wait()
        results.append(windows.admit((item, ("key", "k"), True)) is None)

    threads = [threading.Thread(target=one) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 20


def test_the_limiter_on_memory_refuses_with_the_seconds_until_a_slot_frees(clock):
    limiter = RateLimiter("memory://", "2/minute", "1/minute")
    limiter.check_key("k", None)
    clock.now += 15
    limiter.check_key("k", None)
    clock.now += 10
    with pytest.raises(RateLimited) as refused:
        limiter.check_key("k", None)
    assert refused.value.retry_after == 35 and refused.value.scope == "key"
    limiter.check_key("k", 3)  # a merchant's override is a budget of its own
    clock.now += 35.5
    limiter.check_key("k", None)  # the first hit left the window
    limiter.auth_failed("203.0.113.5")
    with pytest.raises(RateLimited) as spent:
        limiter.admit_key("203.0.113.5", "k2", None)
    assert spent.value.scope == "auth" and spent.value.retry_after == 60


def test_window_keys_are_the_librarys_per_namespace_and_past_their_bound_made_again(clock):
    ours = MemoryWindows()
    ours.MAX_KEYS = 3
    per_second, elsewhere = parse("1/second"), RateLimitItemPerSecond(1, namespace="ELSEWHERE")
    assert per_second == elsewhere and per_second.key_for("k") != elsewhere.key_for("k")
    assert ours.admit((per_second, ("key", "k1"), True)) is None
    assert ours.admit((elsewhere, ("key", "k1"), True)) is None  # equal items, another namespace: its own window
    assert ours.admit((per_second, ("key", "k1"), True)) == (0, 1)
    for other in ("k2", "k3", "k4", "k5"):  # the kept keys pass their bound and are dropped
        assert ours.admit((per_second, ("key", other), True)) is None
    assert len(ours._keys) <= ours.MAX_KEYS
    assert ours.admit((per_second, ("key", "k1"), True)) == (0, 1)  # the window itself is still there
    clock.now += 1.01
    assert ours.admit((per_second, ("key", "k1"), True)) is None
