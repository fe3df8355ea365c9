"""`paywarden webhooks …`: the delivery worker, and merchants' webhook endpoints from the command line (the same
commands as the console's /api/v1/webhooks, through `interfaces.runtime.webhook_service`)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from datetime import UTC, datetime
from typing import Any

from interfaces.cli.context import container, leave
from interfaces.config import ConfigError
from interfaces.runtime.supervisor import exit_with_parent


def _service(args: argparse.Namespace | None = None) -> Any:
    """The webhook commands; with `args` naming a merchant, that merchant must exist (exit 2 otherwise)."""
    from interfaces.wiring import webhook_service

    c = container()
    if args is not None and getattr(args, "merchant", None):
        c.merchants.get_merchant(args.merchant)  # MerchantNotFoundError: "no merchant named …"
    return webhook_service(c)


def _print(args: argparse.Namespace, value: Any, line: str) -> None:
    print(json.dumps(value) if getattr(args, "json", False) else line)


def run(args: argparse.Namespace) -> int:
    from interfaces.runtime.observability import configure_logging
    from interfaces.runtime.webhook_worker import DeliveryWorker, load_settings

    configure_logging()
    settings = load_settings()
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    if args.exit_with_parent:
        exit_with_parent(stop)
    DeliveryWorker(container(beside_up=False), settings).run(stop)
    return leave(0) if args.exit_with_parent else 0


def create(args: argparse.Namespace) -> int:
    created = _service(args).create(args.merchant, args.url, _events(args.events))
    _print(args, created, f"webhook endpoint {created['id']} created for {args.merchant}: {created['url']}\n"
                          f"{created['secret']}")
    if not args.json:
        print("the signing secret is shown once: store it now", file=sys.stderr)
    return 0


def list_(args: argparse.Namespace) -> int:
    endpoints = _service(args).list(args.merchant)
    lines = [f"{e['id']}  {'enabled ' if e['enabled'] else 'disabled'}  {e['url']}  {','.join(e['events'])}"
             + (f"  ({e['disabledReason']})" if e["disabledReason"] else "") for e in endpoints]
    _print(args, endpoints, "\n".join(lines) or f"{args.merchant} has no webhook endpoints")
    return 0


def update(args: argparse.Namespace) -> int:
    enabled = True if args.enable else False if args.disable else None
    events = _events(args.events) if args.events is not None else None
    endpoint = _service(args).update(args.merchant, args.id, url=args.url, events=events, enabled=enabled)
    _print(args, endpoint, f"webhook endpoint {endpoint['id']}: {'enabled' if endpoint['enabled'] else 'disabled'}"
                           f", {endpoint['url']}, {','.join(endpoint['events'])}")
    return 0


def delete(args: argparse.Namespace) -> int:
    _service(args).delete(args.merchant, args.id)
    print(f"webhook endpoint {args.id} deleted")
    return 0


def rotate(args: argparse.Namespace) -> int:
    rotated = _service(args).rotate(args.merchant, args.id)
    _print(args, rotated, rotated["secret"])
    if not args.json:
        print("the new secret is shown once; the previous one keeps signing for 24 hours", file=sys.stderr)
    return 0


def test(args: argparse.Namespace) -> int:
    queued = _service(args).test(args.merchant, args.id)
    _print(args, queued, f"webhook.test {queued['id']} queued for {args.id}")
    return 0


def deliveries(args: argparse.Namespace) -> int:
    found = _service(args).deliveries(args.merchant, args.id, args.limit)
    lines = []
    for d in found:
        tried = ", ".join(f"{a['status'] or a['error'][:40]}" for a in d["attempts"]) or "not yet"
        lines.append(f"{_when(d['createdAt'])}  {d['id']}  {d['type']}  {d['status']}  attempts: {tried}")
    _print(args, found, "\n".join(lines) or "no deliveries")
    return 0


def resend(args: argparse.Namespace) -> int:
    _print(args, _service(args).resend(args.merchant, args.id, args.message), f"{args.message} will be sent again now")
    return 0


def replay(args: argparse.Namespace) -> int:
    since = _parse_time(args.since)
    replayed = _service(args).replay(args.merchant, args.id, since)
    _print(args, replayed, f"{replayed['replayed']} failed deliveries since {args.since} will be sent again")
    return 0


def _events(raw: str) -> list[str]:
    return [e.strip() for e in raw.split(",") if e.strip()]


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(raw: str) -> float:
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--since must be an ISO 8601 time such as 2026-11-23T12:00:00Z, got {raw!r}") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def add_commands(commands: Any) -> None:
    """Register `paywarden webhooks` on the CLI's sub-command parser."""
    p = commands.add_parser("webhooks", help="webhook endpoints, and the delivery worker (no action: run it)")
    p.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)
    actions = p.add_subparsers(dest="action", metavar="ACTION")

    def action(name: str, func: Any, help_text: str, *, endpoint: bool = True) -> argparse.ArgumentParser:
        a = actions.add_parser(name, help=help_text)
        a.add_argument("--merchant", required=True, help="the merchant's name")
        if endpoint:
            a.add_argument("id", help="the endpoint's id")
        a.add_argument("--json", action="store_true", help="print JSON")
        a.set_defaults(func=func)
        return a

    r = actions.add_parser("run", help="run the delivery worker until interrupted")
    r.add_argument("--exit-with-parent", action="store_true", help=argparse.SUPPRESS)
    r.set_defaults(func=run)
    c = action("create", create, "add an endpoint (prints its whsec_ secret once)", endpoint=False)
    c.add_argument("--url", required=True, help="the receiver's https:// URL")
    c.add_argument("--events", required=True, help="comma-separated event types, e.g. payment.confirmed")
    action("list", list_, "list the merchant's endpoints", endpoint=False)
    u = action("update", update, "change an endpoint's URL or events, enable or disable it")
    u.add_argument("--url", help="the new https:// URL")
    u.add_argument("--events", help="the new comma-separated event types")
    state = u.add_mutually_exclusive_group()
    state.add_argument("--enable", action="store_true", help="deliver to it again")
    state.add_argument("--disable", action="store_true", help="stop delivering to it")
    action("delete", delete, "delete an endpoint (its pending deliveries are cancelled)")
    action("rotate", rotate, "new signing secret (printed once); the previous one signs for 24 h more")
    action("test", test, "queue a webhook.test event to the endpoint")
    d = action("deliveries", deliveries, "the endpoint's latest deliveries and their attempts")
    d.add_argument("--limit", type=int, default=50, help="how many deliveries (default 50)")
    rs = action("resend", resend, "send one message to the endpoint again, now")
    rs.add_argument("message", help="the message id (msg_…)")
    rp = action("replay", replay, "send again every failed delivery created since a time", endpoint=False)
    rp.add_argument("--since", required=True, help="ISO 8601 time, e.g. 2026-11-23T12:00:00Z")
    rp.add_argument("--endpoint", dest="id", help="only this endpoint (default: all the merchant's)")
