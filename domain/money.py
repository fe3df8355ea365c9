"""USDC amounts as people read and write them: the one formatter and the one parser of the whole service.

Amounts are integers of atomic units everywhere (USDC has 6 decimals: 1 USDC is 1,000,000 units). Shown, an amount
is exact to the unit (`0.042`, never a rounded `0.04`), trailing zeros dropped, thousands grouped on pages and
not in files (`1,234.5` / `1234.5`). Entered, a price in USDC has at most 6 decimals; a 7th is refused, never
rounded, so the price a merchant typed is the price charged.
"""

from __future__ import annotations

import re

from domain.networks import USDC_DECIMALS, network

UNIT = 10**USDC_DECIMALS
MAX_ATOMIC = 10**16 - 1  # a price of at most 16 digits of atomic units (the API's limit since the first wave)
_USDC = re.compile(rf"^(?P<whole>[0-9]{{1,10}})(?:\.(?P<fraction>[0-9]{{1,{USDC_DECIMALS}}}))?$")


class AmountError(ValueError):
    """A USDC amount that is not a positive number of at most 6 decimals within the price limit."""


def usdc(atomic: int, *, grouped: bool = True) -> str:
    """`42000` → `0.042`; `1234500000` → `1,234.5` (`1234.5` when not `grouped`). Exact: integer arithmetic."""
    sign, atomic = ("-", -atomic) if atomic < 0 else ("", atomic)
    whole, fraction = divmod(atomic, UNIT)
    text = f"{whole:,}" if grouped else str(whole)
    decimals = f"{fraction:0{USDC_DECIMALS}d}".rstrip("0")
    return f"{sign}{text}.{decimals}" if decimals else f"{sign}{text}"


def parse_usdc(text: str) -> int:
    """`"0.007"` → `7000`. At most 6 decimals, more than zero, at most MAX_ATOMIC units; no sign, no exponent."""
    found = _USDC.match(text.strip())
    if found is None:
        raise AmountError(f"{text.strip() or 'an empty value'} is not an amount of USDC with at most "
                          f"{USDC_DECIMALS} decimals (for example 0.01)")
    atomic: int = int(found["whole"]) * UNIT + int((found["fraction"] or "").ljust(USDC_DECIMALS, "0"))
    if atomic <= 0:
        raise AmountError("the amount must be more than 0")
    if atomic > MAX_ATOMIC:
        raise AmountError(f"the amount must be at most {usdc(MAX_ATOMIC)} USDC")
    return atomic


def is_usdc(network_id: str, asset: str) -> bool:
    """Whether `asset` is the USDC mint of the network (amounts of another asset are not USDC)."""
    known = network(network_id)
    return known is not None and bool(known.usdc_mint == asset)

