"""USDC amounts shown exact to the atomic unit and prices entered in USDC with at most 6 decimals."""

from __future__ import annotations

import pytest

from domain.money import MAX_ATOMIC, AmountError, is_usdc, parse_usdc, usdc
from domain.networks import DEVNET, MAINNET


@pytest.mark.parametrize(("atomic", "shown"), [
    (42_000, "0.042"),  # the overview used to say 0.04
    (1, "0.000001"), (0, "0"), (1_000_000, "1"), (1_234_500_000, "1,234.5"), (10_000, "0.01"),
    (MAX_ATOMIC, "9,999,999,999.999999"), (-7_000, "-0.007"),
])
def test_an_amount_is_shown_exact_to_the_atomic_unit(atomic, shown):
    assert usdc(atomic) == shown
    assert usdc(atomic, grouped=False) == shown.replace(",", "")


@pytest.mark.parametrize(("text", "atomic"), [
    ("0.007", 7_000), ("0.01", 10_000), ("12", 12_000_000), (" 1.000001 ", 1_000_001), ("0.000001", 1),
    ("9999999999.999999", MAX_ATOMIC),
])
def test_a_price_in_usdc_is_read_to_the_atomic_unit(text, atomic):
    assert parse_usdc(text) == atomic
    assert parse_usdc(usdc(atomic, grouped=False)) == atomic


@pytest.mark.parametrize("text", ["0.0000001", "1.1234567", "0", "0.000000", "-1", "+1", "1e3", "", "1,5", ".5",
                                  "1.", "99999999999", "NaN", "0x10", "١٢"])
def test_a_price_that_is_not_whole_atomic_units_of_usdc_is_refused_never_rounded(text):
    with pytest.raises(AmountError):
        parse_usdc(text)


def test_only_the_networks_own_usdc_mint_is_usdc():
    assert is_usdc(DEVNET.caip2, DEVNET.usdc_mint) and is_usdc(MAINNET.caip2, MAINNET.usdc_mint)
    assert not is_usdc(DEVNET.caip2, MAINNET.usdc_mint) and not is_usdc("solana:unknown", DEVNET.usdc_mint)
