"""The overview chart's layout (stacking, the axis, services past the palette grouped) and the explorer links."""

from __future__ import annotations

from interfaces.http.console.chart import OTHERS, PALETTE, _nice, layout
from interfaces.http.console.payments import explorer_url
from projections.payment_volume import Bucket, service_of

DAYS = ["2026-11-24", "2026-11-25", "2026-11-26"]


def test_a_day_stacks_its_services_and_the_axis_tops_at_a_round_figure_above_the_highest_day():
    chart = layout("day", DAYS, [Bucket("2026-11-26", "a/x", 30_000, 3), Bucket("2026-11-26", "b/y", 12_000, 1),
                                 Bucket("2026-11-24", "b/y", 5_000, 1)])
    last = chart.columns[-1]
    assert (last.settled, last.payments) == (42_000, 4) and (chart.settled, chart.payments) == (47_000, 5)
    assert [(s.service, s.settled, s.payments) for s in last.segments] == [("a/x", 30_000, 3), ("b/y", 12_000, 1)]
    assert last.segments[0].y + last.segments[0].height == chart.money_bottom  # the first sits on the axis
    assert last.segments[1].y + last.segments[1].height == last.segments[0].y  # the next on top of it
    assert chart.money_ticks[-1][1] == "0.05" and chart.columns[1].segments == []
    assert last.title == "2026-11-26: 0.042 USDC, 4 payments"


def test_a_chart_with_nothing_settled_reads_zero_to_one_usdc():
    chart = layout("day", DAYS, [])
    assert [label for _, label in chart.money_ticks] == ["0", "0.5", "1"]  # not 0, 0 and 0.000001


def test_services_past_the_palette_are_drawn_together_as_other_services():
    rows = [Bucket("2026-11-26", f"s{n}", 1000 * (n + 1), 1) for n in range(len(PALETTE) + 2)]
    chart = layout("day", DAYS, rows)
    assert len(chart.services) == len(PALETTE) and chart.services[-1][0] == OTHERS
    assert chart.services[-1][2] == 1000 + 2000 + 3000 and chart.services[-1][3] == 3
    assert chart.settled == sum(r.settled for r in rows)


def test_the_axis_top():
    assert [_nice(v) for v in (0, 1, 2, 3, 7, 10, 11, 42_000, 2_100_000)] == [1, 1, 2, 5, 10, 10, 20, 50_000, 5_000_000]


def test_a_payments_service_is_its_resources_host_and_first_segment():
    assert service_of({"url": "https://proxy.example.com/weather-1a2b/today?x=1"}) == (
        "proxy.example.com/weather-1a2b", "https://proxy.example.com/weather-1a2b/today?x=1")
    assert service_of({"url": "https://api.example.com"})[0] == "api.example.com"
    assert service_of(None) == ("(no resource)", "") and service_of({"description": "no url"})[0] == "(no resource)"


def test_explorer_links_for_mainnet_and_a_real_devnet_never_for_the_sandboxs_own_devnet():
    mainnet, devnet = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp", "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"
    assert explorer_url(mainnet, "SIG", sandbox=True) == "https://explorer.solana.com/tx/SIG"
    assert explorer_url(devnet, "SIG", sandbox=False) == "https://explorer.solana.com/tx/SIG?cluster=devnet"
    assert explorer_url(devnet, "SIG", sandbox=True) is None and explorer_url(mainnet, None, sandbox=False) is None
