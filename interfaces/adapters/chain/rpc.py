"""The `Chain` port over any Solana JSON-RPC endpoint, with solana-py's synchronous `Client`.

Also home of the validator's wire vocabulary shared by the in-process adapters: the JSON form of a
`TransactionError` (`"BlockhashNotFound"`, `{"InstructionError": [2, {"Custom": 1}]}`) turned into the error
code and the message a validator prints, and the layout of an address lookup table account.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from solana.exceptions import SolanaRpcException
from solana.rpc.api import Client
from solana.rpc.commitment import Commitment
from solana.rpc.core import RPCException
from solders.commitment_config import CommitmentLevel
from solders.hash import Hash
from solders.pubkey import Pubkey
from solders.rpc.config import (
    RpcContextConfig,
    RpcSendTransactionConfig,
    RpcSignatureStatusConfig,
    RpcSimulateTransactionConfig,
)
from solders.rpc.errors import (
    InvalidParamsMessage,
    RpcCustomErrorFieldless,
    SendTransactionPreflightFailureMessage,
)
from solders.rpc.requests import (
    GetHealth,
    GetSignatureStatuses,
    IsBlockhashValid,
    SendRawTransaction,
    SimulateVersionedTransaction,
)
from solders.rpc.responses import (
    GetHealthResp,
    GetSignatureStatusesResp,
    IsBlockhashValidResp,
    SendTransactionResp,
    SimulateTransactionResp,
)
from solders.signature import Signature
from solders.transaction import VersionedTransaction
from solders.transaction_status import TransactionConfirmationStatus

from application.ports import (
    ChainUnavailableError,
    Confirmation,
    SignatureStatus,
    Simulation,
    SubmissionError,
)
from interfaces.adapters.chain.keepalive import KeepAliveJsonRpc, TransportError

LOOKUP_TABLE_PROGRAM = "AddressLookupTab1e1111111111111111111111111"
LOOKUP_TABLE_HEADER = 56
SIGNATURE_FAILURE = "Transaction signature verification failure"

_TRANSACTION_ERRORS = {
    "AccountInUse": "Account in use",
    "AccountLoadedTwice": "Account loaded twice",
    "AccountNotFound": "Attempt to debit an account but found no record of a prior credit.",
    "ProgramAccountNotFound": "Attempt to load a program that does not exist",
    "InsufficientFundsForFee": "Insufficient funds for fee",
    "InvalidAccountForFee": "This account may not be used to pay transaction fees",
    "AlreadyProcessed": "This transaction has already been processed",
    "BlockhashNotFound": "Blockhash not found",
    "CallChainTooDeep": "Loader call chain is too deep",
    "MissingSignatureForFee": "Transaction requires a fee but has no signature present",
    "InvalidAccountIndex": "Transaction contains an invalid account reference",
    "SignatureFailure": "Transaction did not pass signature verification",
    "InvalidProgramForExecution": "This program may not be used for executing instructions",
    "SanitizeFailure": "Transaction failed to sanitize accounts offsets correctly",
    "UnsupportedVersion": "Transaction version is unsupported",
    "InvalidWritableAccount": "Transaction loads a writable account that cannot be written",
    "AddressLookupTableNotFound": "Transaction loads an address table account that doesn't exist",
    "InvalidAddressLookupTableIndex": "Transaction address table lookup uses an invalid index",
    "InvalidRentPayingAccount": "Transaction leaves an account with a lower balance than rent-exempt minimum",
}
_INSTRUCTION_ERRORS = {
    "GenericError": "generic instruction error",
    "InvalidArgument": "invalid program argument",
    "InvalidInstructionData": "invalid instruction data",
    "InvalidAccountData": "invalid account data for instruction",
    "AccountDataTooSmall": "account data too small for instruction",
    "InsufficientFunds": "insufficient funds for instruction",
    "IncorrectProgramId": "incorrect program id for instruction",
    "MissingRequiredSignature": "missing required signature for instruction",
    "AccountAlreadyInitialized": "instruction requires an uninitialized account",
    "UninitializedAccount": "instruction requires an initialized account",
    "NotEnoughAccountKeys": "insufficient account keys for instruction",
    "ProgramFailedToComplete": "Program failed to complete",
    "ComputationalBudgetExceeded": "Computational budget exceeded",
}


def error_code(err: Any) -> str:
    """The `TransactionError` variant name of an RPC `err` value ("" when there is no error)."""
    if not err:
        return ""
    if isinstance(err, str):
        return err
    return next(iter(err)) if isinstance(err, dict) else "UnknownError"


def describe_error(err: Any) -> str:
    """The message a validator prints for an RPC `err` value, e.g. "Error processing Instruction 2: ..."."""
    code = error_code(err)
    detail = err.get(code) if isinstance(err, dict) else None
    if code == "InstructionError" and isinstance(detail, list) and len(detail) == 2:
        return f"Error processing Instruction {detail[0]}: {_describe_instruction_error(detail[1])}"
    if isinstance(err, dict):
        return f"{code}: {json.dumps(detail)}"
    return _TRANSACTION_ERRORS.get(code, code if isinstance(err, str) else json.dumps(err))


def _describe_instruction_error(inner: Any) -> str:
    if isinstance(inner, dict) and isinstance(inner.get("Custom"), int):
        return f"custom program error: {inner['Custom']:#x}"
    if isinstance(inner, str):
        return _INSTRUCTION_ERRORS.get(inner, inner)
    return json.dumps(inner)


def preflight_failure(err: Any) -> str:
    """How a validator words the refusal of a transaction whose preflight failed with `err`."""
    if error_code(err) == "SignatureFailure":  # checked before simulating, with its own wording
        return SIGNATURE_FAILURE
    return f"Transaction simulation failed: {describe_error(err)}"


def lookup_table_entries(data: bytes) -> list[str]:
    """The addresses stored in an address lookup table account's data: a 56-byte header, then 32-byte keys."""
    body = data[LOOKUP_TABLE_HEADER:]
    if len(data) < LOOKUP_TABLE_HEADER or len(body) % 32:
        return []
    return [str(Pubkey.from_bytes(body[i : i + 32])) for i in range(0, len(body), 32)]


T = TypeVar("T")


class RpcChain:
    """A Solana network over JSON-RPC; transport faults and nonsense become `ChainUnavailableError`."""

    def __init__(self, url: str, *, commitment: str = "confirmed", timeout: float = 10.0) -> None:
        self._commitment = Commitment(commitment)
        with warnings.catch_warnings():
            # Deprecated upstream in favour of AsyncClient, yet the x402 SDK pins the versions that ship it.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            self._client = Client(url, commitment=self._commitment, timeout=timeout)
        self._lean = KeepAliveJsonRpc(url, timeout=timeout)  # a verify's and a settle's calls (keepalive.py)
        self._send_config = RpcSendTransactionConfig(
            skip_preflight=False, preflight_commitment=CommitmentLevel.from_string(commitment))
        self._status_config = RpcSignatureStatusConfig(True)  # search the transaction history
        self._simulate_config, self._trusting_config = (RpcSimulateTransactionConfig(
            sig_verify=verify, commitment=CommitmentLevel.from_string(commitment), replace_recent_blockhash=False)
            for verify in (True, False))

    def simulate(self, transaction: bytes, *, signatures_verified: bool = False) -> Simulation:
        """`signatures_verified`: the caller checked every signature (the exact inspection, the client's; the fee
        payer's is our own), so the node is asked with `sigVerify: false` and spends no CPU checking them again:
        everything else (the blockhash, the accounts, the programs) it checks as before (docs/performance.md)."""
        try:
            tx = VersionedTransaction.from_bytes(transaction)
        except ValueError as exc:
            return Simulation(False, f"invalid transaction: {exc}", "SanitizeFailure")
        try:
            config = self._trusting_config if signatures_verified else self._simulate_config
            request = SimulateVersionedTransaction(tx, config)
            resp = self._call(lambda: self._lean.call(request, SimulateTransactionResp), refusable=True)
        except _Refused as refusal:
            return Simulation(False, refusal.message, refusal.code, refusal.logs)
        result = json.loads(resp.value.to_json())
        err, logs = result.get("err"), tuple(result.get("logs") or ())
        return Simulation(not err, describe_error(err) if err else "", error_code(err), logs)

    def send(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        """`sendTransaction` with the node's preflight, as solana-py's `send_raw_transaction` sends it (the same
        body), over the lean transport, sent once (keepalive.py: a lost answer is a fault, never a second send).
        The node verifies the signatures whatever `signatures_verified` says: `sendTransaction` has no option to
        skip them."""
        request = SendRawTransaction(transaction, self._send_config)
        try:
            resp = self._call(lambda: self._lean.call(request, SendTransactionResp, retry=False), refusable=True)
        except _Refused as refusal:
            raise SubmissionError(refusal.message) from None
        if not resp.value:  # solana-py's `_post_send`: an answer without a signature
            raise ChainUnavailableError("chain answered nonsense: no signature for the sent transaction")
        return str(resp.value)

    def signature_status(self, signature: str) -> SignatureStatus:
        try:
            sig = Signature.from_string(signature)
        except ValueError:
            return SignatureStatus(Confirmation.UNKNOWN)
        request = GetSignatureStatuses([sig], self._status_config)
        resp = self._call(lambda: self._lean.call(request, GetSignatureStatusesResp))
        status = resp.value[0] if resp.value else None
        if status is None:
            return SignatureStatus(Confirmation.UNKNOWN)
        level = status.confirmation_status
        # A result seen only at `processed` may still be rolled back with its fork: not yet a verdict.
        if level not in (TransactionConfirmationStatus.Confirmed, TransactionConfirmationStatus.Finalized):
            return SignatureStatus(Confirmation.PENDING)
        if status.err is not None:
            err = json.loads(status.to_json())["err"]
            return SignatureStatus(Confirmation.FAILED, describe_error(err))
        return SignatureStatus(Confirmation.CONFIRMED)

    def is_blockhash_valid(self, blockhash: str) -> bool:
        try:
            value = Hash.from_string(blockhash)
        except Exception:  # solders' ParseHashError is no ValueError
            return False
        # solana-py's Client has no isBlockhashValid: send solders' request through its provider.
        config = RpcContextConfig(commitment=CommitmentLevel.from_string(self._commitment))
        request = IsBlockhashValid(value, config)
        resp = self._call(lambda: self._lean.call(request, IsBlockhashValidResp))
        return bool(resp.value)

    def account_exists(self, address: str) -> bool:
        return self._account(address) is not None

    def health(self) -> None:
        """Raise `ChainUnavailableError` unless the node answers `getHealth` (a node behind the cluster errors)."""
        self._call(lambda: self._lean.call(GetHealth(), GetHealthResp))

    def sol_balance(self, address: str) -> int:
        pubkey = Pubkey.from_string(address)
        return int(self._call(lambda: self._client.get_balance(pubkey, self._commitment)).value)

    def lookup_table_addresses(self, table: str) -> Sequence[str]:
        account = self._account(table)
        if account is None or str(account.owner) != LOOKUP_TABLE_PROGRAM:
            return []
        return lookup_table_entries(bytes(account.data))

    def _account(self, address: str) -> Any:
        try:
            pubkey = Pubkey.from_string(address)
        except ValueError:
            return None
        return self._call(lambda: self._client.get_account_info(pubkey, self._commitment)).value

    def _call(self, request: Callable[[], T], *, refusable: bool = False) -> T:
        try:
            resp = request()
        except RPCException as exc:
            error = _classify(exc.args[0] if exc.args else None)
            if isinstance(error, _Refused) and not refusable:
                error = ChainUnavailableError(f"chain refused a query: {error.message}")
            raise error from None
        except SolanaRpcException as exc:
            raise ChainUnavailableError(f"chain unreachable: {exc.__cause__ or exc}") from exc
        except TransportError as exc:
            raise ChainUnavailableError(f"chain unreachable: {exc}") from exc
        except Exception as exc:  # the response was not the JSON-RPC a validator answers
            raise ChainUnavailableError(f"chain answered nonsense: {exc!r}") from exc
        if not hasattr(resp, "value"):
            raise ChainUnavailableError(f"chain answered nonsense: {resp!r}")
        return resp


class _Refused(Exception):
    """The endpoint refused the transaction itself (not the request): a verdict, not a fault."""

    def __init__(self, message: str, code: str, logs: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message, self.code, self.logs = message, code, tuple(logs)


def _classify(error: Any) -> Exception:
    if isinstance(error, SendTransactionPreflightFailureMessage):
        result = json.loads(error.data.to_json())
        err = result.get("err")
        return _Refused(error.message, error_code(err) or "PreflightFailure", result.get("logs") or ())
    if error == RpcCustomErrorFieldless.TransactionSignatureVerificationFailure:
        return _Refused(SIGNATURE_FAILURE, "SignatureFailure")
    if error == RpcCustomErrorFieldless.TransactionSignatureLenMismatch:
        return _Refused("Transaction signature length mismatch", "SanitizeFailure")
    if isinstance(error, InvalidParamsMessage):  # undecodable, oversized or unsanitary transaction
        return _Refused(error.message, "SanitizeFailure")
    message = getattr(error, "message", None) or repr(error)
    return ChainUnavailableError(f"chain error: {message}")
