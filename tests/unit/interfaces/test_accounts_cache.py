"""The in-process key cache trusts its records only while the freshness token stays the same."""

from __future__ import annotations

import dataclasses

from interfaces.adapters.accounts_cache import CachedAccounts
from projections.accounts import KeyRecord

RECORD = KeyRecord("h1", "pw_test_abcd1234", "m1", "acme", "test", False, None, True, frozenset())


class FakeView:
    def __init__(self) -> None:
        self.records = {"h1": RECORD}
        self.reads = 0

    def get_key(self, key_hash: str) -> KeyRecord | None:
        self.reads += 1
        return self.records.get(key_hash)


class Token:
    def __init__(self) -> None:
        self.value: int | None = 1

    def current(self) -> int | None:
        return self.value


def test_a_record_is_read_once_while_the_token_stays_the_same():
    view, token = FakeView(), Token()
    cache = CachedAccounts(view, token)
    assert cache.get_key("h1") == cache.get_key("h1") == RECORD
    assert view.reads == 1


def test_a_changed_token_makes_the_next_lookup_read_the_view_and_see_the_revocation():
    view, token = FakeView(), Token()
    cache = CachedAccounts(view, token)
    assert not cache.get_key("h1").revoked
    view.records["h1"] = dataclasses.replace(RECORD, revoked=True)
    token.value = 2  # the view changed: the revocation was pushed
    assert cache.get_key("h1").revoked
    assert view.reads == 2


def test_without_a_token_every_lookup_reads_the_view():
    view, token = FakeView(), Token()
    cache = CachedAccounts(view, token)
    cache.get_key("h1")
    token.value = None  # the push channel is down
    view.records["h1"] = dataclasses.replace(RECORD, revoked=True)
    assert cache.get_key("h1").revoked and cache.get_key("h1").revoked
    assert view.reads == 3


def test_unknown_keys_are_not_kept_and_the_cache_is_bounded():
    view, token = FakeView(), Token()
    cache = CachedAccounts(view, token, max_records=2)
    assert cache.get_key("nope") is None and cache.get_key("nope") is None
    assert view.reads == 2
    for i in range(5):
        view.records[f"k{i}"] = dataclasses.replace(RECORD, key_hash=f"k{i}")
        cache.get_key(f"k{i}")
    assert len(cache._records) <= 2
