"""The key cache's freshness sources on real stores: a Redis subscription that the next lookup reads (and that
reads the view per request while Redis is down), and the embedded view's tracking position."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from domain.merchant import key_hash, key_prefix
from interfaces.adapters.accounts_cache import CachedAccounts, ChangePublisher, PushedChanges, TrackingPosition
from interfaces.config import Config
from interfaces.container import build
from tests.conftest import make_gateway
from tests.faults import PrivateRedis, wait_until


@pytest.mark.redis
def test_a_published_change_is_seen_by_the_next_lookup_and_a_stopped_redis_means_no_token(tmp_path: Path):
    with PrivateRedis(tmp_path) as server:
        changes = PushedChanges(server.url)
        wait_until(lambda: changes.current() is not None, what="the subscription's confirmation")
        before = changes.current()
        publisher = ChangePublisher(redis.Redis.from_url(server.url))
        publisher()
        # No waiting: Redis wrote the message to the subscriber before it answered the publisher.
        assert changes.current() not in (None, before)
        server.stop()
        assert changes.current() is None  # the subscription is broken: read the view per request
        assert changes.current() is None
        server.start()  # same port: the subscription comes back, with a token it never had before
        wait_until(lambda: changes.current() is not None, timeout=10, what="the subscription again")
        again = changes.current()
        publisher()
        assert changes.current() != again
        changes.close()


@pytest.mark.redis
def test_with_redis_a_revocation_reaches_the_cache_of_another_container(tmp_path: Path, sandbox, postgres_url,
                                                                        redis_url):
    gateway = make_gateway(tmp_path, sandbox, database_url=postgres_url, redis_url=redis_url)
    other = build(Config(data_dir=tmp_path / "other", database_url=postgres_url, redis_url=redis_url),
                  sandbox=sandbox)
    try:
        lookup = other.key_lookup()  # another process's API, in effect: its own subscription
        wait_until(lambda: lookup._freshness.current() is not None, what="the subscription")
        digest = key_hash(gateway.api_key)
        assert not lookup.get_key(digest).revoked
        gateway.container.merchants.revoke_key(key_prefix(gateway.api_key), "acme")
        gateway.container.refresh_accounts()
        assert lookup.get_key(digest).revoked
    finally:
        other.close()
        gateway.container.close()


def test_on_the_embedded_store_the_tracking_position_drops_the_cache_when_the_view_changes(tmp_path: Path, sandbox):
    gateway = make_gateway(tmp_path, sandbox)
    lookup = gateway.container.key_lookup()
    assert isinstance(lookup, CachedAccounts) and isinstance(lookup._freshness, TrackingPosition)
    digest = key_hash(gateway.api_key)
    position = lookup._freshness.current()
    assert not lookup.get_key(digest).revoked
    gateway.container.merchants.revoke_key(key_prefix(gateway.api_key), "acme")
    gateway.container.refresh_accounts()
    assert lookup._freshness.current() != position
    assert lookup.get_key(digest).revoked
    gateway.container.close()
