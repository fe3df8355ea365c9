"""The sandbox chain: one in-process LiteSVM that behaves, where a payment gateway can tell, like a cluster.

LiteSVM ships the real SPL Token, Token-2022, Associated Token Account, Memo and lookup-table programs and
verifies signatures, but it knows a single blockhash. The sandbox runs it with its blockhash check off, checks
every transaction's signatures once itself (LiteSVM's own check is off too: it would verify them again) and
keeps what a bank keeps: a window of recent blockhashes with their slots (valid for 150 slots, 144 for simulation and
preflight, as a validator allows for forwarding), a status cache refusing a signature it has seen
(`AlreadyProcessed`, never executed twice), and the history `getSignatureStatuses`/`getTransaction` need. Only
transactions that pay their fee land (success, or an instruction error with the fee charged); a refused one
leaves no trace.

Every LiteSVM call happens under one re-entrant lock: LiteSVM is not thread-safe and callers come from threads
and greenlets. USDC is minted at a given address by a sandbox-held mint authority, through real ATA and Token
instructions that also land in history.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from solders.account import Account
from solders.clock import Clock
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.litesvm import LiteSVM
from solders.message import Message, MessageV0
from solders.pubkey import Pubkey
from solders.system_program import ID as SYSTEM_PROGRAM
from solders.system_program import TransferParams, transfer
from solders.token.associated import get_associated_token_address
from solders.token.state import Mint, TokenAccount
from solders.transaction import VersionedTransaction
from solders.transaction_metadata import FailedTransactionMetadata

from domain.networks import DEVNET, USDC_DECIMALS, Programs
from interfaces.adapters.chain.rpc import LOOKUP_TABLE_HEADER, LOOKUP_TABLE_PROGRAM, lookup_table_entries

MAX_PROCESSING_AGE = 150
PREFLIGHT_AGE = MAX_PROCESSING_AGE - 6  # MAX_TRANSACTION_FORWARDING_DELAY
RECENT_BLOCKHASHES = 300
HISTORY_LIMIT = 100_000
LAMPORTS_PER_SIGNATURE = 5000
FAUCET_LAMPORTS = 10**15
_TOKEN_ACCOUNT_LEN = 165


@dataclass(frozen=True)
class TokenBalance:  # a NamedTuple's `index` field would shadow tuple.index
    index: int
    mint: str
    owner: str
    program: str
    amount: int
    decimals: int


@dataclass(frozen=True)
class Outcome:
    """What simulating or processing one transaction gave. `err` is the validator's JSON form of the error."""

    signature: str
    err: Any = None
    logs: tuple[str, ...] = ()
    units_consumed: int = 0
    return_data: tuple[str, bytes] | None = None
    accounts: dict[str, Account] = field(default_factory=dict)
    landed: bool = False

    @property
    def ok(self) -> bool:
        return self.err is None


@dataclass(frozen=True)
class Landed:
    """A transaction in history: executed at `slot`, successfully or not, its fee paid."""

    signature: str
    slot: int
    block_time: int
    transaction: VersionedTransaction
    err: Any
    logs: tuple[str, ...]
    units_consumed: int
    fee: int
    loaded_addresses: tuple[tuple[str, ...], tuple[str, ...]]
    pre_balances: tuple[int, ...]
    post_balances: tuple[int, ...]
    pre_token_balances: tuple[TokenBalance, ...]
    post_token_balances: tuple[TokenBalance, ...]
    inner_instructions: tuple[Any, ...] = ()


class Sandbox:
    """LiteSVM with a cluster's blockhash lifetime, a status cache, history, a SOL faucet and test USDC."""

    def __init__(self, *, usdc_mint: str = DEVNET.usdc_mint, usdc_decimals: int = USDC_DECIMALS) -> None:
        self.lock = threading.RLock()
        # Signatures are checked once, by `_precheck`, before LiteSVM sees a transaction: LiteSVM's own check
        # would verify every signature a second time (~45 µs each on this machine).
        self._svm = LiteSVM().with_blockhash_check(False).with_sigverify(False)
        self._slot = self._svm.get_clock().slot
        self._slot_time = int(time.time())
        self._blockhashes = OrderedDict({str(self._svm.latest_blockhash()): self._slot})
        self._history: OrderedDict[str, Landed] = OrderedDict()
        self._nonce = 0
        self.authority = Keypair()  # the faucet and every test mint's authority
        faucet = Account(FAUCET_LAMPORTS, b"", SYSTEM_PROGRAM, False, 0)
        self._svm.set_account(self.authority.pubkey(), faucet)
        self.usdc_mint, self.usdc_decimals = usdc_mint, usdc_decimals
        self.create_mint(usdc_mint, usdc_decimals)

    # -- clock and blockhashes ----------------------------------------------------------------------------

    @property
    def slot(self) -> int:
        return self._slot

    def advance(self, slots: int = 1) -> int:
        """Move on `slots` slots, each with a new blockhash; return the new slot."""
        with self.lock:
            for _ in range(slots):
                self._slot += 1
                self._svm.warp_to_slot(self._slot)
                self._svm.expire_blockhash()
                self._blockhashes[str(self._svm.latest_blockhash())] = self._slot
                if len(self._blockhashes) > RECENT_BLOCKHASHES:
                    self._blockhashes.popitem(last=False)
            # Programs read the clock and the slot hashes sysvars; keep them moving with the slots.
            self._slot_time, clock = int(time.time()), self._svm.get_clock()
            epoch = self._svm.get_epoch_schedule().get_epoch(self._slot)
            self._svm.set_clock(Clock(self._slot, clock.epoch_start_timestamp, epoch, epoch, self._slot_time))
            recent = reversed(self._blockhashes.items())
            self._svm.set_slot_hashes([(slot, Hash.from_string(h)) for h, slot in recent])
            return self._slot

    def latest_blockhash(self) -> tuple[str, int]:
        """The newest blockhash and the last block height at which it is valid."""
        with self.lock:
            return str(self._svm.latest_blockhash()), self._slot + MAX_PROCESSING_AGE

    def is_blockhash_valid(self, blockhash: str, max_age: int = MAX_PROCESSING_AGE) -> bool:
        with self.lock:
            slot = self._blockhashes.get(blockhash)
            return slot is not None and self._slot - slot <= max_age

    # -- transactions ---------------------------------------------------------------------------------------

    def simulate(self, tx: VersionedTransaction, *, sig_verify: bool = True, accounts: bool = True) -> Outcome:
        """Simulate against the current state, as `simulateTransaction`; nothing is kept.

        The defaults do everything a node's `simulateTransaction` can be asked for (the reference facilitator of
        `paywarden-bench reference` calls it so). `sig_verify=False` skips the signature check and nothing else;
        `accounts=False` leaves `Outcome.accounts` empty instead of converting every post-simulation account.
        Paywarden's own verify asks for both (`LiteSvmChain`, docs/performance.md)."""
        with self.lock:
            refusal = self._precheck(tx, sig_verify=sig_verify, max_age=PREFLIGHT_AGE)
            if refusal is not None:
                return refusal
            result = self._svm.simulate_transaction(tx)
            if isinstance(result, FailedTransactionMetadata):
                return _outcome(tx, result.meta(), _err_json(result))
            if not accounts:
                return _outcome(tx, result.meta(), None)
            return _outcome(tx, result.meta(), None, accounts={str(k): a for k, a in result.post_accounts()})

    def send(self, tx: VersionedTransaction, *, preflight: bool = True, sig_verify: bool = True) -> Outcome:
        """Submit as `sendTransaction`: with preflight, a failing simulation refuses it before it lands.
        `sig_verify=False` (an in-process caller that verified or made every signature) skips the signature check
        and nothing else, as for `simulate`."""
        with self.lock:
            if preflight:
                simulated = self.simulate(tx, sig_verify=sig_verify, accounts=False)
                if not simulated.ok:
                    return simulated
            # The preflight has just checked the signatures, under this lock (or they were known good).
            return self._process(tx, sig_verify=sig_verify and not preflight)

    @property
    def transaction_count(self) -> int:
        return len(self._history)

    def transaction(self, signature: str) -> Landed | None:
        with self.lock:
            return self._history.get(signature)

    def signatures_for(self, address: str, *, until: str | None = None, limit: int = 1000) -> list[Landed]:
        """The landed transactions naming `address` (looked-up ones too), newest first, back to `until` (excluded)."""
        found: list[Landed] = []
        with self.lock:
            for landed in reversed(self._history.values()):
                if landed.signature == until or len(found) >= limit:
                    break
                if address in {str(k) for k in landed.transaction.message.account_keys}.union(*landed.loaded_addresses):
                    found.append(landed)
        return found

    def fee_for(self, message: Message | MessageV0) -> int:
        """The fee LiteSVM charges: the signature fee only (it charges no prioritization fee)."""
        return LAMPORTS_PER_SIGNATURE * message.header.num_required_signatures

    def _precheck(self, tx: VersionedTransaction, *, sig_verify: bool, max_age: int) -> Outcome | None:
        signature = str(tx.signatures[0]) if tx.signatures else ""
        try:
            tx.sanitize()
        except Exception:  # solders raises its own sanitize error type
            return Outcome(signature, "SanitizeFailure")
        if sig_verify and not all(tx.verify_with_results()):
            return Outcome(signature, "SignatureFailure")
        if signature in self._history:
            return Outcome(signature, "AlreadyProcessed")
        if not self.is_blockhash_valid(str(tx.message.recent_blockhash), max_age):
            return Outcome(signature, "BlockhashNotFound")
        return None

    def _process(self, tx: VersionedTransaction, *, sig_verify: bool = True) -> Outcome:
        refusal = self._precheck(tx, sig_verify=sig_verify, max_age=MAX_PROCESSING_AGE)
        if refusal is not None:
            return refusal
        signature, loaded = str(tx.signatures[0]), self._loaded_addresses(tx)
        keys = tuple(str(k) for k in tx.message.account_keys) + loaded[0] + loaded[1]
        pre, pre_tokens = self._balances(keys)
        result = self._svm.send_transaction(tx)
        failed = isinstance(result, FailedTransactionMetadata)
        meta: Any
        meta, err = (result.meta(), _err_json(result)) if isinstance(result, FailedTransactionMetadata) else (
            result, None)
        # LiteSVM keeps what paid its fee (success or an instruction error); what it refused never landed.
        if failed and self._svm.get_transaction(tx.signatures[0]) is None:
            return _outcome(tx, meta, err)
        post, post_tokens = self._balances(keys)
        self._history[signature] = Landed(
            signature, self._slot, self._slot_time, tx, err, tuple(meta.logs()),
            meta.compute_units_consumed(), self.fee_for(tx.message), loaded, pre, post, pre_tokens,
            post_tokens, tuple(meta.inner_instructions()),
        )
        # Forget the oldest only once its blockhash has expired: it can no longer be replayed.
        while len(self._history) > HISTORY_LIMIT:
            oldest = next(iter(self._history.values()))
            if self._slot - oldest.slot <= RECENT_BLOCKHASHES:
                break
            self._history.popitem(last=False)
        return _outcome(tx, meta, err, landed=True)

    def _loaded_addresses(self, tx: VersionedTransaction) -> tuple[tuple[str, ...], tuple[str, ...]]:
        writable: list[str] = []
        readonly: list[str] = []
        for lookup in getattr(tx.message, "address_table_lookups", None) or ():
            entries = self.lookup_table_addresses(str(lookup.account_key))
            writable += [entries[i] for i in lookup.writable_indexes if i < len(entries)]
            readonly += [entries[i] for i in lookup.readonly_indexes if i < len(entries)]
        return tuple(writable), tuple(readonly)

    def _balances(self, keys: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[TokenBalance, ...]]:
        lamports, tokens = [], []
        for index, key in enumerate(keys):
            account = self._svm.get_account(Pubkey.from_string(key))
            lamports.append(account.lamports if account else 0)
            balance = self.token_balance_of(account, index)
            if balance is not None:
                tokens.append(balance)
        return tuple(lamports), tuple(tokens)

    def token_balance_of(self, account: Account | None, index: int = 0) -> TokenBalance | None:
        """The balance held by a token account (Token or Token-2022), or None if it is not one."""
        if account is None or str(account.owner) not in Programs.TOKEN_PROGRAMS:
            return None
        parsed = parse_token_account(bytes(account.data))
        if parsed is None:
            return None
        with self.lock:
            mint = self._svm.get_account(parsed.mint)
        decimals = bytes(mint.data)[44] if mint and len(mint.data) > 44 else 0
        owner, program = str(parsed.owner), str(account.owner)
        return TokenBalance(index, str(parsed.mint), owner, program, parsed.amount, decimals)

    # -- accounts, faucet, test USDC ---------------------------------------------------------------------

    def account(self, address: str) -> Account | None:
        with self.lock:
            return self._svm.get_account(Pubkey.from_string(address))

    def set_account(self, address: str, account: Account) -> None:
        with self.lock:
            self._svm.set_account(Pubkey.from_string(address), account)

    def rent_exempt_minimum(self, data_len: int) -> int:
        with self.lock:
            return self._svm.minimum_balance_for_rent_exemption(data_len)

    def sol_balance(self, address: str) -> int:
        account = self.account(address)
        return account.lamports if account else 0

    def create_mint(self, address: str, decimals: int = USDC_DECIMALS, token_program: str = Programs.TOKEN
                    ) -> None:
        """Write an initialized SPL mint at `address` whose mint authority is the sandbox's `authority`."""
        data = bytes(Mint(self.authority.pubkey(), 0, decimals, True, None))
        lamports = self.rent_exempt_minimum(len(data))
        self.set_account(address, Account(lamports, data, Pubkey.from_string(token_program), False, 0))

    def create_lookup_table(self, addresses: list[str], address: str | None = None) -> str:
        """Write an active address lookup table holding `addresses`; return its address."""
        address = address or str(Keypair().pubkey())
        # LookupTable state, never deactivated, extended at slot 0 with every entry active, no authority.
        header = (1).to_bytes(4, "little") + (2**64 - 1).to_bytes(8, "little") + bytes(8)
        header += bytes([min(len(addresses), 255)])
        keys = b"".join(bytes(Pubkey.from_string(a)) for a in addresses)
        data = header.ljust(LOOKUP_TABLE_HEADER, b"\x00") + keys
        owner = Pubkey.from_string(LOOKUP_TABLE_PROGRAM)
        self.set_account(address, Account(self.rent_exempt_minimum(len(data)), data, owner, False, 0))
        return address

    def lookup_table_addresses(self, table: str) -> list[str]:
        account = self.account(table)
        if account is None or str(account.owner) != LOOKUP_TABLE_PROGRAM:
            return []
        return lookup_table_entries(bytes(account.data))

    def airdrop(self, address: str, lamports: int) -> str:
        """Transfer `lamports` from the sandbox faucet; return the landed transaction's signature."""
        to = Pubkey.from_string(address)
        return self._faucet_send([transfer(TransferParams(from_pubkey=self.authority.pubkey(), to_pubkey=to,
                                                          lamports=lamports))])

    def mint_usdc(self, owner: str, amount_atomic: int) -> str:
        return self.mint_tokens(self.usdc_mint, owner, amount_atomic)

    def mint_tokens(self, mint: str, owner: str, amount_atomic: int) -> str:
        """Create `owner`'s associated token account if missing and mint into it; return the signature."""
        with self.lock:
            mint_account = self.account(mint)
            if mint_account is None:
                raise ValueError(f"no mint at {mint}")
            program, mint_key = mint_account.owner, Pubkey.from_string(mint)
            owner_key, payer = Pubkey.from_string(owner), self.authority.pubkey()
            ata = get_associated_token_address(owner_key, mint_key, program)
            create_idempotent = Instruction(Pubkey.from_string(Programs.ASSOCIATED_TOKEN), bytes([1]), [
                AccountMeta(payer, True, True), AccountMeta(ata, False, True),
                AccountMeta(owner_key, False, False), AccountMeta(mint_key, False, False),
                AccountMeta(SYSTEM_PROGRAM, False, False), AccountMeta(program, False, False)])
            data = bytes([14]) + amount_atomic.to_bytes(8, "little") + bytes([bytes(mint_account.data)[44]])
            mint_to_checked = Instruction(program, data, [
                AccountMeta(mint_key, False, True), AccountMeta(ata, False, True),
                AccountMeta(payer, True, False)])
            return self._faucet_send([create_idempotent, mint_to_checked])

    def token_balance(self, owner: str, mint: str | None = None) -> int:
        """Atomic units in `owner`'s associated token account for `mint` (default USDC); 0 if none."""
        with self.lock:
            mint = mint or self.usdc_mint
            mint_account = self.account(mint)
            if mint_account is None:
                return 0
            owner_key, mint_key = Pubkey.from_string(owner), Pubkey.from_string(mint)
            ata = get_associated_token_address(owner_key, mint_key, mint_account.owner)
            balance = self.token_balance_of(self.account(str(ata)))
            return balance.amount if balance else 0

    def _faucet_send(self, instructions: list[Instruction]) -> str:
        with self.lock:
            # A memo with a sequence number keeps two equal grants in one slot from sharing a signature.
            self._nonce += 1
            memo_text = f"paywarden faucet {self._nonce}".encode()
            memo = Instruction(Pubkey.from_string(Programs.MEMO), memo_text, [])
            blockhash = self._svm.latest_blockhash()
            message = MessageV0.try_compile(self.authority.pubkey(), [*instructions, memo], [], blockhash)
            outcome = self.send(VersionedTransaction(message, [self.authority]))
            if not outcome.ok:
                raise RuntimeError(f"sandbox faucet transaction failed: {outcome.err} {list(outcome.logs)}")
            return outcome.signature


def parse_token_account(data: bytes) -> TokenAccount | None:
    """The base SPL token account in `data` (Token or Token-2022 with extensions), or None."""
    if len(data) < _TOKEN_ACCOUNT_LEN or (len(data) > _TOKEN_ACCOUNT_LEN and data[_TOKEN_ACCOUNT_LEN] != 2):
        return None
    try:
        return TokenAccount.from_bytes(data[:_TOKEN_ACCOUNT_LEN])
    except Exception:  # uninitialized or not a token account
        return None


def _err_json(result: FailedTransactionMetadata) -> Any:
    return json.loads(result.to_json())["err"]


def _outcome(
    tx: VersionedTransaction, meta: Any, err: Any, *, accounts: dict | None = None, landed: bool = False
) -> Outcome:
    returned = meta.return_data()
    data = bytes(returned.data)
    return Outcome(str(tx.signatures[0]), err, tuple(meta.logs()), meta.compute_units_consumed(),
                   (str(returned.program_id), data) if data else None, accounts or {}, landed)
