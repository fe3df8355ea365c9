"""How the console's pages write values: times, counts, amounts and networks (the templates' globals and filters,
set by `pages.templates`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from domain.money import is_usdc, usdc
from domain.networks import network


def moment(value: str | float | None, empty: str = "—") -> str:
    """Every time a page shows, in one format: `2026-11-28 14:39:32 UTC` (to the second, UTC, as the webhook pages
    always wrote it), from the ISO 8601 the read models keep (or seconds since the epoch)."""
    if value is None or value == "":
        return empty
    try:
        at = datetime.fromtimestamp(value, UTC) if isinstance(value, int | float) else \
            datetime.fromisoformat(value)
    except (ValueError, OverflowError, OSError):
        return str(value)
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def plural(count: int, one: str, many: str | None = None) -> str:
    """`1 active API key`, `2 active API keys`, `0 payments`, `1,200 payments`."""
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def money(row: Any) -> str:
    """A payment row's amount: in USDC (exact, domain/money.py) when the asset is the network's USDC, else in
    atomic units of its asset."""
    if is_usdc(row.network, row.asset):
        return f"{usdc(row.amount)} USDC"
    return f"{row.amount:,} atomic units of {row.asset}"


def network_name(caip2: str) -> str:
    known = network(caip2)
    return known.name if known else caip2
