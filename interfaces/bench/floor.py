"""`paywarden-bench floor`: the CPU a verify's chain work costs in one process, below any server or store.

A verify on the embedded default does this chain work in its API worker, the one process that holds the sandbox's
LiteSVM: decode the payment's transaction, inspect it (the `exact` rules, with the one check of the client's
signature), co-sign it as the fee payer, and simulate it. The reference facilitator of `paywarden-bench reference` does
the same work (it checks both signatures inside its simulation instead). This command times each step alone, in a
loop over `--payments` distinct payments built on an in-process sandbox, with nothing else in the loop: no HTTP,
no event store, no other process. Their sum is the floor of a verify in that process, and its inverse the most
verifies per second one core could serve even if everything else cost nothing.

Beside it, the reference's own verify is timed in the same process without HTTP (`x402Facilitator.verify` on the
parsed payload, as its FastAPI handler calls it): what the reference spends outside its server. The ceiling and
`paywarden-bench reference`'s figures together say whether a throughput target is within reach of one process on this
machine (docs/performance.md, "The floor").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from solders.hash import Hash
from solders.keypair import Keypair
from solders.transaction import VersionedTransaction

from domain.exact import inspect_exact
from domain.networks import DEVNET
from domain.solana_tx import decode_wire, message_bytes, with_fee_payer_signature_wire
from interfaces.adapters.chain.litesvm import LiteSvmChain
from interfaces.adapters.signers import KeypairFeePayers
from interfaces.bench.reference import funded_sandbox, reference_facilitator
from interfaces.cli.bench import sign_payments

AMOUNT = 1000
STEPS = ("decode", "inspect", "co-sign", "simulate")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--payments", type=int, default=3000, help="distinct payments timed per round (default 3000)")
    p.add_argument("--rounds", type=int, default=3, help="rounds; each figure is the median (default 3)")
    p.add_argument("--json", action="store_true", help="also print the figures as one JSON line")


class Bench:
    """A sandbox with a funded payer and a fee payer, and `count` distinct payments signed against it."""

    def __init__(self, count: int) -> None:
        self.fee_payer, self.payer, pay_to = Keypair(), Keypair(), Keypair()
        # `Keypair.pubkey()` derives the key from the secret on every call (~20 µs): each address once, here.
        self.fee_payer_address, self.payer_address = str(self.fee_payer.pubkey()), str(self.payer.pubkey())
        self.pay_to = str(pay_to.pubkey())
        self.sandbox = funded_sandbox(self.fee_payer_address, self.payer_address, self.pay_to)
        self.mint = self.sandbox.usdc_mint
        self.fee_payers = KeypairFeePayers([self.fee_payer])
        # The request bodies `paywarden-bench reference` sends both facilitators, and the transactions in them.
        self.bodies = sign_payments(self.payer, count, fee_payer=self.fee_payer_address, network=DEVNET.caip2,
                                    pay_to=self.pay_to, amount=AMOUNT,
                                    blockhash=Hash.from_string(self.sandbox.latest_blockhash()[0]))
        self.wires = [json.loads(body)["paymentPayload"]["payload"]["transaction"] for body in self.bodies]

    def steps(self) -> dict[str, Callable[[], int]]:
        """Each step of a verify's `evaluate` (`application/verifying.py`) over every payment, given what the steps
        before it made (each returns how many payments passed it), and the simulation as the reference asks for it."""
        decoded = [(tx, wire, message_bytes(tx)) for tx, wire in map(decode_wire, self.wires)]
        address, chain = self.fee_payer_address, LiteSvmChain(self.sandbox)
        signed = [with_fee_payer_signature_wire(wire, self.fee_payers.sign(address, message))
                  for _, wire, message in decoded]
        transactions = [VersionedTransaction.from_bytes(s) for s in signed]
        return {
            "decode": lambda: sum(1 for w in self.wires if message_bytes(decode_wire(w)[0])),
            "inspect": lambda: sum(self._inspect(tx, message) for tx, _, message in decoded),
            "co-sign": lambda: sum(1 for _, wire, message in decoded
                                   if with_fee_payer_signature_wire(wire, self.fee_payers.sign(address, message))),
            "simulate": lambda: sum(chain.simulate(s, signatures_verified=True).ok for s in signed),
            "_check": lambda: sum(self.sandbox.simulate(tx).ok for tx in transactions),
        }

    def _inspect(self, tx: VersionedTransaction, message: bytes) -> bool:
        exact = inspect_exact(tx, asset=self.mint, pay_to=self.pay_to, amount=AMOUNT,
                              fee_payers=self.fee_payers.addresses(), message=message)
        return exact.payer == self.payer_address

    def reference_verify(self) -> Callable[[], int]:
        """The x402 SDK's facilitator verify over every payment, in-process, as `paywarden-bench reference` serves
        it."""
        from x402.schemas import PaymentPayload, PaymentRequirements

        facilitator = reference_facilitator(self.sandbox, self.fee_payer)

        async def verify_all() -> int:
            valid = 0
            for body in self.bodies:  # what the FastAPI handler does with the request's JSON, without the server
                parsed = json.loads(body)
                answer = await facilitator.verify(PaymentPayload.model_validate(parsed["paymentPayload"]),
                                                  PaymentRequirements.model_validate(parsed["paymentRequirements"]))
                valid += bool(answer.is_valid)
            return valid

        return lambda: asyncio.run(verify_all())


def timed(step: Callable[[], int], count: int) -> tuple[float, int]:
    """CPU microseconds per payment of one pass of `step`, and how many payments passed it."""
    start = time.process_time()
    passed = step()
    return (time.process_time() - start) * 1e6 / count, passed


def measure(payments: int, rounds: int) -> dict[str, Any]:
    bench = Bench(payments)
    steps = {**bench.steps(), "reference verify": bench.reference_verify()}
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            micros, passed = timed(step, payments)
            if passed != payments:
                raise RuntimeError(f"{name}: {payments - passed} of {payments} payments did not pass")
            samples[name].append(micros)
    figures = {name: statistics.median(values) for name, values in samples.items()}
    floor = round(sum(figures[name] for name in STEPS), 1)  # the ceiling is the printed floor's
    return {"payments": payments, "rounds": rounds, "micros": {name: round(figures[name], 1) for name in STEPS},
            "floor_micros": floor, "ceiling_per_second": round(1e6 / floor),
            "simulate_with_signatures_micros": round(figures["_check"], 1),
            "reference_verify_micros": round(figures["reference verify"], 1)}


def report(figures: dict[str, Any]) -> Sequence[str]:
    micros = figures["micros"]
    return [
        f"the chain work of one verify, one process, CPU per payment (median of {figures['rounds']} rounds of "
        f"{figures['payments']}):",
        *(f"  {name:<10} {micros[name]:8.1f} µs" for name in STEPS),
        f"  {'floor':<10} {figures['floor_micros']:8.1f} µs  → at most {figures['ceiling_per_second']:,} "
        "verifies/s on one core with HTTP, authentication and the event store free",
        f"the same simulation checking both signatures (as the reference asks): "
        f"{figures['simulate_with_signatures_micros']:.1f} µs",
        f"the reference's verify in-process, without its server: {figures['reference_verify_micros']:.1f} µs",
    ]


def run(args: argparse.Namespace) -> int:
    if args.payments < 1 or args.rounds < 1:
        raise SystemExit("paywarden-bench floor: --payments and --rounds must be at least 1")
    figures = measure(args.payments, args.rounds)
    print("\n".join(report(figures)))
    if args.json:
        print(json.dumps(figures))
    return 0
