"""The JSON-RPC 2.0 methods of the localnet, shaped like a real validator's (their wire encodings: localnet_wire.py)."""

from __future__ import annotations

import base64
import inspect
import logging
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from solders.hash import Hash
from solders.message import Message, MessageV0

from interfaces.adapters.chain.rpc import SIGNATURE_FAILURE, preflight_failure
from interfaces.sandbox import localnet_wire as wire
from interfaces.sandbox.chain import RECENT_BLOCKHASHES, Sandbox
from interfaces.sandbox.localnet_wire import RpcError

DEVNET_GENESIS_HASH = "EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG"
SOLANA_CORE_VERSION = "2.2.0"
MAX_BODY_BYTES = 1 << 20
MAX_AIRDROP_LAMPORTS = 1000 * 10**9
MAX_FAUCET_USDC = Decimal(1_000_000)
FINALIZED_DEPTH = 32
SLOTS_PER_EPOCH = 432_000
_log = logging.getLogger(__name__)


class _Rpc:
    """The JSON-RPC methods: `rpc_<method>` takes the request's positional params and returns its `result`."""

    def __init__(self, sandbox: Sandbox, genesis_hash: str) -> None:
        self._sandbox, self._genesis_hash = sandbox, genesis_hash
        # rpc_<method> and its signature, found once per method: `inspect.signature` took ~17 µs a call
        self._methods: dict[str, tuple[Callable[..., Any], inspect.Signature]] = {}

    def handle(self, request: Any) -> dict:
        request_id = request.get("id") if isinstance(request, dict) else None
        try:
            if not isinstance(request, dict) or request.get("jsonrpc") != "2.0":
                raise RpcError(-32600, "Invalid request")
            method, params = request.get("method"), request.get("params", [])
            found = self._method(method) if isinstance(method, str) else None
            if found is None:
                raise RpcError(-32601, "Method not found")
            handler, signature = found
            if not isinstance(params, list):
                raise wire.invalid("Invalid params: invalid type: map, expected a sequence")
            try:
                signature.bind(*params)
            except TypeError as exc:
                raise wire.invalid(f"Invalid params: {exc}") from None
            return {"jsonrpc": "2.0", "result": handler(*params), "id": request_id}
        except RpcError as exc:
            error = {"code": exc.code, "message": exc.message} | ({"data": exc.data} if exc.data else {})
        except Exception:
            _log.exception("localnet %s failed", request.get("method"))
            error = {"code": -32603, "message": "Internal error"}
        return {"jsonrpc": "2.0", "error": error, "id": request_id}

    def _method(self, name: str) -> tuple[Callable[..., Any], inspect.Signature] | None:
        found = self._methods.get(name)
        if found is None:
            handler = getattr(self, f"rpc_{name}", None)
            if handler is None:
                return None  # an unknown name is not remembered
            found = self._methods[name] = handler, inspect.signature(handler)
        return found

    def _context(self, value: Any, config: dict | None = None) -> dict:
        slot = self._sandbox.slot
        if (wire.config_object(config).get("minContextSlot") or 0) > slot:
            raise RpcError(-32016, "Minimum context slot has not been reached", {"contextSlot": slot})
        return {"context": {"apiVersion": SOLANA_CORE_VERSION, "slot": slot}, "value": value}

    # -- cluster -------------------------------------------------------------------------------------------

    def rpc_getHealth(self) -> str:
        return "ok"

    def rpc_getVersion(self) -> dict:
        return {"solana-core": SOLANA_CORE_VERSION, "feature-set": 3294202862}

    def rpc_getGenesisHash(self) -> str:
        return self._genesis_hash

    def rpc_getSlot(self, config: dict | None = None) -> int:
        return self._context(None, config)["context"]["slot"]

    rpc_getBlockHeight = rpc_getSlot  # no slot is ever skipped

    def rpc_getEpochInfo(self, config: dict | None = None) -> dict:
        slot = self.rpc_getSlot(config)
        return {"absoluteSlot": slot, "blockHeight": slot, "epoch": slot // SLOTS_PER_EPOCH,
                "slotIndex": slot % SLOTS_PER_EPOCH, "slotsInEpoch": SLOTS_PER_EPOCH,
                "transactionCount": self._sandbox.transaction_count}

    def rpc_getLatestBlockhash(self, config: dict | None = None) -> dict:
        blockhash, last_valid = self._sandbox.latest_blockhash()
        return self._context({"blockhash": blockhash, "lastValidBlockHeight": last_valid}, config)

    def rpc_isBlockhashValid(self, blockhash: str, config: dict | None = None) -> dict:
        return self._context(self._sandbox.is_blockhash_valid(blockhash), config)

    def rpc_getFeeForMessage(self, message: str, config: dict | None = None) -> dict:
        try:
            raw = base64.b64decode(message, validate=True)
            parsed = MessageV0.from_bytes(raw[1:]) if raw[:1] == b"\x80" else Message.from_bytes(raw)
        except ValueError as exc:
            raise wire.invalid(f"invalid message: {exc}") from None
        valid = self._sandbox.is_blockhash_valid(str(parsed.recent_blockhash))
        return self._context(self._sandbox.fee_for(parsed) if valid else None, config)

    def rpc_getRecentPrioritizationFees(self, addresses: list | None = None) -> list:
        return []

    def rpc_getMinimumBalanceForRentExemption(self, size: int, config: dict | None = None) -> int:
        return self._sandbox.rent_exempt_minimum(int(size))

    # -- accounts ------------------------------------------------------------------------------------------

    def rpc_getAccountInfo(self, address: str, config: dict | None = None) -> dict:
        account = self._sandbox.account(str(wire.pubkey(address)))
        return self._context(wire.account_json(self._sandbox, account, wire.config_object(config)), config)

    def rpc_getMultipleAccounts(self, addresses: list, config: dict | None = None) -> dict:
        accounts = [self._sandbox.account(str(wire.pubkey(a))) for a in wire.sequence(addresses, 100)]
        wanted = wire.config_object(config)
        return self._context([wire.account_json(self._sandbox, a, wanted) for a in accounts], config)

    def rpc_getBalance(self, address: str, config: dict | None = None) -> dict:
        return self._context(self._sandbox.sol_balance(str(wire.pubkey(address))), config)

    def rpc_getTokenAccountBalance(self, address: str, config: dict | None = None) -> dict:
        account = self._sandbox.account(str(wire.pubkey(address)))
        if account is None:
            raise wire.invalid("Invalid param: could not find account")
        balance = self._sandbox.token_balance_of(account)
        if balance is None:
            raise wire.invalid("Invalid param: not a Token account")
        return self._context(wire.ui_amount(balance.amount, balance.decimals), config)

    def rpc_requestAirdrop(self, address: str, lamports: int, config: dict | None = None) -> str:
        if type(lamports) is not int or not 0 < lamports <= MAX_AIRDROP_LAMPORTS:
            raise wire.invalid(f"Invalid params: airdrop lamports must be 1..{MAX_AIRDROP_LAMPORTS}")
        return self._sandbox.airdrop(str(wire.pubkey(address)), lamports)

    # -- transactions --------------------------------------------------------------------------------------

    def rpc_simulateTransaction(self, data: str, config: dict | None = None) -> dict:
        config = wire.config_object(config)
        tx, replacement = wire.decode_transaction(data, config), None
        sig_verify = bool(config.get("sigVerify"))
        if config.get("replaceRecentBlockhash"):
            if sig_verify:
                raise wire.invalid("sigVerify may not be used with replaceRecentBlockhash")
            blockhash, last_valid = self._sandbox.latest_blockhash()
            tx = wire.with_blockhash(tx, Hash.from_string(blockhash))
            replacement = {"blockhash": blockhash, "lastValidBlockHeight": last_valid}
        # The post-simulation accounts are converted only when the request asks for some (`accounts`).
        outcome = self._sandbox.simulate(tx, sig_verify=sig_verify, accounts=bool(config.get("accounts")))
        if outcome.err == "SignatureFailure":  # the RPC verifies before simulating, and says so as an error
            raise RpcError(-32003, SIGNATURE_FAILURE)
        value = wire.simulation_json(self._sandbox, outcome, config.get("accounts"))
        return self._context(value | {"replacementBlockhash": replacement}, config)

    def rpc_sendTransaction(self, data: str, config: dict | None = None) -> str:
        config = wire.config_object(config)
        skip_preflight = bool(config.get("skipPreflight"))
        outcome = self._sandbox.send(wire.decode_transaction(data, config), preflight=not skip_preflight)
        if not (outcome.ok or outcome.landed or skip_preflight):
            if outcome.err == "SignatureFailure":
                raise RpcError(-32003, SIGNATURE_FAILURE)
            raise RpcError(-32002, preflight_failure(outcome.err), wire.simulation_json(self._sandbox, outcome))
        # Past preflight a node answers the signature, whatever becomes of the transaction.
        return outcome.signature

    def rpc_getSignatureStatuses(self, signatures: list, config: dict | None = None) -> dict:
        search, slot = bool(wire.config_object(config).get("searchTransactionHistory")), self._sandbox.slot
        statuses: list[dict[str, Any] | None] = []
        for signature in wire.sequence(signatures, 256):
            landed = self._sandbox.transaction(str(signature))
            # Without a history search a node answers from its status cache of recent blockhashes only.
            if landed is None or (not search and slot - landed.slot > RECENT_BLOCKHASHES):
                statuses.append(None)
                continue
            final = slot - landed.slot >= FINALIZED_DEPTH
            statuses.append({"slot": landed.slot, "confirmations": None if final else slot - landed.slot,
                             "err": landed.err, "status": wire.status_json(landed.err),
                             "confirmationStatus": "finalized" if final else "confirmed"})
        return self._context(statuses, config)

    def rpc_getSignaturesForAddress(self, address: str, config: dict | None = None) -> list[dict]:
        config = wire.config_object(config)
        limit = int(config.get("limit") or 1000)
        if not 1 <= limit <= 1000:
            raise wire.invalid("limit is 1 to 1000")
        until = config.get("until")
        return [{"signature": landed.signature, "slot": landed.slot, "err": landed.err, "memo": None,
                 "blockTime": landed.block_time, "confirmationStatus": "confirmed"}
                for landed in self._sandbox.signatures_for(str(wire.pubkey(address)), until=until, limit=limit)]

    def rpc_getTransaction(self, signature: str, config: dict | str | None = None) -> dict | None:
        config = {"encoding": config} if isinstance(config, str) else wire.config_object(config)
        landed = self._sandbox.transaction(str(signature))
        if landed is None:
            return None
        legacy = isinstance(landed.transaction.message, Message)
        if not legacy and config.get("maxSupportedTransactionVersion") is None:
            raise RpcError(-32015, "Transaction version (0) is not supported by the requesting client. "
                           "Please try the request again with the following configuration parameter: "
                           '"maxSupportedTransactionVersion": 0')
        return {"slot": landed.slot, "blockTime": landed.block_time, "version": "legacy" if legacy else 0,
                "transaction": wire.transaction_json(landed.transaction, config.get("encoding") or "json"),
                "meta": wire.meta_json(landed)}


# -- HTTP ----------------------------------------------------------------------------------------------------
