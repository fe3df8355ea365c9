"""`paywarden payments export --merchant NAME`: a merchant's payments as CSV, the columns and rows of the console's
`GET /api/v1/payments/export` (projections/payment_export.py), streamed from the read models a page at a time."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from marshmallow import ValidationError

from domain.merchant import MerchantError
from interfaces.cli import context
from interfaces.config import ConfigError


def export(args: argparse.Namespace) -> int:
    from interfaces.http.console.collaborators import named_volume
    from interfaces.http.console.payments import export_filters
    from projections.payment_export import export_csv

    try:
        filters = export_filters({"from": args.since, "to": args.until, "state": args.state})
    except ValidationError as refused:
        messages = refused.normalized_messages()
        raise ConfigError("; ".join(f"--{k}: {' '.join(map(str, v))}" for k, v in messages.items())) from None
    container = context.container()
    try:
        merchant = container.accounts.get_merchant_by_name(args.merchant)
        if merchant is None:
            raise MerchantError(f"no merchant named {args.merchant}", field="merchant")
        out: Any = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115 - closed below
        try:
            volume = named_volume(container.payment_volume, container.proxies, container.config.proxy_url,
                                  args.merchant)
            for chunk in export_csv(container.payment_list, volume, merchant.merchant_id,
                                    state=filters["state"], since=filters["since"], until=filters["until"]):
                out.write(chunk)
            out.flush()
        finally:
            if args.output:
                out.close()
    finally:
        container.close()
    return 0


def add_commands(commands: Any) -> None:
    """Register `paywarden payments` on the CLI's sub-command parser."""
    p = commands.add_parser("payments", help="a merchant's payments (export as CSV)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    e = actions.add_parser("export", help="every payment of a merchant as RFC 4180 CSV, oldest first (the "
                                          "console's Export CSV)")
    e.add_argument("--merchant", required=True, help="the merchant's name")
    e.add_argument("--from", dest="since", help="received from this UTC day (2026-11-01) or instant, included")
    e.add_argument("--to", dest="until", help="received until this UTC day (included) or instant (excluded)")
    e.add_argument("--state", help="RECEIVED, APPROVED, REJECTED, SUBMITTED, CONFIRMED or FAILED")
    e.add_argument("--output", "-o", help="write to this file (default: standard output)")
    e.set_defaults(func=export)
