"""`paywarden tool list|price|unprice`: an `mcp` service's priced tools from the command line.

`tool list --upstream` asks the service's MCP server for its tools (`tools/list`) and marks the priced ones;
`tool price` copies the tool's description and input schema from there (the catalog's metadata) unless
`--no-upstream` says not to ask.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from domain.money import AmountError, parse_usdc
from domain.proxy_service import ProxyServiceError
from interfaces.cli import context
from interfaces.http.console.representation import tool_json


def _container(args: argparse.Namespace) -> Any:
    c = context.container()
    c.merchants.get_merchant(args.merchant)  # MerchantNotFoundError: "no merchant named ..."
    return c


def _upstream(c: Any, merchant: str, service_id: str) -> list[dict[str, Any]]:
    from interfaces.http.proxy.mcp_upstream import upstream_tools
    from interfaces.wiring import proxy_collaborators

    service = c.proxies.get_service(merchant, service_id)
    return upstream_tools(proxy_collaborators(c).outbound, c.proxies, service)


def tool_list(args: argparse.Namespace) -> int:
    c = _container(args)
    priced = c.proxies.get_service(args.merchant, args.service).tools
    if not args.upstream:
        print(json.dumps([tool_json(t) for t in priced.values()], indent=2))
        return 0
    listed = [{"name": t["name"], "description": t.get("description"), "priced": t["name"] in priced,
               **({"price": tool_json(priced[t["name"]])} if t["name"] in priced else {})}
              for t in _upstream(c, args.merchant, args.service)]
    print(json.dumps(listed, indent=2))
    return 0


def tool_price(args: argparse.Namespace) -> int:
    c = _container(args)
    if (args.price is None) == (args.price_usdc is None):
        raise ProxyServiceError("give the price once: --price-usdc (in USDC) or --price (in atomic units)",
                                field="price")
    try:
        price = args.price if args.price is not None else parse_usdc(args.price_usdc)
    except AmountError as bad:
        raise ProxyServiceError(str(bad), field="price") from None
    terms: dict[str, Any] = {"max_timeout_seconds": args.max_timeout_seconds}
    if args.description is not None:
        terms["description"] = args.description
    listed = None if args.no_upstream else _upstream(c, args.merchant, args.service)  # --no-upstream: not asked
    tool = c.proxies.price_tool(args.merchant, args.service, name=args.name, price=price, pay_to=args.pay_to,
                                network_id=args.network, asset=args.asset, listed=listed, **terms)
    print(json.dumps(tool_json(tool), indent=2))
    return 0


def tool_unprice(args: argparse.Namespace) -> int:
    c = _container(args)
    c.proxies.unprice_tool(args.merchant, args.service, args.name)
    print(json.dumps({"name": args.name, "priced": False}))
    return 0


def add_commands(commands: Any) -> None:
    tool = commands.add_parser("tool", help="priced tools of an mcp service").add_subparsers(dest="action",
                                                                                          required=True)

    def command(name: str, func: Any, help: str) -> Any:
        sub = tool.add_parser(name, help=help)
        sub.add_argument("--merchant", required=True, help="the merchant's name")
        sub.add_argument("--service", required=True, help="the mcp service's id")
        sub.set_defaults(func=func)
        return sub

    listing = command("list", tool_list, "the service's priced tools (--upstream: every tool its MCP server lists)")
    listing.add_argument("--upstream", action="store_true", help="ask the MCP server for its tools (tools/list)")
    price = command("price", tool_price, "price a tool by name (a new price replaces the old one)")
    price.add_argument("name", help="the tool's name, as the MCP server lists it")
    price.add_argument("--price-usdc", help="the price in USDC, e.g. 0.01")
    price.add_argument("--price", type=int, help="the price in atomic units (1 USDC = 1000000)")
    price.add_argument("--pay-to", required=True, help="the address paid (base58)")
    price.add_argument("--network", help="CAIP-2 network id (default: the only one enabled)")
    price.add_argument("--asset", help="token mint (default: the network's USDC)")
    price.add_argument("--description", help="what the tool does (default: the MCP server's description)")
    price.add_argument("--max-timeout-seconds", type=int, default=60, help="the payment's maxTimeoutSeconds")
    price.add_argument("--no-upstream", action="store_true",
                       help="do not ask the MCP server (no description or input schema from it)")
    unprice = command("unprice", tool_unprice, "make a tool free again")
    unprice.add_argument("name", help="the tool's name")
