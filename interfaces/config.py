"""Configuration from the environment: every variable is prefixed `PAYWARDEN_`; a bad value stops start-up."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from domain.exact import ExactLimits


class ConfigError(Exception):
    """A configuration value is missing or malformed; the message names the variable."""


@dataclass(frozen=True)
class Config:
    mode: str = "sandbox"
    data_dir: Path = Path("var")
    database_url: str = ""
    redis_url: str = ""
    devnet_rpc_url: str = ""
    mainnet_rpc_url: str = ""
    fee_payer_keypairs: tuple[Path, ...] = ()
    fee_payer_keys: tuple[str, ...] = ()  # secrets given in the environment (JSON byte lists or base58)
    anonymous: bool = True
    limits: ExactLimits = field(default_factory=ExactLimits)
    confirmation_budget_seconds: float = 15.0
    rate_limit_per_key: str = "100/minute"
    rate_limit_per_ip: str = "60/minute"
    trusted_proxies: tuple[str, ...] = ()
    discovery_public_only: bool = False  # discovery lists public hosts only (SPEC.md: "in production")
    database_pool_max: int = 10
    database_timeout_seconds: int = 2
    lock_margin_seconds: float = 30.0
    fee_payer_min_lamports: int = 10_000_000  # below it on any served network, /readyz answers 503
    proxy_url: str = ""  # the proxy's public address, for gateway URLs; empty: from each request's Host

    @property
    def sandbox(self) -> bool:
        return self.mode == "sandbox"


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _url(env: Mapping[str, str], name: str, schemes: tuple[str, ...]) -> str:
    raw = env.get(name, "").strip()
    if raw and not raw.startswith(tuple(f"{s}://" for s in schemes)):
        raise ConfigError(f"{name} must start with {' or '.join(s + '://' for s in schemes)}, got {raw!r}")
    return raw


def _rate(env: Mapping[str, str], name: str, default: str) -> str:
    raw = env.get(name, "").strip() or default
    amount, _, per = raw.partition("/")
    if not amount.isdigit() or int(amount) < 1 or per not in ("second", "minute", "hour", "day"):
        raise ConfigError(f"{name} must read like 100/minute, got {raw!r}")
    return raw


def load_config(env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env
    mode = env.get("PAYWARDEN_MODE", "sandbox").strip() or "sandbox"
    if mode not in ("sandbox", "production"):
        raise ConfigError(f"PAYWARDEN_MODE must be sandbox or production, got {mode!r}")
    keypairs = tuple(Path(p.strip()) for p in env.get("PAYWARDEN_FEE_PAYER_KEYPAIRS", "").split(",") if p.strip())
    for path in keypairs:
        if not path.is_file():
            raise ConfigError(f"PAYWARDEN_FEE_PAYER_KEYPAIRS names {path}, which is not a readable file")
    if mode == "production" and not keypairs and not env.get("PAYWARDEN_FEE_PAYER_KEYS", "").strip():
        raise ConfigError("PAYWARDEN_FEE_PAYER_KEYPAIRS (or PAYWARDEN_FEE_PAYER_KEYS) is required in production")
    budget = _int(env, "PAYWARDEN_CONFIRMATION_BUDGET_MS", 15_000, minimum=0) / 1000
    return Config(
        mode=mode,
        data_dir=Path(env.get("PAYWARDEN_DATA_DIR", "").strip() or "var"),
        database_url=_url(env, "PAYWARDEN_DATABASE_URL", ("postgresql", "postgres", "sqlite")),
        redis_url=_url(env, "PAYWARDEN_REDIS_URL", ("redis", "rediss", "unix")),
        devnet_rpc_url=_url(env, "PAYWARDEN_DEVNET_RPC_URL", ("http", "https")),
        mainnet_rpc_url=_url(env, "PAYWARDEN_MAINNET_RPC_URL", ("http", "https")),
        fee_payer_keypairs=keypairs,
        fee_payer_keys=tuple(k.strip() for k in env.get("PAYWARDEN_FEE_PAYER_KEYS", "").split(";") if k.strip()),
        anonymous=_bool(env, "PAYWARDEN_ANONYMOUS", mode == "sandbox"),
        limits=ExactLimits(
            max_compute_unit_limit=_int(env, "PAYWARDEN_MAX_COMPUTE_UNIT_LIMIT", 400_000, minimum=1),
            max_compute_unit_price=_int(env, "PAYWARDEN_MAX_COMPUTE_UNIT_PRICE", 5_000_000),
        ),
        confirmation_budget_seconds=budget,
        rate_limit_per_key=_rate(env, "PAYWARDEN_RATE_LIMIT_PER_KEY", "100/minute"),
        rate_limit_per_ip=_rate(env, "PAYWARDEN_RATE_LIMIT_PER_IP", "60/minute"),
        trusted_proxies=tuple(p.strip() for p in env.get("PAYWARDEN_TRUSTED_PROXIES", "").split(",") if p.strip()),
        discovery_public_only=_bool(env, "PAYWARDEN_DISCOVERY_PUBLIC_ONLY", mode == "production"),
        database_pool_max=_int(env, "PAYWARDEN_DATABASE_POOL_MAX", 10, minimum=2),
        database_timeout_seconds=_int(env, "PAYWARDEN_DATABASE_TIMEOUT_SECONDS", 2, minimum=1),
        lock_margin_seconds=_int(env, "PAYWARDEN_LOCK_MARGIN_MS", 30_000, minimum=100) / 1000,
        fee_payer_min_lamports=_int(env, "PAYWARDEN_FEE_PAYER_MIN_LAMPORTS", 10_000_000),
        proxy_url=_url(env, "PAYWARDEN_PROXY_URL", ("http", "https")),
    )

