"""The overview's chart, drawn on the server: the geometry of an SVG (templates/_chart.html) of settled USDC and
settled payments per UTC day (30 days) or hour (48 hours), stacked by service, from the payment_volume read model.

No JavaScript and nothing fetched: every bar carries its figures (`data-*` and a `<title>` a browser shows on
hover), and a table of the same figures follows the chart for screen readers and for copying.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from domain.money import UNIT, usdc
from projections.payment_volume import DAY, HOUR, Bucket, VolumeReader

PALETTE = ("#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626")
OTHERS = "other services"
MAX_SERVICES = len(PALETTE) - 1  # the largest services by volume get a colour each; the rest are grouped
WIDTH, LEFT, RIGHT = 760, 76, 12
MONEY_TOP, MONEY_HEIGHT, GAP, COUNT_HEIGHT, AXIS = 26, 150, 48, 60, 24
HEIGHT = MONEY_TOP + MONEY_HEIGHT + GAP + COUNT_HEIGHT + AXIS


@dataclass(frozen=True)
class Segment:
    service: str
    colour: str
    settled: int
    payments: int
    y: float  # top of the money segment
    height: float
    count_y: float
    count_height: float


@dataclass
class Column:
    bucket: str
    label: str  # the tick text, or "" where a tick is skipped
    x: float
    width: float
    settled: int = 0
    payments: int = 0
    segments: list[Segment] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{period(self.bucket)}: {usdc(self.settled)} USDC, " \
               f"{self.payments} payment{'' if self.payments == 1 else 's'}"


@dataclass
class Chart:
    span: str
    title: str
    columns: list[Column]
    services: list[tuple[str, str, int, int]]  # (service, colour, settled, payments) over the whole chart
    money_ticks: list[tuple[float, str]]
    count_ticks: list[tuple[float, str]]
    settled: int
    payments: int
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    plot_width: int = WIDTH - LEFT - RIGHT
    money_top: int = MONEY_TOP
    money_bottom: int = MONEY_TOP + MONEY_HEIGHT
    count_top: int = MONEY_TOP + MONEY_HEIGHT + GAP
    count_bottom: int = MONEY_TOP + MONEY_HEIGHT + GAP + COUNT_HEIGHT


def buckets_of(span: str, now: datetime) -> list[str]:
    """The buckets a chart shows, oldest first, ending with the current one (UTC)."""
    if span == DAY:
        return [(now - timedelta(days=n)).strftime("%Y-%m-%d") for n in range(29, -1, -1)]
    return [(now - timedelta(hours=n)).strftime("%Y-%m-%dT%H") for n in range(47, -1, -1)]


def chart(view: VolumeReader, merchant_id: str, span: str, now: datetime) -> Chart:
    keys = buckets_of(span, now)
    return layout(span, keys, view.get_buckets(merchant_id, span, keys[0], keys[-1]))


def layout(span: str, keys: list[str], rows: list[Bucket]) -> Chart:
    totals: dict[str, list[int]] = {}
    for r in rows:
        total = totals.setdefault(r.service, [0, 0])
        total[0], total[1] = total[0] + r.settled, total[1] + r.payments
    ranked = sorted(totals, key=lambda s: (-totals[s][0], -totals[s][1], s))
    shown = ranked if len(ranked) <= MAX_SERVICES + 1 else ranked[:MAX_SERVICES]
    colour = {s: PALETTE[i] for i, s in enumerate(shown)}
    group = {s: (s if s in colour else OTHERS) for s in ranked}
    if len(shown) < len(ranked):
        colour[OTHERS] = PALETTE[-1]
    cells: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        cell = cells.setdefault((r.bucket, group[r.service]), [0, 0])
        cell[0], cell[1] = cell[0] + r.settled, cell[1] + r.payments
    plot = WIDTH - LEFT - RIGHT
    step = plot / len(keys)
    every = 5 if span == DAY else 6
    columns = [Column(k, _tick(span, k) if (len(keys) - 1 - i) % every == 0 else "", LEFT + i * step + step * 0.12,
                      step * 0.76) for i, k in enumerate(keys)]
    for column in columns:
        for service in colour:
            settled, payments = cells.get((column.bucket, service), (0, 0))
            column.settled, column.payments = column.settled + settled, column.payments + payments
    # Nothing settled: the axis reads 0 to 1 USDC (topped at one atomic unit, its middle tick rounded to 0 twice).
    money_max, count_max = _nice(max((c.settled for c in columns), default=0) or UNIT), \
        _nice(max((c.payments for c in columns), default=0))
    for column in columns:
        money_y, count_y = float(MONEY_TOP + MONEY_HEIGHT), float(MONEY_TOP + MONEY_HEIGHT + GAP + COUNT_HEIGHT)
        for service, hue in colour.items():
            settled, payments = cells.get((column.bucket, service), (0, 0))
            if not payments and not settled:
                continue
            h, ch = MONEY_HEIGHT * settled / money_max, COUNT_HEIGHT * payments / count_max
            money_y, count_y = money_y - h, count_y - ch
            column.segments.append(Segment(service, hue, settled, payments, round(money_y, 2), round(h, 2),
                                           round(count_y, 2), round(ch, 2)))
    services = [(s, hue, sum(cells.get((k, s), (0, 0))[0] for k in keys),
                 sum(cells.get((k, s), (0, 0))[1] for k in keys)) for s, hue in colour.items()]
    return Chart(
        span=span, title="Last 30 days, per UTC day" if span == DAY else "Last 48 hours, per UTC hour",
        columns=columns, services=services,
        money_ticks=[(MONEY_TOP + MONEY_HEIGHT * (1 - f), usdc(round(money_max * f))) for f in (0, 0.5, 1)],
        count_ticks=[(MONEY_TOP + MONEY_HEIGHT + GAP + COUNT_HEIGHT * (1 - f), f"{count_max * f:g}")
                     for f in (0, 1)],
        settled=sum(c.settled for c in columns), payments=sum(c.payments for c in columns))


def period(bucket: str) -> str:
    """A bucket in words: a UTC day as it is (`2026-11-26`), an hour as `2026-11-26 16:00 UTC`."""
    return f"{bucket[:10]} {bucket[11:13]}:00 UTC" if len(bucket) == 13 else bucket


def _tick(span: str, bucket: str) -> str:
    return bucket[5:] if span == DAY else bucket[11:13] + ":00"


def _nice(value: int) -> int:
    """The axis' top: 1, 2 or 5 times a power of ten, at least `value` (and at least 1)."""
    if value <= 1:
        return 1
    power = 1
    while True:
        for factor in (1, 2, 5):
            if factor * power >= value:
                return factor * power
        power *= 10


__all__ = ["DAY", "HOUR", "Chart", "chart", "layout"]
