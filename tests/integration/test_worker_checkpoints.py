"""The projection worker checkpoints the embedded payments store's WAL (interfaces/adapters/sqlite.py,
`BackgroundCheckpoints`): verifies the API recorded reach the main database file with no checkpoint of the API's
own, so the API worker's automatic checkpoints find almost nothing left to copy (docs/performance.md, "Cost with
history")."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from interfaces.container import PAYMENTS_STORE, store_env
from interfaces.runtime import workers
from tests.sqlite_files import events_in_the_main_file_alone

EMBEDDED = pytest.mark.parametrize("store", ["embedded"], indirect=True)


@EMBEDDED
def test_the_projection_worker_checkpoints_the_payments_store_the_api_wrote(gateway, tmp_path):
    db = Path(store_env(gateway.container.config, PAYMENTS_STORE)["SQLITE_DBNAME"])
    for _ in range(3):
        assert gateway.post("/verify", gateway.body()).json["isValid"] is True
    before = events_in_the_main_file_alone(db, tmp_path)  # a few commits: far from the API's own checkpoint
    stop = threading.Event()
    worker = threading.Thread(target=workers.run, args=(gateway.container, (), stop))
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and events_in_the_main_file_alone(db, tmp_path) < before + 6:
            time.sleep(0.05)
        after = events_in_the_main_file_alone(db, tmp_path)
    finally:
        stop.set()
        worker.join(10)
    assert not worker.is_alive()
    assert after >= before + 6  # every verify's Received and Approved, copied by the worker
    assert not any(thread.name == "payments-checkpoints" for thread in threading.enumerate())
