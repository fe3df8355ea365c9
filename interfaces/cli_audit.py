"""`paywarden audit …`: the auditor's commands (histories, rebuild-and-compare, the signed log, the chain)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from domain.merchant import merchant_id


def _container() -> Any:
    from interfaces.cli import _container as build

    return build()


def _print_history(events: list[dict[str, Any]], as_json: bool) -> None:
    from interfaces.audit.history import render

    if as_json:
        for e in events:
            print(json.dumps(e, sort_keys=True))
    elif events:
        print(render(events))


def payment(args: argparse.Namespace) -> int:
    from interfaces.audit.history import history, payment_ids
    from projections.payment_list import PaymentListProjection
    from projections.runner import catch_up

    c = _container()
    catch_up(c.payments, PaymentListProjection(c.payment_list))  # look-ups by handle see every payment
    ids = payment_ids(args.handle, c.payments, c.payment_list)
    if not ids:
        print(f"paywarden: no payment is named by {args.handle}", file=sys.stderr)
        return 1
    for i in ids:
        _print_history(history(c.payments, i), args.json)
    return 0


def merchant(args: argparse.Namespace) -> int:
    from interfaces.audit.history import history

    c = _container()
    events = history(c.merchants, merchant_id(args.name))
    if not events:
        print(f"paywarden: no merchant {args.name}", file=sys.stderr)
        return 1
    _print_history(events, args.json)
    return 0


def rebuild(args: argparse.Namespace) -> int:
    from interfaces.audit.rebuild import rebuild_all

    c = _container()
    different = 0
    for result in rebuild_all(c, check=args.check):
        for line in result.differences:
            print(line)
        different += len(result.differences)
        verdict = "" if not args.check else (" equal" if not result.differences else
                                              f" {len(result.differences)} difference(s)")
        print(f"{result.name}: {result.rows} events replayed into a fresh copy;{verdict}", file=sys.stderr)
    return 1 if different else 0


def add_parser(commands: Any) -> None:
    audit = commands.add_parser("audit", help="the auditor's tools").add_subparsers(dest="action", required=True)
    p = audit.add_parser("payment", help="a payment's events in order, by payment id, idempotency key, "
                                         "transaction signature or payment hash")
    p.add_argument("handle")
    p.add_argument("--json", action="store_true", help="one JSON object per event and line")
    p.set_defaults(func=payment)
    m = audit.add_parser("merchant", help="a merchant account's events in order")
    m.add_argument("name")
    m.add_argument("--json", action="store_true", help="one JSON object per event and line")
    m.set_defaults(func=merchant)
    r = audit.add_parser("rebuild", help="replay the event store into fresh copies of every read model "
                                         "(the live ones are only read)")
    r.add_argument("--check", action="store_true", help="compare each copy with the live read model row by row; "
                                                         "exit 1 on any difference")
    r.set_defaults(func=rebuild)
