"""The provider's own `usage.cost`, read from a real stream, and the built-in price table."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewhale.providers.client import ChatClient
from codewhale.providers.presets import PRESETS
from codewhale.providers.pricing import FREE_PROVIDERS, PRICES, cost_usd
from codewhale.providers.types import StreamFinished, Usage, reported_cost
from codewhale.tui.usage_view import cost_text
from tests.support.llm_server import Reply
from tests.support.settings import loopback_settings

HELLO = [{"role": "user", "content": "hello"}]
RECORDED = Path(__file__).parents[1] / "fixtures" / "streams" / "openrouter_reasoning.sse"
USAGE = Usage(input_tokens=1_000, output_tokens=100, cache_miss_tokens=1_000)


async def completion_of(llm, reply: Reply):
    llm.enqueue(reply)
    async with ChatClient(loopback_settings(llm.base_url), retry_base_delay_secs=0.01) as client:
        events = [event async for event in client.stream(HELLO)]
    (finished,) = [event for event in events if isinstance(event, StreamFinished)]
    return finished.completion


async def test_usage_cost_in_the_stream_is_the_responses_cost(llm):
    usage = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55, "cost": 0.0042}
    completion = await completion_of(llm, Reply(text="hi", usage=usage))
    assert completion.cost == 0.0042
    assert completion.usage == Usage(input_tokens=50, output_tokens=5, cache_miss_tokens=50)


async def test_openrouters_recorded_stream_carries_its_cost(llm):
    completion = await completion_of(llm, Reply(recorded_sse=RECORDED.read_bytes()))
    assert completion.cost == 0.000482


async def test_a_stream_whose_usage_has_no_cost_has_none(llm):
    completion = await completion_of(llm, Reply(text="hi"))
    assert completion.usage is not None and completion.cost is None


@pytest.mark.parametrize("value", ["0.1", True, -0.5, float("nan"), float("inf"), None])
def test_a_cost_that_is_not_a_finite_amount_is_no_figure(value):
    assert reported_cost({"prompt_tokens": 1, "cost": value}) is None


def test_the_providers_own_figure_wins_over_the_table():
    assert cost_usd("deepseek", "deepseek-v4-pro", USAGE, reported=0.5) == 0.5
    assert cost_usd("openrouter", "deepseek/deepseek-chat", USAGE, reported=0.01) == 0.01
    assert cost_usd("openrouter", "deepseek/deepseek-chat", USAGE) is None


def test_every_price_belongs_to_a_preset_and_is_positive():
    for (provider, model), price in PRICES.items():
        assert provider in PRESETS, provider
        assert model, provider
        rates = (price.input_cache_hit, price.input_cache_miss, price.output)
        assert all(rate > 0 for rate in rates), (provider, model)
        assert price.input_cache_hit <= price.input_cache_miss <= price.output
        if price.off_peak is not None:
            assert price.off_peak.output < price.output


def test_a_preset_without_a_published_price_says_cost_unknown():
    unpriced = [
        name
        for name, preset in PRESETS.items()
        if name not in FREE_PROVIDERS and cost_usd(name, preset.default_model, USAGE) is None
    ]
    # OpenAI's and Moonshot's pages no longer list the preset models (PROVIDERS.md says why).
    assert {"openai", "moonshot", "openrouter", "custom"} <= set(unpriced)
    assert cost_text(cost_usd("openai", "gpt-4.1", USAGE)) == "cost unknown"
    assert cost_text(cost_usd("deepseek", "deepseek-v4-pro", USAGE)).startswith("$")
    assert cost_text(cost_usd("local", "anything", USAGE)) == "$0.00"
