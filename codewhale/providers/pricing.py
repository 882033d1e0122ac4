"""What a response cost, in US dollars, where the provider preset knows its prices.

Imported on the startup path: standard library and `codewhale.providers.types` only.

Prices are USD per 1M tokens, keyed by (preset name, model id). A model missing from
`PRICES` has no known price and its cost is None; a provider in `FREE_PROVIDERS`
costs 0 whatever the model. Both are plain containers another module may extend
(overrides are not configurable yet).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the status line prices before the first frame; the engine loads these
    from codewhale.providers.types import Usage

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M tokens. `off_peak` holds the cheaper rates outside the provider's peak hours."""

    input_cache_hit: float
    input_cache_miss: float
    output: float
    off_peak: ModelPrice | None = None


def deepseek_is_peak(at: datetime) -> bool:
    """DeepSeek's peak hours: 01:00-04:00 and 06:00-10:00 UTC, Monday to Friday.

    That is 09:00-12:00 and 14:00-18:00 Beijing time, the same weekday. DeepSeek also
    bills Chinese public holidays off-peak; those are not modelled here, so a holiday
    is priced at the peak rate (an over-estimate, never an under-estimate).
    """
    at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    if at.weekday() >= 5:
        return False
    return 1 <= at.hour < 4 or 6 <= at.hour < 10


# DeepSeek, from https://api-docs.deepseek.com/quick_start/pricing ("Models & Pricing",
# the version checked 2026-11-15; recorded here 2026-11-23). Off-peak is half of peak.
# The page lists `deepseek-flash` (DeepSeek-V4.1-Flash) and `deepseek-v4-pro`; its footnote
# says the legacy id `deepseek-v4-flash` is still accepted, served by the Flash model and
# billed at Flash prices. `deepseek-chat` and `deepseek-reasoner` were retired on
# 2026-07-24 (https://api-docs.deepseek.com/news/news260424) and have no published price,
# so they are left out.
_DEEPSEEK_FLASH = ModelPrice(
    input_cache_hit=0.006,
    input_cache_miss=0.30,
    output=1.20,
    off_peak=ModelPrice(input_cache_hit=0.003, input_cache_miss=0.15, output=0.60),
)
_DEEPSEEK_V4_PRO = ModelPrice(
    input_cache_hit=0.044,
    input_cache_miss=1.32,
    output=3.96,
    off_peak=ModelPrice(input_cache_hit=0.022, input_cache_miss=0.66, output=1.98),
)

# Not priced, checked 2026-11 (their cost shows as unknown, never guessed):
# - openai: the preset's models (gpt-4.1, gpt-4.1-mini) are no longer on OpenAI's own
#   page (https://developers.openai.com/api/docs/pricing), and the copies of it found
#   disagree (gpt-4.1 at $2.00 or $1.00 per 1M input), so no figure could be confirmed.
# - moonshot: the preset's kimi-k2-0905-preview and kimi-k2-turbo-preview were retired
#   on 2026-05-25 (https://www.chatbase.co/blog/kimi-k2-api), and Moonshot's own page
#   (https://platform.kimi.ai/docs/pricing/chat) could not be read to confirm a price.
# - openrouter: it sends each response's price itself (`usage.cost`, which `cost_usd`
#   takes as `reported`): https://openrouter.ai/docs/use-cases/usage-accounting.
PRICES: dict[tuple[str, str], ModelPrice] = {
    ("deepseek", "deepseek-flash"): _DEEPSEEK_FLASH,
    ("deepseek", "deepseek-v4-flash"): _DEEPSEEK_FLASH,
    ("deepseek", "deepseek-v4-pro"): _DEEPSEEK_V4_PRO,
}

# Providers whose prices change with the time of day: a predicate "is `at` peak time?".
# A price with `off_peak` rates but no entry here is always charged its peak rates.
PEAK_HOURS: dict[str, Callable[[datetime], bool]] = {
    "deepseek": deepseek_is_peak,
}

# Providers with no per-token bill. Only the offline model CodeWhale runs itself: the
# other self-hosted presets (ollama, vllm, ...) can be pointed at a paid remote server.
FREE_PROVIDERS: set[str] = {"local"}


def price_for(provider: str, model: str) -> ModelPrice | None:
    """The price of `model` on `provider` (preset name, case-insensitive), or None."""
    return PRICES.get((provider.strip().lower(), model.strip()))


def cost_usd(
    provider: str,
    model: str,
    usage: Usage,
    *,
    at: datetime | None = None,
    reported: float | None = None,
) -> float | None:
    """The cost of one response's `usage`, or None when the model has no known price.

    `reported` is the provider's own figure for the response (OpenRouter's `usage.cost`):
    it is what was billed, so it wins over any table.

    `at` is when the request ran (default: now; a naive datetime is taken as UTC); it
    only matters for providers with peak hours, so price each response as it arrives
    and add up the dollars, rather than pricing a session's summed usage at the end.

    Input tokens are priced as reported cache hits and misses; any input the provider
    did not assign to either (hit + miss < input) is priced as a cache miss. Reasoning
    tokens are already part of `output_tokens` and are not charged twice.
    """
    if reported is not None:
        return reported
    name = provider.strip().lower()
    if name in FREE_PROVIDERS:
        return 0.0
    price = price_for(name, model)
    if price is None:
        return None
    if price.off_peak is not None and name in PEAK_HOURS:
        when = at if at is not None else datetime.now(UTC)
        if not PEAK_HOURS[name](when):
            price = price.off_peak
    hit = max(usage.cache_hit_tokens, 0)
    miss = max(usage.cache_miss_tokens, 0)
    miss += max(usage.input_tokens - hit - miss, 0)
    output = max(usage.output_tokens, 0)
    total = hit * price.input_cache_hit + miss * price.input_cache_miss + output * price.output
    return total / PER_MILLION


def format_cost(value: float | None) -> str:
    """A cost for the status line: "" when unknown, "$0.0042" below a cent, "$1.23" above.

    Amounts that would round to $0.0000 show as "<$0.0001", so a paid call never reads
    as free; exactly 0 (a local model) shows as "$0.00".
    """
    if value is None or not math.isfinite(value) or value < 0:
        return ""
    if value == 0:
        return "$0.00"
    if round(value, 4) == 0:
        return "<$0.0001"
    if round(value, 4) < 0.01:
        return f"${value:.4f}"
    return f"${value:,.2f}"
