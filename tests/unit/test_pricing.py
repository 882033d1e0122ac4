"""Cost of a response from the price table, and how the status line shows it."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import pytest

from codewhale.providers.pricing import (
    PRICES,
    ModelPrice,
    cost_usd,
    deepseek_is_peak,
    format_cost,
    price_for,
)
from codewhale.providers.types import Usage

# Monday 2026-11-23: 02:00 UTC is inside DeepSeek's first peak window.
PEAK = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)
# The same Monday at 12:00 UTC (20:00 in Beijing) is off-peak.
OFF_PEAK = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)

USAGE = Usage(
    input_tokens=120_000,
    output_tokens=5_000,
    cache_hit_tokens=100_000,
    cache_miss_tokens=20_000,
    reasoning_tokens=1_000,
)


def test_deepseek_pro_peak_cost_prices_hits_misses_and_output_apart():
    cost = cost_usd("deepseek", "deepseek-v4-pro", USAGE, at=PEAK)
    # 100k hits at $0.044/M + 20k misses at $1.32/M + 5k output at $3.96/M.
    assert cost == pytest.approx(0.0044 + 0.0264 + 0.0198, abs=1e-12)
    assert cost == pytest.approx(0.0506, abs=1e-12)


def test_deepseek_pro_off_peak_cost_is_half():
    assert cost_usd("deepseek", "deepseek-v4-pro", USAGE, at=OFF_PEAK) == pytest.approx(
        0.0253, abs=1e-12
    )


def test_deepseek_flash_peak_cost():
    cost = cost_usd("deepseek", "deepseek-flash", USAGE, at=PEAK)
    # 100k at $0.006/M + 20k at $0.30/M + 5k at $1.20/M.
    assert cost == pytest.approx(0.0006 + 0.006 + 0.006, abs=1e-12)


def test_legacy_v4_flash_id_is_billed_at_flash_prices():
    assert price_for("deepseek", "deepseek-v4-flash") == price_for("deepseek", "deepseek-flash")


def test_reasoning_tokens_are_not_charged_on_top_of_output():
    without = Usage(input_tokens=0, output_tokens=5_000)
    with_reasoning = Usage(input_tokens=0, output_tokens=5_000, reasoning_tokens=4_000)
    assert cost_usd("deepseek", "deepseek-v4-pro", without, at=PEAK) == cost_usd(
        "deepseek", "deepseek-v4-pro", with_reasoning, at=PEAK
    )


def test_input_not_split_into_hit_or_miss_is_priced_as_miss():
    usage = Usage(
        input_tokens=130_000,
        output_tokens=5_000,
        cache_hit_tokens=100_000,
        cache_miss_tokens=20_000,
    )
    # The 10k unassigned input tokens cost the miss rate, $1.32/M at peak.
    assert cost_usd("deepseek", "deepseek-v4-pro", usage, at=PEAK) == pytest.approx(
        0.0506 + 0.0132, abs=1e-12
    )


def test_input_with_no_cache_split_at_all_is_all_miss():
    usage = Usage(input_tokens=1_000_000, output_tokens=0)
    assert cost_usd("deepseek", "deepseek-v4-pro", usage, at=PEAK) == pytest.approx(1.32)


def test_unknown_model_or_provider_has_no_cost():
    assert cost_usd("deepseek", "deepseek-chat", USAGE, at=PEAK) is None
    assert cost_usd("deepseek", "deepseek-reasoner", USAGE, at=PEAK) is None
    assert cost_usd("deepseek", "no-such-model", USAGE, at=PEAK) is None
    assert cost_usd("openai", "gpt-4.1", USAGE) is None
    assert cost_usd("custom", "deepseek-v4-pro", USAGE) is None


def test_local_model_costs_nothing():
    assert cost_usd("local", "smollm2-135m", USAGE) == 0.0
    assert cost_usd("local", "anything", Usage()) == 0.0


def test_provider_name_is_case_insensitive():
    assert cost_usd(" DeepSeek ", "deepseek-v4-pro", USAGE, at=PEAK) == pytest.approx(0.0506)


def test_empty_usage_costs_zero_for_a_priced_model():
    assert cost_usd("deepseek", "deepseek-v4-pro", Usage(), at=PEAK) == 0.0


def test_without_a_time_the_current_rate_applies():
    cost = cost_usd("deepseek", "deepseek-v4-pro", USAGE)
    assert cost in (pytest.approx(0.0506), pytest.approx(0.0253))


def test_price_table_can_be_extended(monkeypatch):
    monkeypatch.setitem(PRICES, ("openai", "my-model"), ModelPrice(1.0, 2.0, 4.0))
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_hit_tokens=500_000)
    assert cost_usd("openai", "my-model", usage) == pytest.approx(0.5 + 1.0 + 4.0)


@pytest.mark.parametrize(
    ("at", "peak"),
    [
        (datetime(2026, 11, 23, 0, 59, tzinfo=UTC), False),
        (datetime(2026, 11, 23, 1, 0, tzinfo=UTC), True),
        (datetime(2026, 11, 23, 3, 59, tzinfo=UTC), True),
        (datetime(2026, 11, 23, 4, 0, tzinfo=UTC), False),
        (datetime(2026, 11, 23, 6, 0, tzinfo=UTC), True),
        (datetime(2026, 11, 23, 9, 59, tzinfo=UTC), True),
        (datetime(2026, 11, 23, 10, 0, tzinfo=UTC), False),
        (datetime(2026, 11, 27, 9, 0, tzinfo=UTC), True),  # Friday
        (datetime(2026, 11, 28, 2, 0, tzinfo=UTC), False),  # Saturday
        (datetime(2026, 11, 29, 7, 0, tzinfo=UTC), False),  # Sunday
        # 10:30 in Beijing on a Monday is 02:30 UTC: peak.
        (datetime(2026, 11, 23, 10, 30, tzinfo=timezone(timedelta(hours=8))), True),
        # A naive time is taken as UTC.
        (datetime(2026, 11, 23, 2, 0), True),
    ],
)
def test_deepseek_peak_hours(at, peak):
    assert deepseek_is_peak(at) is peak


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        (0.0, "$0.00"),
        (0.0042, "$0.0042"),
        (0.00421, "$0.0042"),
        (0.0001, "$0.0001"),
        (0.00004, "<$0.0001"),
        (0.0099, "$0.0099"),
        (0.009996, "$0.01"),
        (0.01, "$0.01"),
        (0.0506, "$0.05"),
        (1.234, "$1.23"),
        (1234.5, "$1,234.50"),
        (float("nan"), ""),
    ],
)
def test_format_cost(value, text):
    assert format_cost(value) == text


def test_sub_cent_costs_never_read_as_zero():
    for value in (1e-9, 0.000_01, 0.000_7, 0.004_99):
        assert format_cost(value) not in ("", "$0.00", "$0.0000")


def test_pricing_does_not_import_heavy_modules():
    probe = (
        "import sys, codewhale.providers.pricing\n"
        "print(','.join(m for m in ('httpx', 'pydantic', 'textual', 'rich') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""
