"""`paywarden merchant|key|capability|domain …`: the account commands, calling the same application commands as
the console. Listings read the accounts view (which holds every command's events once it returns); nothing prints a
key's secret except `key create`, once."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from domain.merchant import KEY_PATTERN, MerchantError, key_prefix
from domain.networks import DEVNET, KeyEnv

DEFAULT_CONSOLE_URL = "http://127.0.0.1:8404"
Containers = Callable[[], Any]
Command = Callable[[Any, argparse.Namespace], int]


def password_link(console_url: str, token: str) -> str:
    return f"{console_url or DEFAULT_CONSOLE_URL}/password?token={token}"


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _password(args: argparse.Namespace) -> str | None:
    if not getattr(args, "password_stdin", False):
        return None
    return sys.stdin.readline().rstrip("\r\n")


def _login(c: Any, name: str, args: argparse.Namespace) -> None:
    token = c.merchants.add_login(name, args.email, password=_password(args))
    if token is None:
        print(f"login {args.email} can log in to {c.config.console_url or DEFAULT_CONSOLE_URL}")
    else:
        print(f"login {args.email}: set its password within 7 days at (works once):")
        print(password_link(c.config.console_url, token))


def merchant_create(c: Any, args: argparse.Namespace) -> int:
    merchant = c.merchants.register(args.name)
    if not args.no_devnet:
        c.merchants.enable_capability(args.name, DEVNET.caip2)
    print(f"merchant {merchant.name} created ({merchant.id})")
    if args.email:
        _login(c, args.name, args)
    return 0


def merchant_add_login(c: Any, args: argparse.Namespace) -> int:
    _login(c, args.name, args)
    return 0


def merchant_password_link(c: Any, args: argparse.Namespace) -> int:
    token = c.merchants.invite(args.email)
    print(password_link(c.config.console_url, token))
    print("the previous link of this login no longer works", file=sys.stderr)
    return 0


def merchant_list(c: Any, args: argparse.Namespace) -> int:
    rows = [[m.name, m.created_at, "on" if m.discovery_enabled else "off",
             str(m.rate_limit_per_minute or "default"), str(m.keys), ", ".join(c.accounts.list_logins(m.merchant_id))]
            for m in c.accounts.list_merchants()]
    _table(rows, ["name", "created", "discovery", "rate/min", "active keys", "logins"])
    return 0


def _changed(action: Callable[[Any, argparse.Namespace], Any], message: str) -> Command:
    """A command that changes one fact: the application call, then one line saying what changed (`message`
    formatted with the arguments and the call's `result`)."""

    def run(c: Any, args: argparse.Namespace) -> int:
        result = action(c.merchants, args)
        print(message.format(result=result, **vars(args)))
        return 0
    return run


def _listing(query: Callable[[Any], Callable[[str], list[Any]]], header: list[str],
             row: Callable[[Any], list[Any]]) -> Command:
    """A command that prints one table of a merchant's rows from the accounts view."""

    def run(c: Any, args: argparse.Namespace) -> int:
        merchant = c.merchants.get_merchant(args.merchant)
        _table([row(r) for r in query(c)(str(merchant.id))], header)
        return 0
    return run


merchant_rate_limit = _changed(lambda m, a: m.set_rate_limit(a.name, a.per_minute),
                               "merchant {name}: {per_minute} requests per minute per key")
merchant_discovery = _changed(lambda m, a: m.set_discovery(a.name, a.state == "on"),
                              "merchant {name}: discovery {state}")
capability_disable = _changed(lambda m, a: m.disable_capability(a.merchant, a.id),
                              "{merchant}: capability {id} disabled")
domain_verify = _changed(lambda m, a: m.verify_domain(a.merchant, a.domain), "domain {domain} verified ({result})")
domain_remove = _changed(lambda m, a: m.remove_domain(a.merchant, a.domain), "domain {domain} removed")



def _keys_with_last_use(c: Any) -> Callable[[str], Any]:
    from projections.key_use import with_last_use  # the read model's module, imported by `key list` alone

    return lambda merchant_id: with_last_use(c.accounts.list_keys(merchant_id), c.key_uses)


key_list = _listing(_keys_with_last_use,
                    ["prefix", "env", "label", "service", "created", "last used", "revoked"],
                    lambda k: [k.prefix, k.env, k.label or "-", k.service or "-", k.created_at,
                               k.last_used_at or "never", k.revoked_at or "-"])
capability_list = _listing(lambda c: c.accounts.list_capabilities, ["id", "network", "scheme", "asset", "enabled"],
                           lambda r: [r.id, r.network, r.scheme, r.asset, r.enabled_at])
domain_list = _listing(lambda c: c.accounts.list_domains, ["domain", "status", "by", "TXT name", "TXT value"],
                       lambda d: [d.domain, d.status, d.method or "-", d.dns_name, d.dns_value])


def key_create(c: Any, args: argparse.Namespace) -> int:
    api_key, prefix = c.merchants.create_key(args.merchant, KeyEnv(args.env), label=args.label,
                                             service=args.service)
    print(api_key)
    print(f"key {prefix}… created for {args.merchant}; it is shown once, store it now", file=sys.stderr)
    return 0


def key_revoke(c: Any, args: argparse.Namespace) -> int:
    given = args.key.strip()
    prefix = key_prefix(given) if KEY_PATTERN.fullmatch(given) else given
    merchant = c.accounts.get_merchant_by_prefix(prefix)
    if merchant is None:
        raise MerchantError(f"no key with prefix {prefix}")
    row = c.accounts.get_merchant_key(str(c.merchants.get_merchant(merchant).id), prefix)
    if row is not None and row.revoked_at:
        print(f"key {prefix}… of {merchant} was already revoked at {row.revoked_at}")
        return 0
    c.merchants.revoke_key(prefix, merchant)
    print(f"key {prefix}… of {merchant} revoked")
    return 0


def capability_enable(c: Any, args: argparse.Namespace) -> int:
    enabled = c.merchants.enable_capability(args.merchant, args.network, args.asset)
    for warning in enabled.warnings:
        print(f"paywarden: warning: {warning}", file=sys.stderr)
    print(f"{args.merchant}: exact on {args.network} enabled (capability {enabled.capability_id})")
    return 0


def domain_add(c: Any, args: argparse.Namespace) -> int:
    found = c.merchants.add_domain(args.merchant, args.domain)
    print(f"domain {found.domain} added (pending). Prove control with either:")
    print(f"  DNS TXT record  {found.dns_name}  \"{found.dns_value}\"")
    print(f"  HTTPS file      {found.http_url}  containing {found.token}")
    print(f"then: paywarden domain verify --merchant {args.merchant} {found.domain}")
    return 0


def add_commands(commands: Any, containers: Containers) -> None:
    """Register the groups on the `paywarden` parser; each command gets a container from `containers()`."""

    def command(group: Any, name: str, func: Callable[[Any, argparse.Namespace], int], help: str) -> Any:
        sub = group.add_parser(name, help=help, description=help)
        sub.set_defaults(func=lambda args: func(containers(), args))
        return sub

    def login_arguments(p: Any, required: bool) -> None:
        p.add_argument("--email", required=required, help="owner login: prints a one-time password-setting link")
        p.add_argument("--password-stdin", action="store_true",
                       help="read the login's password from the first line of standard input instead")

    merchant = commands.add_parser("merchant", help="merchant accounts").add_subparsers(dest="action", required=True)
    create = command(merchant, "create", merchant_create, "register a merchant (devnet USDC enabled)")
    create.add_argument("name", help="lowercase a-z 0-9 . _ -, up to 63 characters")
    create.add_argument("--no-devnet", action="store_true", help="do not enable devnet USDC")
    login_arguments(create, required=False)
    login = command(merchant, "add-login", merchant_add_login, "add an owner login (email) to a merchant")
    login.add_argument("name", help="the merchant")
    login_arguments(login, required=True)
    link = command(merchant, "password-link", merchant_password_link,
                   "print a new one-time password-setting link for a login (the old one stops working)")
    link.add_argument("email", help="the login's email")
    command(merchant, "list", merchant_list, "list merchants: created, discovery, rate limit, keys, logins")
    rate = command(merchant, "set-rate-limit", merchant_rate_limit, "override one merchant's per-key rate limit")
    rate.add_argument("name", help="the merchant")
    rate.add_argument("--per-minute", type=int, required=True, help="requests per minute per key")
    discovery = command(merchant, "discovery", merchant_discovery, "turn discovery listing on or off")
    discovery.add_argument("name", help="the merchant")
    discovery.add_argument("state", choices=("on", "off"), help="on or off")

    key = commands.add_parser("key", help="API keys").add_subparsers(dest="action", required=True)
    kc = command(key, "create", key_create, "issue an API key (printed once)")
    kc.add_argument("--merchant", required=True, help="the merchant")
    kc.add_argument("--env", choices=("test", "live"), required=True,
                    help="test (devnet) or live (mainnet: refused where mainnet is not served)")
    kc.add_argument("--label", default="", help="a name to recognise the key by")
    kc.add_argument("--service", default="", help="scope the key to one of the merchant's proxy services (its id "
                    "or slug): it then pays only for that service's routes")
    kl = command(key, "list", key_list, "list a merchant's keys: prefix, env, label, created, last used, revoked")
    kl.add_argument("--merchant", required=True, help="the merchant")
    kr = command(key, "revoke", key_revoke, "revoke an API key, given whole or by its prefix (pw_test_XXXXXXXX)")
    kr.add_argument("key", metavar="KEY_OR_PREFIX", help="the whole key or its prefix")

    capability = commands.add_parser("capability", help="capabilities").add_subparsers(dest="action", required=True)
    ce = command(capability, "enable", capability_enable,
                 "enable exact payments on a network (and asset) for a merchant")
    ce.add_argument("--merchant", required=True, help="the merchant")
    ce.add_argument("--network", required=True, help="CAIP-2 id, e.g. " + DEVNET.caip2)
    ce.add_argument("--asset", help="token mint, base58 (default: the network's USDC)")
    cl = command(capability, "list", capability_list, "list a merchant's capabilities and their ids")
    cl.add_argument("--merchant", required=True, help="the merchant")
    cd = command(capability, "disable", capability_disable, "disable a capability by its id")
    cd.add_argument("--merchant", required=True, help="the merchant")
    cd.add_argument("id", help="the capability id (capability list)")

    domain = commands.add_parser("domain", help="verified domains").add_subparsers(dest="action", required=True)
    for name, func, text in (("add", domain_add, "claim a domain: prints the DNS record or file to publish"),
                             ("verify", domain_verify, "check the DNS record or HTTPS file and verify the domain"),
                             ("remove", domain_remove, "remove a domain")):
        d = command(domain, name, func, text)
        d.add_argument("--merchant", required=True, help="the merchant")
        d.add_argument("domain", help="the domain name, e.g. api.example.com")
    dl = command(domain, "list", domain_list, "list a merchant's domains and their status")
    dl.add_argument("--merchant", required=True, help="the merchant")
