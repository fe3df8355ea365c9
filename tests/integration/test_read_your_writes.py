"""Read-your-writes (projections/read_your_writes.py): a command of a Leader returns once the read models of its log
hold its events, in a process where no projection worker runs; when the worker got there first there is nothing
left to apply, and the API workers' key caches are told all the same."""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.persistence import Tracking
from eventsourcing.system import RecordingEvent, RecordingEventReceiver

from application.merchants import Merchants
from domain.merchant import key_hash
from domain.networks import KeyEnv
from interfaces.config import Config
from interfaces.container import build_view, store_env
from projections.accounts import AccountsProjection, PostgresAccountsView, SqliteAccountsView
from projections.read_your_writes import ReadYourWrites
from projections.runner import catch_up


class CountingProjection(AccountsProjection):
    applied = 0

    def process_event(self, domain_event: Any, tracking: Any) -> None:
        type(self).applied += 1
        super().process_event(domain_event, tracking)


class WorkerFirst(RecordingEventReceiver[Any]):
    """The projection worker, applying a save's events before the command's own follower is prompted."""

    def __init__(self, merchants: Merchants, view: Any) -> None:
        self.merchants, self.view, self.on = merchants, view, False

    def receive_recording_event(self, new_recording_event: RecordingEvent[Any]) -> None:
        if self.on:
            catch_up(self.merchants, AccountsProjection(self.view))


def test_a_command_returns_once_its_read_model_holds_it_and_the_key_caches_are_told_even_after_the_worker(tmp_path):
    config = Config(data_dir=tmp_path)
    merchants = Merchants(store_env(config, "merchants"))
    view = build_view(config, "accounts", SqliteAccountsView)
    worker, told = WorkerFirst(merchants, view), []
    merchants.lead(worker)
    merchants.lead(ReadYourWrites(merchants, [CountingProjection(view)], then=lambda: told.append(True)))
    try:
        merchants.register("acme")
        api_key, prefix = merchants.create_key("acme", KeyEnv.TEST)
        # No worker ran: the commands' own follower applied their events before they returned.
        assert CountingProjection.applied == 2 and len(told) == 2
        assert view.get_key(key_hash(api_key)).merchant == "acme"

        worker.on = True
        merchants.revoke_key(prefix, "acme")
        # The worker applied the revocation first: nothing left to apply, and the caches are told anyway.
        assert CountingProjection.applied == 2 and len(told) == 3
        assert view.get_key(key_hash(api_key)).revoked
    finally:
        merchants.close()
        view.datastore.close()



@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_the_accounts_view_is_built_with_what_it_tells_after_each_commit(database, tmp_path, request):
    """`on_change` is given to the view at its construction (build_view), and runs after the commit of a batch
    and of a lone event: another view of the same store already reads what it is told about."""
    url = request.getfixturevalue("postgres_url") if database == "postgres" else ""
    config = Config(data_dir=tmp_path, database_url=url)
    merchants = Merchants(store_env(config, "merchants"))
    reader = build_view(config, "accounts", SqliteAccountsView)  # its own connections
    seen: list[str] = []

    def told() -> None:
        record = reader.get_key(key_hash(api_key))
        seen.append("none" if record is None else "revoked" if record.revoked else "live")

    view = build_view(config, "accounts", SqliteAccountsView, on_change=told)
    try:
        assert isinstance(view, PostgresAccountsView if url else SqliteAccountsView)
        merchants.register("acme")
        api_key, prefix = merchants.create_key("acme", KeyEnv.TEST)
        assert catch_up(merchants, AccountsProjection(view)) == 2  # one batch, one commit
        assert seen == ["live"]
        merchants.revoke_key(prefix, "acme")
        (notification,) = merchants.recorder.select_notifications(start=3, limit=1)
        AccountsProjection(view).process_event(merchants.mapper.to_domain_event(notification),
                                               Tracking(merchants.name, notification.id))  # alone, no batch
        assert seen == ["live", "revoked"]
    finally:
        merchants.close()
        view.datastore.close()
        reader.datastore.close()
