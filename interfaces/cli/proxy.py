"""`paywarden service …` and `paywarden route …`: the proxy's services and routes from the command line.

An upstream credential is never a command-line argument (it would sit in the process list and shell history):
`--upstream-auth HEADER` reads the value from standard input, one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from interfaces.cli import context
from interfaces.config import ConfigError
from interfaces.http.console.representation import route_json, service_json


def _container(args: argparse.Namespace | None = None) -> Any:
    """The container; with `args` naming a merchant, that merchant must exist (exit 2 otherwise, as everywhere)."""
    c = context.container()
    if args is not None and getattr(args, "merchant", None):
        c.merchants.get_merchant(args.merchant)  # MerchantNotFoundError: "no merchant named …"
    return c


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2))


def _secret_from_stdin(header: str) -> tuple[str, str]:
    if sys.stdin.isatty():
        print(f"value of {header} (one line): ", end="", file=sys.stderr, flush=True)
    value = sys.stdin.readline().rstrip("\r\n")
    return header, value


def service_create(args: argparse.Namespace) -> int:
    c = _container(args)
    auth = _secret_from_stdin(args.upstream_auth) if args.upstream_auth else None
    service = c.proxies.create_service(args.merchant, args.name, args.domain, args.subdomain or "",
                                       args.path_suffix or "", args.port, upstream_auth=auth, slug=args.slug,
                                       kind=args.kind)
    _print(service_json(service, c.config.proxy_url))
    return 0


def service_list(args: argparse.Namespace) -> int:
    c = _container(args)
    _print([service_json(s, c.config.proxy_url) for s in c.proxies.list_services(args.merchant)])
    return 0


def service_show(args: argparse.Namespace) -> int:
    c = _container(args)
    _print(service_json(c.proxies.get_service(args.merchant, args.id), c.config.proxy_url))
    return 0


def service_update(args: argparse.Namespace) -> int:
    c = _container(args)
    proxies, merchant = c.proxies, args.merchant
    sid = str(proxies.get_service(merchant, args.id).id)  # a slug given changes with a base-URL edit
    if args.name is not None:
        proxies.rename(merchant, sid, args.name)
    if any(v is not None for v in (args.domain, args.subdomain, args.path_suffix, args.port)):
        current = proxies.get_service(merchant, sid).base
        proxies.change_base_url(
            merchant, sid, args.domain if args.domain is not None else current.domain,
            args.subdomain if args.subdomain is not None else current.subdomain,
            args.path_suffix if args.path_suffix is not None else current.path_suffix,
            args.port if args.port is not None else current.port)
    if args.active is not None:
        proxies.set_active(merchant, sid, args.active == "on")
    if args.upstream_auth:
        proxies.set_upstream_auth(merchant, sid, *_secret_from_stdin(args.upstream_auth))
    if args.clear_upstream_auth:
        proxies.clear_upstream_auth(merchant, sid)
    if args.body_limit is not None:
        proxies.set_body_limit(merchant, sid, args.body_limit)
    if args.cookies is not None:
        proxies.set_pass_cookies(merchant, sid, args.cookies == "on")
    _print(service_json(proxies.get_service(merchant, sid), c.config.proxy_url))
    return 0


def service_delete(args: argparse.Namespace) -> int:
    c = _container(args)
    c.proxies.delete_service(args.merchant, args.id)
    print(f"service {args.id} deleted", file=sys.stderr)
    return 0


def route_add(args: argparse.Namespace) -> int:
    from interfaces.http.console.collaborators import default_pay_to
    from interfaces.sandbox.console import sandbox_wallet

    c = _container(args)
    terms: dict[str, Any] = {"settle": args.settle, "max_timeout_seconds": args.max_timeout_seconds,
                             "access": args.access, "access_seconds": args.access_seconds}
    if args.description:
        terms["description"] = args.description
    if args.mime_type:
        terms["mime_type"] = args.mime_type
    if args.bazaar:
        terms["bazaar"] = json.loads(args.bazaar)
    pay_to = args.pay_to or default_pay_to(c.proxies, args.merchant, sandbox_wallet(c.config))
    if pay_to is None:
        raise ConfigError(f"--pay-to is needed: no route of {args.merchant} names a wallet yet")
    route = c.proxies.add_route(args.merchant, args.service, method=args.method, path=args.path,
                                price=args.price, pay_to=pay_to, network_id=args.network, asset=args.asset,
                                **terms)
    _print(route_json(route))
    return 0


def route_list(args: argparse.Namespace) -> int:
    c = _container(args)
    _print([route_json(r) for r in c.proxies.get_service(args.merchant, args.service).routes.values()])
    return 0


def route_delete(args: argparse.Namespace) -> int:
    c = _container(args)
    c.proxies.remove_route(args.merchant, args.service, args.route_id)
    print(f"route {args.route_id} deleted", file=sys.stderr)
    return 0


def base_url_arguments(parser: Any, domain_help: str) -> None:
    """The service's base URL and upstream auth, the same on create and update."""
    parser.add_argument("--domain", help=domain_help)
    parser.add_argument("--subdomain", help="the subdomain in the service's base URL")
    parser.add_argument("--path-suffix", help="the path after the domain in the service's base URL")
    parser.add_argument("--port", type=int, help="sandbox localhost only: the upstream port")
    parser.add_argument("--upstream-auth", metavar="HEADER", help="inject HEADER; its value is read from stdin")


def add_commands(commands: Any) -> None:
    def command(group: Any, name: str, func: Any, help: str, *positionals: tuple[str, str],
                of_service: bool = False) -> Any:
        """One subcommand on a merchant's services or routes: its positional arguments, then --merchant (and
        --service for a service's routes)."""
        sub = group.add_parser(name, help=help)
        for argument, text in positionals:
            sub.add_argument(argument, help=text)
        sub.add_argument("--merchant", required=True, help="the merchant's name")
        if of_service:
            sub.add_argument("--service", required=True, help="the service's id or slug")
        sub.set_defaults(func=func)
        return sub

    one = ("id", "the service's id or slug")
    service = commands.add_parser("service", help="proxy services").add_subparsers(dest="action", required=True)
    create = command(service, "create", service_create, "register a service behind the proxy")
    create.add_argument("--name", required=True, help="the service's name")
    base_url_arguments(create, "a verified domain (default: the only one); localhost in sandbox mode")
    create.add_argument("--slug", help="operator only: a custom slug")
    create.add_argument("--kind", choices=("http", "mcp"), default="http",
                        help="http (priced routes, the default) or mcp (an MCP server; `paywarden tool` prices tools)")
    command(service, "list", service_list, "a merchant's services")
    command(service, "show", service_show, "one service", one)
    update = command(service, "update", service_update, "rename, (de)activate, move, set upstream auth or body limit",
                     one)
    update.add_argument("--name", help="the new name")
    update.add_argument("--active", choices=("on", "off"), help="on or off: whether the proxy serves it")
    base_url_arguments(update, "move it to another verified domain")
    update.add_argument("--clear-upstream-auth", action="store_true", help="stop injecting the upstream auth header")
    update.add_argument("--body-limit", type=int, help="request body limit in bytes (default 65536)")
    update.add_argument("--cookies", choices=("on", "off"),
                        help="on: pass the client's Cookie upstream and the upstream's Set-Cookie back (default off)")
    command(service, "delete", service_delete, "delete a service (its routes first)", one)

    route = commands.add_parser("route", help="priced routes of a service").add_subparsers(dest="action",
                                                                                           required=True)
    add = command(route, "add", route_add, "price a route (x402 pattern syntax: *, [param], :param, /*)",
                  of_service=True)
    add.add_argument("--method", default="GET", help="HTTP method (default GET)")
    add.add_argument("--path", required=True, help="the route's path pattern")
    add.add_argument("--price", type=int, required=True, help="atomic units (1 USDC = 1000000)")
    add.add_argument("--pay-to", help="the address paid (base58); default: the merchant's wallet, as its last route "
                                      "names it (the sandbox merchant: the wallet `up` made)")
    add.add_argument("--network", help="CAIP-2 network id (docs/proxy.md gives the default)")
    add.add_argument("--asset", help="token mint (default: the network's USDC)")
    add.add_argument("--description", help="what the route serves (in the 402 and the catalog)")
    add.add_argument("--mime-type", help="the response's MIME type")
    add.add_argument("--max-timeout-seconds", type=int, default=60, help="the payment's maxTimeoutSeconds (default 60)")
    add.add_argument("--settle", choices=("after", "before"), default="after",
                     help="settle after the upstream answers (default) or before forwarding")
    add.add_argument("--bazaar", help="discovery metadata as JSON")
    add.add_argument("--access", choices=("per-request", "once-paid"), default="per-request",
                     help="per-request (default: every request pays) or once-paid (a wallet that paid signs in "
                          "with Sign-In-With-X and comes back free)")
    add.add_argument("--access-seconds", type=int, help="once-paid only: how long the access lasts (a day pass: "
                                                          "86400); without it, for good")
    command(route, "list", route_list, "a service's routes", of_service=True)
    command(route, "delete", route_delete, "delete a route", ("route_id", "the route's id"), of_service=True)
