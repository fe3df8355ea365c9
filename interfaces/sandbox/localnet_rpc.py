"""The JSON-RPC 2.0 methods of the localnet and their wire encodings, shaped like a real validator's."""

from __future__ import annotations

import base64
import inspect
import logging
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from solders.account import Account
from solders.hash import Hash
from solders.message import Message, MessageV0
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

from domain.networks import Programs
from interfaces.adapters.chain.rpc import SIGNATURE_FAILURE, describe_error, preflight_failure
from interfaces.sandbox.chain import RECENT_BLOCKHASHES, Landed, Outcome, Sandbox, TokenBalance

DEVNET_GENESIS_HASH = "EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG"
SOLANA_CORE_VERSION = "2.2.0"
MAX_BODY_BYTES = 1 << 20
MAX_AIRDROP_LAMPORTS = 1000 * 10**9
MAX_FAUCET_USDC = Decimal(1_000_000)
FINALIZED_DEPTH = 32
SLOTS_PER_EPOCH = 432_000
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_log = logging.getLogger(__name__)


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _invalid(message: str) -> RpcError:
    return RpcError(-32602, message)


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
                raise _invalid("Invalid params: invalid type: map, expected a sequence")
            try:
                signature.bind(*params)
            except TypeError as exc:
                raise _invalid(f"Invalid params: {exc}") from None
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
        if (_config(config).get("minContextSlot") or 0) > slot:
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
            raise _invalid(f"invalid message: {exc}") from None
        valid = self._sandbox.is_blockhash_valid(str(parsed.recent_blockhash))
        return self._context(self._sandbox.fee_for(parsed) if valid else None, config)

    def rpc_getRecentPrioritizationFees(self, addresses: list | None = None) -> list:
        return []

    def rpc_getMinimumBalanceForRentExemption(self, size: int, config: dict | None = None) -> int:
        return self._sandbox.rent_exempt_minimum(int(size))

    # -- accounts ------------------------------------------------------------------------------------------

    def rpc_getAccountInfo(self, address: str, config: dict | None = None) -> dict:
        account = self._sandbox.account(str(_pubkey(address)))
        return self._context(_account_json(self._sandbox, account, _config(config)), config)

    def rpc_getMultipleAccounts(self, addresses: list, config: dict | None = None) -> dict:
        accounts = [self._sandbox.account(str(_pubkey(a))) for a in _list(addresses, 100)]
        return self._context([_account_json(self._sandbox, a, _config(config)) for a in accounts], config)

    def rpc_getBalance(self, address: str, config: dict | None = None) -> dict:
        return self._context(self._sandbox.sol_balance(str(_pubkey(address))), config)

    def rpc_getTokenAccountBalance(self, address: str, config: dict | None = None) -> dict:
        account = self._sandbox.account(str(_pubkey(address)))
        if account is None:
            raise _invalid("Invalid param: could not find account")
        balance = self._sandbox.token_balance_of(account)
        if balance is None:
            raise _invalid("Invalid param: not a Token account")
        return self._context(_ui_amount(balance.amount, balance.decimals), config)

    def rpc_requestAirdrop(self, address: str, lamports: int, config: dict | None = None) -> str:
        if type(lamports) is not int or not 0 < lamports <= MAX_AIRDROP_LAMPORTS:
            raise _invalid(f"Invalid params: airdrop lamports must be 1..{MAX_AIRDROP_LAMPORTS}")
        return self._sandbox.airdrop(str(_pubkey(address)), lamports)

    # -- transactions --------------------------------------------------------------------------------------

    def rpc_simulateTransaction(self, data: str, config: dict | None = None) -> dict:
        config = _config(config)
        tx, replacement = _decode_transaction(data, config), None
        sig_verify = bool(config.get("sigVerify"))
        if config.get("replaceRecentBlockhash"):
            if sig_verify:
                raise _invalid("sigVerify may not be used with replaceRecentBlockhash")
            blockhash, last_valid = self._sandbox.latest_blockhash()
            tx = _with_blockhash(tx, Hash.from_string(blockhash))
            replacement = {"blockhash": blockhash, "lastValidBlockHeight": last_valid}
        # The post-simulation accounts are converted only when the request asks for some (`accounts`).
        outcome = self._sandbox.simulate(tx, sig_verify=sig_verify, accounts=bool(config.get("accounts")))
        if outcome.err == "SignatureFailure":  # the RPC verifies before simulating, and says so as an error
            raise RpcError(-32003, SIGNATURE_FAILURE)
        value = _simulation_json(self._sandbox, outcome, config.get("accounts"))
        return self._context(value | {"replacementBlockhash": replacement}, config)

    def rpc_sendTransaction(self, data: str, config: dict | None = None) -> str:
        config = _config(config)
        skip_preflight = bool(config.get("skipPreflight"))
        outcome = self._sandbox.send(_decode_transaction(data, config), preflight=not skip_preflight)
        if not (outcome.ok or outcome.landed or skip_preflight):
            if outcome.err == "SignatureFailure":
                raise RpcError(-32003, SIGNATURE_FAILURE)
            raise RpcError(-32002, preflight_failure(outcome.err), _simulation_json(self._sandbox, outcome))
        # Past preflight a node answers the signature, whatever becomes of the transaction.
        return outcome.signature

    def rpc_getSignatureStatuses(self, signatures: list, config: dict | None = None) -> dict:
        search, slot = bool(_config(config).get("searchTransactionHistory")), self._sandbox.slot
        statuses: list[dict[str, Any] | None] = []
        for signature in _list(signatures, 256):
            landed = self._sandbox.transaction(str(signature))
            # Without a history search a node answers from its status cache of recent blockhashes only.
            if landed is None or (not search and slot - landed.slot > RECENT_BLOCKHASHES):
                statuses.append(None)
                continue
            final = slot - landed.slot >= FINALIZED_DEPTH
            statuses.append({"slot": landed.slot, "confirmations": None if final else slot - landed.slot,
                             "err": landed.err, "status": _status(landed.err),
                             "confirmationStatus": "finalized" if final else "confirmed"})
        return self._context(statuses, config)

    def rpc_getSignaturesForAddress(self, address: str, config: dict | None = None) -> list[dict]:
        config = _config(config)
        limit = int(config.get("limit") or 1000)
        if not 1 <= limit <= 1000:
            raise _invalid("limit is 1 to 1000")
        until = config.get("until")
        return [{"signature": landed.signature, "slot": landed.slot, "err": landed.err, "memo": None,
                 "blockTime": landed.block_time, "confirmationStatus": "confirmed"}
                for landed in self._sandbox.signatures_for(str(_pubkey(address)), until=until, limit=limit)]

    def rpc_getTransaction(self, signature: str, config: dict | str | None = None) -> dict | None:
        config = {"encoding": config} if isinstance(config, str) else _config(config)
        landed = self._sandbox.transaction(str(signature))
        if landed is None:
            return None
        legacy = isinstance(landed.transaction.message, Message)
        if not legacy and config.get("maxSupportedTransactionVersion") is None:
            raise RpcError(-32015, "Transaction version (0) is not supported by the requesting client. "
                           "Please try the request again with the following configuration parameter: "
                           '"maxSupportedTransactionVersion": 0')
        return {"slot": landed.slot, "blockTime": landed.block_time, "version": "legacy" if legacy else 0,
                "transaction": _transaction_json(landed.transaction, config.get("encoding") or "json"),
                "meta": _meta_json(landed)}


# -- the wire encoding of the sandbox's records -------------------------------------------------------------


def b58encode(data: bytes) -> str:
    number, text = int.from_bytes(data, "big"), ""
    while number:
        number, digit = divmod(number, 58)
        text = _B58[digit] + text
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + text


def b58decode(text: str) -> bytes:
    number = 0
    for char in text:
        number = number * 58 + _B58.index(char)  # ValueError on a character outside the alphabet
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\0" * (len(text) - len(text.lstrip("1"))) + body


def _config(config: Any) -> dict:
    if config is not None and not isinstance(config, dict):
        raise _invalid("Invalid params: invalid type: expected a configuration object")
    return config or {}


def _list(value: Any, limit: int) -> list:
    if not isinstance(value, list):
        raise _invalid("Invalid params: invalid type: expected a sequence")
    if len(value) > limit:
        raise _invalid(f"Too many inputs provided; max {limit}")
    return value


def _pubkey(value: Any) -> Pubkey:
    try:
        return Pubkey.from_string(value)
    except (ValueError, TypeError):
        raise _invalid("Invalid param: Invalid") from None


def _decode_transaction(data: Any, config: dict) -> VersionedTransaction:
    encoding = config.get("encoding", "base58")
    if encoding not in ("base58", "base64"):
        raise _invalid(f"Invalid params: unsupported encoding: {encoding}")
    try:
        raw = base64.b64decode(data, validate=True) if encoding == "base64" else b58decode(data)
        tx = VersionedTransaction.from_bytes(raw)
    except (ValueError, TypeError) as exc:
        raise _invalid(f"failed to deserialize VersionedTransaction: {exc}") from None
    try:
        tx.sanitize()
    except Exception:  # solders' sanitize error is no ValueError
        raise _invalid(f"invalid transaction: {describe_error('SanitizeFailure')}") from None
    return tx


def _with_blockhash(tx: VersionedTransaction, blockhash: Hash) -> VersionedTransaction:
    m = tx.message
    if isinstance(m, MessageV0):
        message: Any = MessageV0(m.header, m.account_keys, blockhash, m.instructions, m.address_table_lookups)
    else:
        h = m.header
        message = Message.new_with_compiled_instructions(
            h.num_required_signatures, h.num_readonly_signed_accounts, h.num_readonly_unsigned_accounts,
            m.account_keys, blockhash, m.instructions)
    return VersionedTransaction.populate(message, tx.signatures)


def _ui_amount(amount: int, decimals: int) -> dict:
    value = Decimal(amount).scaleb(-decimals)
    return {"amount": str(amount), "decimals": decimals, "uiAmount": float(value),
            "uiAmountString": format(value.normalize(), "f")}


def _account_json(sandbox: Sandbox, account: Account | None, config: dict) -> dict | None:
    if account is None:
        return None
    encoding, data, window = config.get("encoding", "binary"), bytes(account.data), config.get("dataSlice")
    if window:
        data = data[window.get("offset", 0) : window.get("offset", 0) + window.get("length", 0)]
    if encoding == "jsonParsed":
        encoded: Any = _parsed_token_data(sandbox, account) or [base64.b64encode(data).decode(), "base64"]
    elif encoding == "base64":
        encoded = [base64.b64encode(data).decode(), "base64"]
    elif encoding in ("base58", "binary"):
        if len(data) > 128:
            raise _invalid("Encoded binary (base 58) data should be less than 128 bytes, please use Base64 "
                           "encoding.")
        encoded = b58encode(data) if encoding == "binary" else [b58encode(data), "base58"]
    else:
        raise _invalid(f"Invalid params: unsupported encoding: {encoding}")
    return {"data": encoded, "executable": account.executable, "lamports": account.lamports,
            "owner": str(account.owner), "rentEpoch": account.rent_epoch, "space": len(account.data)}


def _parsed_token_data(sandbox: Sandbox, account: Account) -> dict | None:
    owner, data = str(account.owner), bytes(account.data)
    if owner not in Programs.TOKEN_PROGRAMS:
        return None
    program, space = ("spl-token" if owner == Programs.TOKEN else "spl-token-2022"), len(data)
    if space == 82 or (space > 165 and data[165] == 1):  # a mint; Token-2022 extensions make it longer
        info: dict = {"decimals": data[44], "isInitialized": bool(data[45]),
                      "mintAuthority": str(Pubkey.from_bytes(data[4:36])) if data[0] else None,
                      "freezeAuthority": str(Pubkey.from_bytes(data[50:82])) if data[46] else None,
                      "supply": str(int.from_bytes(data[36:44], "little"))}
        return {"parsed": {"info": info, "type": "mint"}, "program": program, "space": space}
    balance = sandbox.token_balance_of(account)
    if balance is None:
        return None
    # The base layout: mint, owner, amount, delegate (COption), then the state byte and is_native (COption).
    info = {"isNative": data[109] == 1, "mint": balance.mint, "owner": balance.owner,
            "state": "frozen" if data[108] == 2 else "initialized",
            "tokenAmount": _ui_amount(balance.amount, balance.decimals)}
    return {"parsed": {"info": info, "type": "account"}, "program": program, "space": space}


def _simulation_json(sandbox: Sandbox, outcome: Outcome, accounts: dict | None = None) -> dict:
    listed = None
    if accounts:
        config = {"encoding": accounts.get("encoding", "base64")}
        listed = [_account_json(sandbox, outcome.accounts.get(a) or sandbox.account(str(_pubkey(a))), config)
                  for a in accounts.get("addresses", [])]
    returned = None
    if outcome.return_data:
        program, data = outcome.return_data
        returned = {"programId": program, "data": [base64.b64encode(data).decode(), "base64"]}
    return {"err": outcome.err, "logs": list(outcome.logs), "accounts": listed,
            "unitsConsumed": outcome.units_consumed, "returnData": returned, "innerInstructions": None,
            "replacementBlockhash": None}


def _status(err: Any) -> dict:
    return {"Ok": None} if err is None else {"Err": err}


def _transaction_json(tx: VersionedTransaction, encoding: str) -> Any:
    if encoding == "base64":
        return [base64.b64encode(bytes(tx)).decode(), "base64"]
    if encoding == "base58":
        return [b58encode(bytes(tx)), "base58"]
    m, h = tx.message, tx.message.header
    message = {"accountKeys": [str(k) for k in m.account_keys], "recentBlockhash": str(m.recent_blockhash),
               "header": {"numRequiredSignatures": h.num_required_signatures,
                          "numReadonlySignedAccounts": h.num_readonly_signed_accounts,
                          "numReadonlyUnsignedAccounts": h.num_readonly_unsigned_accounts},
               "instructions": [_instruction_json(ix) for ix in m.instructions]}
    if isinstance(m, MessageV0):
        message["addressTableLookups"] = [
            {"accountKey": str(t.account_key), "writableIndexes": list(t.writable_indexes),
             "readonlyIndexes": list(t.readonly_indexes)} for t in m.address_table_lookups]
    return {"signatures": [str(s) for s in tx.signatures], "message": message}


def _instruction_json(ix: Any, stack_height: int | None = None) -> dict:
    return {"programIdIndex": ix.program_id_index, "accounts": list(ix.accounts), "data": b58encode(ix.data),
            "stackHeight": stack_height}


def _token_balances_json(balances: tuple[TokenBalance, ...]) -> list[dict]:
    return [{"accountIndex": b.index, "mint": b.mint, "owner": b.owner, "programId": b.program,
             "uiTokenAmount": _ui_amount(b.amount, b.decimals)} for b in balances]


def _meta_json(landed: Landed) -> dict:
    inner = [{"index": i, "instructions": [_instruction_json(x.instruction, x.stack_height) for x in group]}
             for i, group in enumerate(landed.inner_instructions) if group]
    writable, readonly = landed.loaded_addresses
    return {"err": landed.err, "status": _status(landed.err), "fee": landed.fee,
            "preBalances": list(landed.pre_balances), "postBalances": list(landed.post_balances),
            "innerInstructions": inner, "logMessages": list(landed.logs),
            "preTokenBalances": _token_balances_json(landed.pre_token_balances),
            "postTokenBalances": _token_balances_json(landed.post_token_balances), "rewards": [],
            "loadedAddresses": {"writable": list(writable), "readonly": list(readonly)},
            "computeUnitsConsumed": landed.units_consumed}


# -- HTTP ----------------------------------------------------------------------------------------------------
