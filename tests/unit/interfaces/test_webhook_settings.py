"""The delivery worker's settings from the environment, and how it reads a receiver's Retry-After."""

from __future__ import annotations

import email.utils

import pytest

from domain.webhook import RETRY_SCHEDULE
from interfaces.adapters.webhook_sender import Answer
from interfaces.config import ConfigError
from interfaces.runtime.webhook_worker import load_settings, retry_after


def test_defaults_are_the_standard_schedule_15_second_attempts_and_8_senders():
    settings = load_settings({})
    assert settings.schedule == RETRY_SCHEDULE and settings.timeout_seconds == 15 and settings.concurrency == 8
    assert settings.lease_seconds == 15 * 8 + 30 and settings.ca_file is None


def test_the_schedule_and_bounds_are_configurable_and_checked():
    settings = load_settings({"PAYWARDEN_WEBHOOK_SCHEDULE": "0,0.5,2", "PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS": "3",
                              "PAYWARDEN_WEBHOOK_CONCURRENCY": "2", "PAYWARDEN_WEBHOOK_CA_FILE": "/etc/ca.pem"})
    assert settings.schedule == (0, 0.5, 2) and settings.lease_seconds == 36 and settings.ca_file == "/etc/ca.pem"
    for bad in ({"PAYWARDEN_WEBHOOK_SCHEDULE": "0,-1"}, {"PAYWARDEN_WEBHOOK_SCHEDULE": "soon"},
                {"PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS": "0"}, {"PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS": "600"},
                {"PAYWARDEN_WEBHOOK_CONCURRENCY": "0"},
                {"PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS": "10", "PAYWARDEN_WEBHOOK_LEASE_SECONDS": "5"}):
        with pytest.raises(ConfigError, match="PAYWARDEN_WEBHOOK"):
            load_settings(bad)


def test_retry_after_is_read_on_429_and_503_only_in_seconds_or_as_a_date():
    now = 1_800_000_000.0
    assert retry_after(Answer(429, headers={"retry-after": "120"}), now) == 120
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after(Answer(503, headers={"retry-after": date}), now) == pytest.approx(30)
    assert retry_after(Answer(500, headers={"retry-after": "120"}), now) is None
    assert retry_after(Answer(429, headers={"retry-after": "whenever"}), now) is None
    assert retry_after(Answer(429), now) is None
