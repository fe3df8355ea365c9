"""Fixtures the integration tests share beside tests/conftest.py's."""

from __future__ import annotations

import pytest

from tests.webhook_receiver import start_receiver


@pytest.fixture
def receiver(tmp_path):
    """A webhook receiver over HTTPS (its CA in `receiver.ca_file`) that records what it is sent."""
    receiver, server = start_receiver(tmp_path)
    yield receiver
    server.shutdown()
    server.server_close()
