"""The merchant `paywarden bench --up` pays as, so that a load test never lands in a merchant's books: `bench`,
made on first use in the store of the `paywarden up` its JSON line describes."""

from __future__ import annotations

import os
from typing import Any

BENCH_MERCHANT = "bench"
BENCH_PER_MINUTE = 1_000_000


def bench_merchant_key(info: dict[str, Any]) -> str:
    """The test key of the merchant `bench` in the store of the `paywarden up` that `info` (its JSON line)
    describes: the merchant, its devnet capability, its limit and its key are made on first use, the key kept in
    the data directory (`bench-api-key`)."""
    from application.merchants import MerchantExistsError
    from domain.merchant import key_hash
    from domain.networks import DEVNET, KeyEnv
    from interfaces.cli import context

    if info.get("data_dir"):
        os.environ["PAYWARDEN_DATA_DIR"] = info["data_dir"]
    if info.get("database_url"):
        os.environ["PAYWARDEN_DATABASE_URL"] = info["database_url"]
    c = context.container()
    try:
        try:
            c.merchants.register(BENCH_MERCHANT)
            c.merchants.enable_capability(BENCH_MERCHANT, DEVNET.caip2)
            c.merchants.set_rate_limit(BENCH_MERCHANT, BENCH_PER_MINUTE)
        except MerchantExistsError:
            pass
        key_file = c.config.data_dir / "bench-api-key"
        if key_file.is_file():
            api_key = key_file.read_text().strip()
            record = c.accounts.get_key(key_hash(api_key))
            if record is not None and not record.revoked:
                return api_key
        api_key, _ = c.merchants.create_key(BENCH_MERCHANT, KeyEnv.TEST, label="paywarden bench")
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(api_key + "\n")
        return api_key
    finally:
        c.close()
