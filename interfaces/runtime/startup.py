"""Start-up checks: before `paywarden serve` starts anything, what the configuration names answers; a failure to
reach it is one line naming the variable (exit 2), not a traceback."""

from __future__ import annotations

from interfaces.config import Config, ConfigError, without_password
from interfaces.runtime.probes import describe_failure


def startup_error(config: Config, failure: BaseException) -> ConfigError | None:
    """A clear, variable-naming ConfigError for a failure to reach what the configuration names (else None)."""
    import psycopg
    import redis
    from eventsourcing.persistence import PersistenceError

    if isinstance(failure, (psycopg.Error, PersistenceError)):
        where = without_password(config.database_url) if config.database_url else "(SQLite files)"
        return ConfigError(f"cannot reach the database PAYWARDEN_DATABASE_URL={where}: {describe_failure(failure)}")
    if isinstance(failure, redis.RedisError):
        return ConfigError(f"cannot reach Redis at PAYWARDEN_REDIS_URL: {describe_failure(failure)}")
    if isinstance(failure, OSError) and getattr(failure, "filename", None):
        return ConfigError(f"cannot use {failure.filename} (PAYWARDEN_DATA_DIR / PAYWARDEN_DATABASE_URL): "
                           f"{failure.strerror}")
    return None


def preflight(config: Config) -> None:
    """Before `paywarden serve` starts gunicorn: the database, Redis and the fee payer keypairs answer."""
    from interfaces.adapters.postgres import is_postgres
    from interfaces.container import build_fee_payers, sqlite_dir

    try:
        build_fee_payers(config)
        if is_postgres(config.database_url):
            import psycopg

            psycopg.connect(config.database_url, connect_timeout=config.database_timeout_seconds).close()
        else:
            sqlite_dir(config).mkdir(parents=True, exist_ok=True)
        if config.redis_url:
            from interfaces.adapters.redis import redis_client

            client = redis_client(config.redis_url)
            try:
                client.ping()
            finally:
                client.close()
    except ConfigError:
        raise
    except Exception as failure:
        refused = startup_error(config, failure)
        if refused is None:
            raise
        raise refused from None
