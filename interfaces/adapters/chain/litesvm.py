"""The `Chain` port in-process, over the sandbox's LiteSVM.

It answers as `RpcChain` does against a validator: `send` runs the preflight simulation a validator runs
before accepting a transaction, so one that would fail (expired blockhash, already processed, bad signature,
an instruction error) raises `SubmissionError` with the validator's "Transaction simulation failed: ..."
message and never lands. A transaction that passed preflight executes at once and is `confirmed`; one
executed with an error (only reachable through the localnet's `skipPreflight`) is a landed FAILED
transaction, its fee paid.
"""

from __future__ import annotations

from collections.abc import Sequence

from solders.transaction import VersionedTransaction

from application.ports import Confirmation, SignatureStatus, Simulation, SubmissionError
from interfaces.adapters.chain.rpc import SIGNATURE_FAILURE, describe_error, error_code, preflight_failure
from interfaces.sandbox.chain import Sandbox


class LiteSvmChain:
    """One sandbox network; every call is serialized by the sandbox's lock."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def simulate(self, transaction: bytes, *, signatures_verified: bool = False) -> Simulation:
        """With `signatures_verified` (the caller verified or made every signature) the sandbox checks all a
        simulation checks but the signatures, and builds no post-simulation accounts (a `Simulation` has none)."""
        try:
            tx = VersionedTransaction.from_bytes(transaction)
        except ValueError as exc:
            return Simulation(False, f"invalid transaction: {exc}", "SanitizeFailure")
        outcome = self._sandbox.simulate(tx, sig_verify=not signatures_verified, accounts=False)
        if outcome.ok:
            return Simulation(True, logs=outcome.logs)
        code = error_code(outcome.err)
        message = SIGNATURE_FAILURE if code == "SignatureFailure" else describe_error(outcome.err)
        return Simulation(False, message, code, outcome.logs)

    def send(self, transaction: bytes, *, signatures_verified: bool = False) -> str:
        """With `signatures_verified`, the preflight simulation and the execution check all they check but the
        signatures (as `simulate`)."""
        try:
            tx = VersionedTransaction.from_bytes(transaction)
        except ValueError as exc:
            raise SubmissionError(f"invalid transaction: {exc}") from None
        outcome = self._sandbox.send(tx, preflight=True, sig_verify=not signatures_verified)
        if not outcome.ok:
            raise SubmissionError(preflight_failure(outcome.err))
        return outcome.signature

    def signature_status(self, signature: str) -> SignatureStatus:
        landed = self._sandbox.transaction(signature)
        if landed is None:
            return SignatureStatus(Confirmation.UNKNOWN)
        if landed.err is not None:
            return SignatureStatus(Confirmation.FAILED, describe_error(landed.err))
        return SignatureStatus(Confirmation.CONFIRMED)

    def is_blockhash_valid(self, blockhash: str) -> bool:
        return self._sandbox.is_blockhash_valid(blockhash)

    def account_exists(self, address: str) -> bool:
        try:
            return self._sandbox.account(address) is not None
        except ValueError:
            return False

    def health(self) -> None:
        self._sandbox.latest_blockhash()

    def sol_balance(self, address: str) -> int:
        return self._sandbox.sol_balance(address)

    def lookup_table_addresses(self, table: str) -> Sequence[str]:
        try:
            return self._sandbox.lookup_table_addresses(table)
        except ValueError:
            return []
