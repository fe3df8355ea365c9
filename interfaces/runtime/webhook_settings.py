"""The webhook delivery worker's settings (PAYWARDEN_WEBHOOK_*), apart from the worker: `paywarden` checks them
before every command, and reading them must not import the worker, its read models and the container."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.webhook import RETRY_SCHEDULE
from interfaces.config import ConfigError


@dataclass(frozen=True)
class DeliverySettings:
    schedule: tuple[float, ...] = RETRY_SCHEDULE
    timeout_seconds: float = 15.0
    # Longer than a claimed batch can take (one endpoint's deliveries go one after another): a killed worker's
    # deliveries are retried once it ends.
    lease_seconds: float = 150.0
    concurrency: int = 8
    poll_seconds: float = 0.5
    # Leased deliveries one merchant may hold at once (every worker's counted): a merchant whose receivers are
    # slow or down occupies at most this many senders, whatever its backlog.
    merchant_share: int = 2
    ca_file: str | None = None  # extra CA bundle for receivers' certificates (a private CA, the tests' trustme)


def load_settings(env: Mapping[str, str] | None = None) -> DeliverySettings:
    """The PAYWARDEN_WEBHOOK_* settings; a bad one is a ConfigError naming that variable alone."""
    env = os.environ if env is None else env

    def number(name: str, default: float, kind: type = float) -> Any:
        raw = env.get(name, "").strip()
        if not raw:
            return default
        try:
            return kind(raw)
        except ValueError:
            what = "a whole number" if kind is int else "a number of seconds"
            raise ConfigError(f"{name} must be {what}, got {raw!r}") from None

    raw = env.get("PAYWARDEN_WEBHOOK_SCHEDULE", "").strip()
    try:
        schedule = tuple(float(s) for s in raw.split(",")) if raw else RETRY_SCHEDULE
    except ValueError:
        schedule = ()
    if not schedule or any(not s >= 0 for s in schedule):
        raise ConfigError(f"PAYWARDEN_WEBHOOK_SCHEDULE must be comma-separated seconds >= 0, got {raw!r}")
    timeout = number("PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS", 15.0)
    if not 0 < timeout <= 60:
        raise ConfigError(f"PAYWARDEN_WEBHOOK_TIMEOUT_SECONDS must be above 0 and at most 60, got {timeout:g}")
    concurrency = number("PAYWARDEN_WEBHOOK_CONCURRENCY", 8, int)
    if not 1 <= concurrency <= 64:
        raise ConfigError(f"PAYWARDEN_WEBHOOK_CONCURRENCY must be 1-64, got {concurrency}")
    lease = number("PAYWARDEN_WEBHOOK_LEASE_SECONDS", timeout * concurrency + 30)
    if not lease > timeout:
        raise ConfigError(f"PAYWARDEN_WEBHOOK_LEASE_SECONDS must be above the timeout ({timeout:g} s), "
                          f"got {lease:g}")
    return DeliverySettings(schedule, timeout, lease, concurrency, merchant_share=merchant_share(concurrency),
                            ca_file=env.get("PAYWARDEN_WEBHOOK_CA_FILE", "").strip() or None)


def merchant_share(concurrency: int) -> int:
    """A quarter of the senders (at least one): four merchants with dead receivers still leave every other
    merchant's deliveries a sender."""
    return max(1, concurrency // 4)
