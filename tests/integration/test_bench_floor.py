"""`paywarden-bench floor`: the chain work of a verify timed alone, on a real LiteSVM and the x402 SDK's facilitator."""

import json
import subprocess
import sys

import pytest
from solders.keypair import Keypair

from domain.errors import PaymentRuleError
from interfaces.bench.floor import STEPS, Bench, measure


def test_every_step_passes_every_payment_and_the_floor_is_their_sum():
    figures = measure(payments=40, rounds=1)
    micros = figures["micros"]
    assert set(micros) == set(STEPS)
    assert all(value > 0 for value in micros.values())
    assert figures["floor_micros"] == pytest.approx(sum(micros.values()), abs=0.3)
    assert figures["ceiling_per_second"] == round(1e6 / figures["floor_micros"]), figures
    # The simulation that checks both signatures does strictly more work than the one Paywarden asks for.
    assert figures["simulate_with_signatures_micros"] > micros["simulate"]
    assert figures["reference_verify_micros"] > 0


def test_a_step_that_refuses_payments_stops_the_benchmark(monkeypatch):
    """A floor measured over payments that failed early would be a floor of nothing: the run refuses it."""
    steps = Bench.steps

    def one_refused(self: Bench) -> dict:
        made = steps(self)
        simulate = made["simulate"]
        return {**made, "simulate": lambda: simulate() - 1}

    monkeypatch.setattr(Bench, "steps", one_refused)
    with pytest.raises(RuntimeError, match="simulate: 1 of 12 payments did not pass"):
        measure(payments=12, rounds=1)


def test_the_inspection_step_runs_the_exact_rules():
    """The inspect step is Paywarden's own: payments that pay someone else than the requirements say fail it."""
    bench = Bench(3)
    bench.pay_to = str(Keypair().pubkey())
    with pytest.raises(PaymentRuleError):
        bench.steps()["inspect"]()


def test_the_command_prints_the_figures_and_one_json_line():
    done = subprocess.run([sys.executable, "-m", "interfaces.bench", "floor", "--payments", "30",
                           "--rounds", "1", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    assert f"at most {figures['ceiling_per_second']:,} verifies/s" in done.stdout
    assert all(f"  {step}" in done.stdout for step in STEPS)
    refused = subprocess.run([sys.executable, "-m", "interfaces.bench", "floor", "--payments", "0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "--payments and --rounds must be at least 1" in refused.stderr
