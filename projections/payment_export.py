"""The payments as CSV (RFC 4180: comma-separated, double quotes where needed, CRLF line ends, a header row), for a
merchant's accountant: the console's `GET /api/v1/payments/export` and `paywarden payments export` write the same
columns from the same function.

Streamed: the rows are read from the payments read model a page at a time (a keyset query, oldest first) and each
page is written out before the next is read, so the memory an export needs does not grow with the payments
(docs/console.md, "Exporting payments"). Each payment's service and resource come from the payment_volume read
model, looked up a page at a time.

Safe to open in a spreadsheet: a text cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return (a payer
chooses its resource URL) is written with a single quote before it, so no spreadsheet evaluates it (`inert`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from domain.money import is_usdc, usdc
from projections.payment_list import PaymentListView, PaymentRow

COLUMNS = ("received", "settled", "failed", "state", "amount_atomic", "amount_usdc", "asset", "network", "payer",
           "pay_to", "transaction", "service", "resource", "payment_id")
PAGE = 1000


# What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection"): its first character.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBERS = frozenset({"amount_atomic", "amount_usdc"})  # written by us from a positive integer: left as numbers


def inert(cell: str) -> str:
    """`cell` as a spreadsheet shows it without evaluating it: one that starts as a formula would is prefixed with a
    single quote (OWASP's advice; the quote shows, the rest reads as text), any other is unchanged."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def row_of(p: PaymentRow, service: tuple[str, str] | None) -> list[str]:
    """One payment's cells, in COLUMNS' order; every text cell `inert` (a resource URL or a service comes from what
    the paying client sent), the amounts as numbers."""
    cells = [p.received_at, p.settled_at or "", p.failed_at or "", p.state, str(p.amount),
             usdc(p.amount, grouped=False) if is_usdc(p.network, p.asset) else "", p.asset, p.network,
             p.payer or "", p.pay_to, p.transaction_signature or "", service[0] if service else "",
             service[1] if service else "", p.payment_id]
    return [cell if column in NUMBERS else inert(cell) for column, cell in zip(COLUMNS, cells, strict=True)]


def export_csv(payments: PaymentListView, volume: Any, merchant_id: str, *, state: str | None = None,
               since: str | None = None, until: str | None = None, page: int = PAGE) -> Iterator[bytes]:
    """The CSV in chunks of UTF-8: the header, then one chunk per page of rows. `volume`: the payment_volume view
    (None: the service and resource columns are empty)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def flush() -> bytes:
        chunk = buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
        return chunk

    writer.writerow(COLUMNS)
    yield flush()
    for rows in payments.iter_pages(merchant_id, state=state, since=since, until=until, size=page):
        services = volume.get_services([r.payment_id for r in rows]) if volume is not None else {}
        writer.writerows(row_of(r, services.get(r.payment_id)) for r in rows)
        yield flush()
