"""The key cache's freshness sources on real stores: a Redis subscription that the next lookup reads (and that
reads the view per request while Redis is down), and the embedded view's tracking position."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from domain.merchant import key_hash, key_prefix
from interfaces.adapters.accounts_cache import CachedAccounts, ChangePublisher, DataVersion, PushedChanges
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
        assert lookup.get_key(digest).revoked
    finally:
        other.close()
        gateway.container.close()


def test_on_the_embedded_store_the_data_version_drops_the_cache_when_the_view_changes(tmp_path: Path, sandbox):
    gateway = make_gateway(tmp_path, sandbox)
    lookup = gateway.container.key_lookup()
    assert isinstance(lookup, CachedAccounts) and isinstance(lookup._freshness, DataVersion)
    digest = key_hash(gateway.api_key)
    position = lookup._freshness.current()
    assert not lookup.get_key(digest).revoked
    assert lookup._freshness.current() == position  # reading the view changes nothing
    gateway.container.merchants.revoke_key(key_prefix(gateway.api_key), "acme")
    assert lookup._freshness.current() != position
    assert lookup.get_key(digest).revoked
    gateway.container.close()


def test_on_the_embedded_store_a_key_revoked_by_another_process_is_refused_on_the_very_next_request(tmp_path: Path,
                                                                                                    sandbox):
    """The API here, `paywarden key revoke` in a process of its own on the same data directory: the API's key
    cache, which has just served the key, refuses it on the next request, without waiting for anything."""
    gateway = make_gateway(tmp_path, sandbox)
    assert gateway.client.simulate_get("/supported", headers=gateway.headers).status_code == 200
    assert gateway.client.simulate_get("/supported", headers=gateway.headers).status_code == 200  # from the cache
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    revoke = subprocess.run([sys.executable, "-m", "interfaces.cli.main", "key", "revoke", key_prefix(gateway.api_key)],
                            env={**env, "PAYWARDEN_DATA_DIR": str(tmp_path)}, capture_output=True, text=True,
                            cwd=Path(__file__).parents[2], timeout=120)
    assert revoke.returncode == 0, revoke.stderr
    refused = gateway.client.simulate_get("/supported", headers=gateway.headers)
    assert refused.status_code == 401 and refused.json["error"] == "revoked_api_key"
    gateway.container.close()


def test_the_data_version_moves_on_another_connections_commit_and_a_file_it_cannot_read_means_no_token(
        tmp_path: Path):
    db = tmp_path / "view.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    version = DataVersion(str(db))
    first = version.current()
    assert first is not None and version.current() == first
    writer.execute("INSERT INTO t VALUES (1)")
    second = version.current()
    assert second not in (None, first)
    writer.execute("BEGIN")
    writer.execute("INSERT INTO t VALUES (2)")
    assert version.current() == second  # not committed yet
    writer.execute("COMMIT")
    assert version.current() not in (None, second)
    writer.close()
    version.close()
    assert DataVersion(str(tmp_path / "missing" / "view.db")).current() is None
