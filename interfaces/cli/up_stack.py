"""What `paywarden up`'s stack is made of, apart from starting and stopping it (`up.py`): the ports it needs, its
chain (our localnet, or an external RPC) and the wallets funded on it, and the sandbox merchant with its test key."""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
import threading
from typing import Any

import httpx

from domain.merchant import key_hash
from domain.networks import DEVNET, KeyEnv
from domain.proxy_service import SANDBOX_MERCHANT
from interfaces.config import Config, ConfigError

PAYER_USDC, PAYER_SOL = 100_000_000, 1_000_000_000
FEE_PAYER_SOL = 10_000_000_000


def bind_error(host: str, port: int) -> OSError | None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn and our servers bind
        try:
            probe.bind((host, port))
        except OSError as busy:
            return busy
    return None


def port_error(host: str, port: int, what: str, option: str, busy: OSError) -> ConfigError:
    reason = "it is already in use" if busy.errno == errno.EADDRINUSE else busy.strerror or str(busy)
    return ConfigError(f"cannot listen on {host}:{port} for {what}: {reason}; choose another {option}")


def chain(config: Config, args: argparse.Namespace, servers: list[Any]) -> tuple[str, Any]:
    """The devnet chain: an external RPC when PAYWARDEN_DEVNET_RPC_URL is set, else our localnet."""
    if config.devnet_rpc_url:
        return config.devnet_rpc_url, None
    from interfaces.sandbox.localnet import LocalnetServer

    try:
        localnet = LocalnetServer(args.host, args.rpc_port)
    except OSError as busy:
        raise port_error(args.host, args.rpc_port, "the localnet", "--rpc-port", busy) from None
    threading.Thread(target=localnet.serve_forever, name="localnet", daemon=True).start()
    servers.append(localnet)
    return localnet.url, localnet.sandbox


def hosts_localnet(config: Config, args: argparse.Namespace) -> bool:
    """The default: one API worker and no external chain, so the worker can own the sandbox and call it
    in-process. Several workers cannot share one in-memory chain: the localnet then runs in this process."""
    return not config.devnet_rpc_url and config.sandbox and args.workers == 1


def genesis(fee_payers: list[str], payer: str, pay_to: str) -> list[tuple[str, int, int | None]]:
    """(address, lamports, USDC atomic or None for no USDC account) funded on a new sandbox chain."""
    # the merchant's USDC account must exist (empty) to receive payments
    return [*((a, FEE_PAYER_SOL, None) for a in fee_payers), (payer, PAYER_SOL, PAYER_USDC), (pay_to, 0, 0)]


def fund(rpc_url: str, sandbox: Any, fee_payers: list[str], payer: str, pay_to: str) -> None:
    if sandbox is not None:
        for address, lamports, usdc in genesis(fee_payers, payer, pay_to):
            if lamports:
                sandbox.airdrop(address, lamports)
            if usdc is not None:
                sandbox.mint_usdc(address, usdc)
        return
    for address, usdc_text, sol in [*((a, "0", "10") for a in fee_payers), (payer, "100", "1"),
                                    (pay_to, "0", "0.01")]:
        try:
            answer = httpx.post(f"{rpc_url}/faucet", json={"address": address, "usdc": usdc_text, "sol": sol},
                                timeout=10)
        except httpx.HTTPError:
            answer = None
        if answer is None or answer.status_code != 200:
            print(f"paywarden up: no faucet at {rpc_url}; fund {address} yourself", file=sys.stderr)


def ensure_usdc_account(rpc_url: str, fee_payer: Any, owner: str) -> None:
    """Create `owner`'s devnet USDC account (idempotently), paid by the fee payer, on an external chain."""
    from solana.rpc.api import Client
    from solana.rpc.commitment import Confirmed
    from solders.instruction import AccountMeta, Instruction
    from solders.message import MessageV0
    from solders.pubkey import Pubkey
    from solders.transaction import VersionedTransaction

    from domain.exact import associated_token_address
    from domain.networks import Programs

    account = associated_token_address(owner, DEVNET.usdc_mint, Programs.TOKEN)
    rpc = Client(rpc_url, timeout=10)
    try:
        if rpc.get_account_info(Pubkey.from_string(account)).value is not None:
            return
        payer = fee_payer.pubkey()
        create = Instruction(Pubkey.from_string(Programs.ASSOCIATED_TOKEN), bytes([1]), [  # CreateIdempotent
            AccountMeta(payer, True, True), AccountMeta(Pubkey.from_string(account), False, True),
            AccountMeta(Pubkey.from_string(owner), False, False),
            AccountMeta(Pubkey.from_string(DEVNET.usdc_mint), False, False),
            AccountMeta(Pubkey.from_string("11111111111111111111111111111111"), False, False),
            AccountMeta(Pubkey.from_string(Programs.TOKEN), False, False)])
        blockhash = rpc.get_latest_blockhash().value.blockhash
        tx = VersionedTransaction(MessageV0.try_compile(payer, [create], [], blockhash), [fee_payer])
        signature = rpc.send_transaction(tx).value
        rpc.confirm_transaction(signature, Confirmed, sleep_seconds=0.2)
    except Exception as failed:  # an external chain we cannot write to: say so, the stack still starts
        print(f"paywarden up: could not create the USDC account {account} of the example merchant {owner} "
              f"on {rpc_url} ({type(failed).__name__}: {failed}); payments to it will fail until it exists",
              file=sys.stderr)


def sandbox_merchant(config: Config) -> str:
    """The sandbox merchant and its test key, made on first run; the key is kept in the data directory."""
    from application.merchants import MerchantExistsError
    from interfaces.container import build

    container = build(config)
    try:
        try:
            container.merchants.register(SANDBOX_MERCHANT)
            container.merchants.enable_capability(SANDBOX_MERCHANT, DEVNET.caip2)
        except MerchantExistsError:
            pass
        container.merchants.preverify_sandbox_domain(SANDBOX_MERCHANT)  # docs/console.md
        key_file = config.data_dir / "sandbox-api-key"
        if key_file.is_file():
            api_key = key_file.read_text().strip()
            record = container.accounts.get_key(key_hash(api_key))
            if record is not None and not record.revoked:
                return api_key
        api_key, _ = container.merchants.create_key(SANDBOX_MERCHANT, KeyEnv.TEST)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(api_key + "\n")
        return api_key
    finally:
        container.close()
