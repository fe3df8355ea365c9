"""Configuration from the environment: every variable is prefixed `PAYWARDEN_`; a bad value stops start-up.

Every variable of README.md's table is read and checked here, so one bad value stops any command at once with one
line naming the variable (tests/integration/test_config_errors.py holds one bad value per row of the table).
Paths come out absolute: a script started in another working directory can open them.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from solders.keypair import Keypair

from domain.checkpoint import NoteError, parse_signing_key
from domain.cosignature import parse_witnesses
from domain.exact import ExactLimits


class ConfigError(Exception):
    """A configuration value is missing or malformed; the message names the variable."""


def without_password(url: str) -> str:
    """A database or Redis URL as it may be printed or logged: a password, in the URL's user part or as a
    `password=` query parameter (libpq reads both), shown as `***`."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if not parts.password and all(name != "password" for name, _ in query):
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1) if parts.password else parts.netloc
    masked = urlencode([(name, "***" if name == "password" else value) for name, value in query], safe="/*")
    return urlunsplit(parts._replace(netloc=netloc, query=masked))


@dataclass(frozen=True)
class Config:
    mode: str = "sandbox"
    data_dir: Path = Path("var")
    database_url: str = ""
    redis_url: str = ""
    devnet_rpc_url: str = ""
    mainnet_rpc_url: str = ""
    fee_payer_keypairs: tuple[Path, ...] = ()
    fee_payer_keys: tuple[str, ...] = ()  # secrets given in the environment (JSON byte lists or base58)
    anonymous: bool = True
    limits: ExactLimits = field(default_factory=ExactLimits)
    confirmation_budget_seconds: float = 15.0
    rate_limit_per_key: str = "100/minute"
    rate_limit_per_ip: str = "60/minute"
    trusted_proxies: tuple[str, ...] = ()
    # discovery lists public hosts only (docs/architecture.md#the-interface-contract)
    discovery_public_only: bool = False
    database_pool_max: int = 10
    database_timeout_seconds: int = 2
    lock_margin_seconds: float = 30.0
    fee_payer_min_lamports: int = 10_000_000  # below it on any served network, /readyz answers 503
    proxy_url: str = ""  # the proxy's public address, for gateway URLs; empty: from each request's Host
    log_level: str = "info"
    bind: str = "127.0.0.1:8402"  # `paywarden serve`'s default --bind
    workers: int = 1  # `paywarden serve`'s default --workers
    audit_checkpoint_seconds: int = 60  # the audit log follower signs a checkpoint this often when the log grew
    audit_signing_key: str = ""  # PRIVATE+KEY+name+keyid+key (sumdb/note signer key); empty: see docs/audit.md
    audit_origin: str = "paywarden.local/audit"  # the log's name in a sandbox key made on first use
    books_reconcile_seconds: int = 30  # the books are compared with the chain this often (docs/audit.md)
    audit_witnesses: str = ""  # `URL KEY[, URL KEY …]`: the witnesses that cosign each checkpoint (docs/audit.md)
    # The merchant console (docs/console.md)
    console_url: str = ""  # its public address: password links, the Origin check; empty: http://127.0.0.1:8404
    service_domains: tuple[str, ...] = ()  # the service's own domains: no merchant may claim them
    blocked_domains: tuple[str, ...] = ()  # the operator's list of domains no merchant may claim
    dns_nameservers: tuple[str, ...] = ()  # IP or IP:PORT for domain verification; empty: the system's

    @property
    def sandbox(self) -> bool:
        return self.mode == "sandbox"

    own_ports: frozenset[int] = frozenset()  # Paywarden's own listeners on this host: no sandbox service proxies there
    proxy_metrics_token: str = ""  # the proxy's metrics for `Bearer <token>`; empty: for a loopback peer only


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _url(env: Mapping[str, str], name: str, schemes: tuple[str, ...]) -> str:
    raw = env.get(name, "").strip()
    if raw and not raw.startswith(tuple(f"{s}://" for s in schemes)):
        raise ConfigError(f"{name} must start with {' or '.join(s + '://' for s in schemes)}, got {raw!r}")
    return raw


def _rate(env: Mapping[str, str], name: str, default: str) -> str:
    raw = env.get(name, "").strip() or default
    amount, _, per = raw.partition("/")
    if not amount.isdigit() or int(amount) < 1 or per not in ("second", "minute", "hour", "day"):
        raise ConfigError(f"{name} must read like 100/minute, got {raw!r}")
    return raw


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$PAYWARDEN_DATA_DIR`, else `$XDG_DATA_HOME/paywarden`, else `~/.local/share/paywarden`: one store
    whatever the working directory. Always absolute."""
    env = os.environ if env is None else env
    explicit = env.get("PAYWARDEN_DATA_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = env.get("XDG_DATA_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".local" / "share"
    return (base / "paywarden").absolute()


def _data_dir(env: Mapping[str, str]) -> Path:
    path = default_data_dir(env)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"PAYWARDEN_DATA_DIR must name a directory, and {path} is a file")
    return path


def _database_url(env: Mapping[str, str]) -> str:
    url = _url(env, "PAYWARDEN_DATABASE_URL", ("postgresql", "postgres", "sqlite"))
    if url.startswith("sqlite://") and url != "sqlite://":  # sqlite:///DIR: made absolute like every path
        return "sqlite://" + str(Path(url.removeprefix("sqlite://")).expanduser().absolute())
    return url


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = env.get(name, "").strip().lower() or default
    if raw not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def _networks(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    values = tuple(p.strip() for p in env.get(name, "").split(",") if p.strip())
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ConfigError(f"{name} must list IP addresses or CIDRs separated by commas, got {value!r}") from None
    return values


def _bind(env: Mapping[str, str], name: str, default: str) -> str:
    raw = env.get(name, "").strip() or default
    if raw.startswith("unix:") and len(raw) > len("unix:"):
        return raw
    host, _, port = raw.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{name} must read like 127.0.0.1:8402 (HOST:PORT) or unix:PATH, got {raw!r}")
    return raw


def _keypair_paths(env: Mapping[str, str], name: str) -> tuple[Path, ...]:
    paths = tuple(Path(p.strip()).expanduser().absolute() for p in env.get(name, "").split(",") if p.strip())
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{name} names {path}, which is not a readable file")
    return paths


def _secrets(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    secrets = tuple(k.strip() for k in env.get(name, "").split(";") if k.strip())
    for secret in secrets:
        try:
            if secret.startswith("["):
                Keypair.from_bytes(bytes(json.loads(secret)))
            else:
                Keypair.from_base58_string(secret)
        except (ValueError, TypeError):
            raise ConfigError(f"{name} holds a value that is not a Solana keypair "
                              "(a JSON list of 64 numbers or base58)") from None
    return secrets


def _audit_key(env: Mapping[str, str], name: str) -> str:
    raw = env.get(name, "").strip()
    if raw:
        try:
            parse_signing_key(raw)
        except NoteError as bad:
            raise ConfigError(f"{name}: {bad} (make one with `paywarden audit keygen NAME`)") from None
    return raw


def _audit_witnesses(env: Mapping[str, str], name: str) -> str:
    raw = env.get(name, "").strip()
    try:
        parse_witnesses(raw)
    except NoteError as bad:
        raise ConfigError(f"{name}: {bad}") from None
    return raw


def _audit_origin(env: Mapping[str, str], name: str, default: str) -> str:
    raw = env.get(name, "").strip() or default
    if any(c.isspace() or c == "+" for c in raw):
        raise ConfigError(f"{name} is a log name without spaces or '+', like paywarden.example.com/audit; got {raw!r}")
    return raw


def load_config(env: Mapping[str, str] | None = None, *, require: bool = True) -> Config:
    """The configuration; every value checked. `require=False` skips only the check that production names its
    fee payers (for commands that need none)."""
    env = os.environ if env is None else env
    mode = env.get("PAYWARDEN_MODE", "sandbox").strip() or "sandbox"
    if mode not in ("sandbox", "production"):
        raise ConfigError(f"PAYWARDEN_MODE must be sandbox or production, got {mode!r}")
    keypairs = _keypair_paths(env, "PAYWARDEN_FEE_PAYER_KEYPAIRS")
    if require and mode == "production" and not keypairs and not env.get("PAYWARDEN_FEE_PAYER_KEYS", "").strip():
        raise ConfigError("PAYWARDEN_FEE_PAYER_KEYPAIRS (or PAYWARDEN_FEE_PAYER_KEYS) is required in production")
    budget = _int(env, "PAYWARDEN_CONFIRMATION_BUDGET_MS", 15_000, minimum=0) / 1000
    return Config(
        mode=mode,
        data_dir=_data_dir(env),
        database_url=_database_url(env),
        redis_url=_url(env, "PAYWARDEN_REDIS_URL", ("redis", "rediss", "unix")),
        devnet_rpc_url=_url(env, "PAYWARDEN_DEVNET_RPC_URL", ("http", "https")),
        mainnet_rpc_url=_url(env, "PAYWARDEN_MAINNET_RPC_URL", ("http", "https")),
        fee_payer_keypairs=keypairs,
        fee_payer_keys=_secrets(env, "PAYWARDEN_FEE_PAYER_KEYS"),
        anonymous=_bool(env, "PAYWARDEN_ANONYMOUS", mode == "sandbox"),
        limits=ExactLimits(
            max_compute_unit_limit=_int(env, "PAYWARDEN_MAX_COMPUTE_UNIT_LIMIT", 400_000, minimum=1),
            max_compute_unit_price=_int(env, "PAYWARDEN_MAX_COMPUTE_UNIT_PRICE", 5_000_000),
        ),
        confirmation_budget_seconds=budget,
        rate_limit_per_key=_rate(env, "PAYWARDEN_RATE_LIMIT_PER_KEY", "100/minute"),
        rate_limit_per_ip=_rate(env, "PAYWARDEN_RATE_LIMIT_PER_IP", "60/minute"),
        trusted_proxies=_networks(env, "PAYWARDEN_TRUSTED_PROXIES"),
        discovery_public_only=_bool(env, "PAYWARDEN_DISCOVERY_PUBLIC_ONLY", mode == "production"),
        database_pool_max=_int(env, "PAYWARDEN_DATABASE_POOL_MAX", 10, minimum=2),
        database_timeout_seconds=_int(env, "PAYWARDEN_DATABASE_TIMEOUT_SECONDS", 2, minimum=1),
        lock_margin_seconds=_int(env, "PAYWARDEN_LOCK_MARGIN_MS", 30_000, minimum=100) / 1000,
        fee_payer_min_lamports=_int(env, "PAYWARDEN_FEE_PAYER_MIN_LAMPORTS", 10_000_000),
        proxy_url=_url(env, "PAYWARDEN_PROXY_URL", ("http", "https")),
        log_level=_choice(env, "PAYWARDEN_LOG_LEVEL", "info", LOG_LEVELS),
        bind=_bind(env, "PAYWARDEN_BIND", "127.0.0.1:8402"),
        workers=_int(env, "PAYWARDEN_WORKERS", 1, minimum=1),
        audit_checkpoint_seconds=_int(env, "PAYWARDEN_AUDIT_CHECKPOINT_SECONDS", 60, minimum=1),
        audit_signing_key=_audit_key(env, "PAYWARDEN_AUDIT_SIGNING_KEY"),
        audit_origin=_audit_origin(env, "PAYWARDEN_AUDIT_ORIGIN", "paywarden.local/audit"),
        audit_witnesses=_audit_witnesses(env, "PAYWARDEN_AUDIT_WITNESSES"),
        books_reconcile_seconds=_int(env, "PAYWARDEN_BOOKS_RECONCILE_SECONDS", 30, minimum=1),
        console_url=_url(env, "PAYWARDEN_CONSOLE_URL", ("http", "https")).rstrip("/"),
        service_domains=_names(env, "PAYWARDEN_SERVICE_DOMAINS"),
        blocked_domains=_names(env, "PAYWARDEN_BLOCKED_DOMAINS"),
        dns_nameservers=_nameservers(env, "PAYWARDEN_DNS_NAMESERVERS"),
        own_ports=_own_ports(env),
        proxy_metrics_token=_token(env, "PAYWARDEN_PROXY_METRICS_TOKEN"),
    )


def _token(env: Mapping[str, str], name: str) -> str:
    """A bearer token: empty, or at least 16 visible ASCII characters (a guessable one is refused)."""
    raw = env.get(name, "").strip()
    if raw and (len(raw) < 16 or not all(33 <= ord(c) < 127 for c in raw)):
        raise ConfigError(f"{name} must be at least 16 visible ASCII characters (no spaces), or empty")
    return raw


DEFAULT_PORTS = (8402, 8404, 8405, 8899)  # API, console, proxy, localnet: `up`'s and `serve`'s defaults


def _own_ports(env: Mapping[str, str]) -> frozenset[int]:
    """The ports Paywarden's own listeners use here (the defaults, and every bind and local URL configured)."""
    ports = set(DEFAULT_PORTS)
    # PAYWARDEN_OWN_PORTS: what `paywarden serve` passes every process it starts (each sees only its own bind)
    ports.update(int(p) for p in env.get("PAYWARDEN_OWN_PORTS", "").split(",") if p.strip().isdigit())
    for name in ("PAYWARDEN_BIND", "PAYWARDEN_CONSOLE_BIND", "PAYWARDEN_LOCALNET_BIND"):
        port = env.get(name, "").rpartition(":")[2]
        if port.isdigit():
            ports.add(int(port))
    for name in ("PAYWARDEN_CONSOLE_URL", "PAYWARDEN_PROXY_URL", "PAYWARDEN_DEVNET_RPC_URL"):
        try:
            url_port = urlsplit(env.get(name, "")).port
        except ValueError:
            continue
        if url_port:
            ports.add(url_port)
    return frozenset(ports)


def _names(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    names = tuple(n.strip().rstrip(".").lower() for n in env.get(name, "").split(",") if n.strip())
    for entry in names:
        if not all(part and part.replace("-", "").isalnum() for part in entry.split(".")):
            raise ConfigError(f"{name} must be comma-separated domain names, got {entry!r}")
    return names


def _nameservers(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    servers = tuple(s.strip() for s in env.get(name, "").split(",") if s.strip())
    for server in servers:
        host, _, port = server.rpartition(":") if server.count(":") == 1 else (server, "", "")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ConfigError(f"{name} must be comma-separated IP or IP:PORT, got {server!r}") from None
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise ConfigError(f"{name} has a bad port in {server!r}")
    return servers


# -- a running `paywarden up` -------------------------------------------------------------------------------------

RUNNING_STACK = "up.json"  # in the data directory, while `paywarden up` runs: the addresses it serves


def record_running_stack(config: Config, addresses: Mapping[str, str]) -> Path:
    """`paywarden up` writes the addresses it serves (and its pid), so a CLI beside it prints what it serves."""
    path = config.data_dir / RUNNING_STACK
    temporary = path.with_name(f".{RUNNING_STACK}.{os.getpid()}")
    temporary.write_text(json.dumps({"pid": os.getpid(), **addresses}))
    temporary.replace(path)
    return path


def forget_running_stack(config: Config) -> None:
    path = config.data_dir / RUNNING_STACK
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def running_stack(config: Config) -> dict[str, str]:
    """What a `paywarden up` running on this host over this data directory serves; empty when none runs (its file
    is left by an `up` that was killed: its pid is gone)."""
    try:
        found = json.loads((config.data_dir / RUNNING_STACK).read_text())
        os.kill(int(found["pid"]), 0)
    except PermissionError:
        pass  # alive, another user's
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    return {k: v for k, v in found.items() if isinstance(v, str)}


def beside_running_stack(config: Config) -> Config:
    """The configuration of a command run beside `paywarden up` (sandbox mode): the proxy's and console's
    addresses and the sandbox chain's RPC that `up` serves, wherever PAYWARDEN_PROXY_URL, PAYWARDEN_CONSOLE_URL and
    PAYWARDEN_DEVNET_RPC_URL do not say otherwise."""
    if not config.sandbox:
        return config
    stack = running_stack(config)
    if not stack:
        return config
    from dataclasses import replace

    return replace(config, proxy_url=config.proxy_url or stack.get("proxy_url", ""),
                   console_url=config.console_url or stack.get("console_url", ""),
                   devnet_rpc_url=config.devnet_rpc_url or stack.get("rpc_url", ""))
