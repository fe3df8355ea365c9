"""The localnet's wire encodings: accounts, transactions, simulations and landed transactions written as a real
validator's JSON-RPC writes them, and the parameters read as it reads them (base58, base64, configuration objects).
A parameter that does not read is an `RpcError` with the validator's code and words."""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any

from solders.account import Account
from solders.hash import Hash
from solders.message import Message, MessageV0
from solders.pubkey import Pubkey
from solders.transaction import VersionedTransaction

from domain.networks import Programs
from interfaces.adapters.chain.rpc import describe_error
from interfaces.sandbox.chain import Landed, Outcome, Sandbox, TokenBalance

B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def invalid(message: str) -> RpcError:
    return RpcError(-32602, message)


def b58encode(data: bytes) -> str:
    number, text = int.from_bytes(data, "big"), ""
    while number:
        number, digit = divmod(number, 58)
        text = B58[digit] + text
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + text


def b58decode(text: str) -> bytes:
    number = 0
    for char in text:
        number = number * 58 + B58.index(char)  # ValueError on a character outside the alphabet
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\0" * (len(text) - len(text.lstrip("1"))) + body


def config_object(config: Any) -> dict:
    if config is not None and not isinstance(config, dict):
        raise invalid("Invalid params: invalid type: expected a configuration object")
    return config or {}


def sequence(value: Any, limit: int) -> list:
    if not isinstance(value, list):
        raise invalid("Invalid params: invalid type: expected a sequence")
    if len(value) > limit:
        raise invalid(f"Too many inputs provided; max {limit}")
    return value


def pubkey(value: Any) -> Pubkey:
    try:
        return Pubkey.from_string(value)
    except (ValueError, TypeError):
        raise invalid("Invalid param: Invalid") from None


def decode_transaction(data: Any, config: dict) -> VersionedTransaction:
    encoding = config.get("encoding", "base58")
    if encoding not in ("base58", "base64"):
        raise invalid(f"Invalid params: unsupported encoding: {encoding}")
    try:
        raw = base64.b64decode(data, validate=True) if encoding == "base64" else b58decode(data)
        tx = VersionedTransaction.from_bytes(raw)
    except (ValueError, TypeError) as exc:
        raise invalid(f"failed to deserialize VersionedTransaction: {exc}") from None
    try:
        tx.sanitize()
    except Exception:  # solders' sanitize error is no ValueError
        raise invalid(f"invalid transaction: {describe_error('SanitizeFailure')}") from None
    return tx


def with_blockhash(tx: VersionedTransaction, blockhash: Hash) -> VersionedTransaction:
    m = tx.message
    if isinstance(m, MessageV0):
        message: Any = MessageV0(m.header, m.account_keys, blockhash, m.instructions, m.address_table_lookups)
    else:
        h = m.header
        message = Message.new_with_compiled_instructions(
            h.num_required_signatures, h.num_readonly_signed_accounts, h.num_readonly_unsigned_accounts,
            m.account_keys, blockhash, m.instructions)
    return VersionedTransaction.populate(message, tx.signatures)


def ui_amount(amount: int, decimals: int) -> dict:
    value = Decimal(amount).scaleb(-decimals)
    return {"amount": str(amount), "decimals": decimals, "uiAmount": float(value),
            "uiAmountString": format(value.normalize(), "f")}


def account_json(sandbox: Sandbox, account: Account | None, config: dict) -> dict | None:
    if account is None:
        return None
    encoding, data, window = config.get("encoding", "binary"), bytes(account.data), config.get("dataSlice")
    if window:
        data = data[window.get("offset", 0) : window.get("offset", 0) + window.get("length", 0)]
    if encoding == "jsonParsed":
        encoded: Any = parsed_token_data(sandbox, account) or [base64.b64encode(data).decode(), "base64"]
    elif encoding == "base64":
        encoded = [base64.b64encode(data).decode(), "base64"]
    elif encoding in ("base58", "binary"):
        if len(data) > 128:
            raise invalid("Encoded binary (base 58) data should be less than 128 bytes, please use Base64 "
                           "encoding.")
        encoded = b58encode(data) if encoding == "binary" else [b58encode(data), "base58"]
    else:
        raise invalid(f"Invalid params: unsupported encoding: {encoding}")
    return {"data": encoded, "executable": account.executable, "lamports": account.lamports,
            "owner": str(account.owner), "rentEpoch": account.rent_epoch, "space": len(account.data)}


def parsed_token_data(sandbox: Sandbox, account: Account) -> dict | None:
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
            "tokenAmount": ui_amount(balance.amount, balance.decimals)}
    return {"parsed": {"info": info, "type": "account"}, "program": program, "space": space}


def simulation_json(sandbox: Sandbox, outcome: Outcome, accounts: dict | None = None) -> dict:
    listed = None
    if accounts:
        config = {"encoding": accounts.get("encoding", "base64")}
        listed = [account_json(sandbox, outcome.accounts.get(a) or sandbox.account(str(pubkey(a))), config)
                  for a in accounts.get("addresses", [])]
    returned = None
    if outcome.return_data:
        program, data = outcome.return_data
        returned = {"programId": program, "data": [base64.b64encode(data).decode(), "base64"]}
    return {"err": outcome.err, "logs": list(outcome.logs), "accounts": listed,
            "unitsConsumed": outcome.units_consumed, "returnData": returned, "innerInstructions": None,
            "replacementBlockhash": None}


def status_json(err: Any) -> dict:
    return {"Ok": None} if err is None else {"Err": err}


def transaction_json(tx: VersionedTransaction, encoding: str) -> Any:
    if encoding == "base64":
        return [base64.b64encode(bytes(tx)).decode(), "base64"]
    if encoding == "base58":
        return [b58encode(bytes(tx)), "base58"]
    m, h = tx.message, tx.message.header
    message = {"accountKeys": [str(k) for k in m.account_keys], "recentBlockhash": str(m.recent_blockhash),
               "header": {"numRequiredSignatures": h.num_required_signatures,
                          "numReadonlySignedAccounts": h.num_readonly_signed_accounts,
                          "numReadonlyUnsignedAccounts": h.num_readonly_unsigned_accounts},
               "instructions": [instruction_json(ix) for ix in m.instructions]}
    if isinstance(m, MessageV0):
        message["addressTableLookups"] = [
            {"accountKey": str(t.account_key), "writableIndexes": list(t.writable_indexes),
             "readonlyIndexes": list(t.readonly_indexes)} for t in m.address_table_lookups]
    return {"signatures": [str(s) for s in tx.signatures], "message": message}


def instruction_json(ix: Any, stack_height: int | None = None) -> dict:
    return {"programIdIndex": ix.program_id_index, "accounts": list(ix.accounts), "data": b58encode(ix.data),
            "stackHeight": stack_height}


def token_balances_json(balances: tuple[TokenBalance, ...]) -> list[dict]:
    return [{"accountIndex": b.index, "mint": b.mint, "owner": b.owner, "programId": b.program,
             "uiTokenAmount": ui_amount(b.amount, b.decimals)} for b in balances]


def meta_json(landed: Landed) -> dict:
    inner = [{"index": i, "instructions": [instruction_json(x.instruction, x.stack_height) for x in group]}
             for i, group in enumerate(landed.inner_instructions) if group]
    writable, readonly = landed.loaded_addresses
    return {"err": landed.err, "status": status_json(landed.err), "fee": landed.fee,
            "preBalances": list(landed.pre_balances), "postBalances": list(landed.post_balances),
            "innerInstructions": inner, "logMessages": list(landed.logs),
            "preTokenBalances": token_balances_json(landed.pre_token_balances),
            "postTokenBalances": token_balances_json(landed.post_token_balances), "rewards": [],
            "loadedAddresses": {"writable": list(writable), "readonly": list(readonly)},
            "computeUnitsConsumed": landed.units_consumed}


