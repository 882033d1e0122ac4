"""What a chat-completions stream produces: deltas while it runs, one Completion at the end."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Token counts reported by the provider; `estimated` when a server sent none (some
    local servers) and they were worked out from the bytes instead."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_hit_tokens: int = 0
    cache_miss_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def counts(self) -> dict[str, int]:
        """The four counts reports show (events, exec's result record, rlm_close)."""
        return {
            "input": self.input_tokens,
            "output": self.output_tokens,
            "cache_hit": self.cache_hit_tokens,
            "cache_miss": self.cache_miss_tokens,
        }

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_hit_tokens=self.cache_hit_tokens + other.cache_hit_tokens,
            cache_miss_tokens=self.cache_miss_tokens + other.cache_miss_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            estimated=self.estimated or other.estimated,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens - other.input_tokens,
            output_tokens=self.output_tokens - other.output_tokens,
            cache_hit_tokens=self.cache_hit_tokens - other.cache_hit_tokens,
            cache_miss_tokens=self.cache_miss_tokens - other.cache_miss_tokens,
            reasoning_tokens=self.reasoning_tokens - other.reasoning_tokens,
            estimated=self.estimated,
        )

    @classmethod
    def from_wire(cls, usage: Mapping[str, Any]) -> Usage:
        """Read DeepSeek's and OpenAI's field names alike."""
        prompt = _int(usage.get("prompt_tokens"))
        completion = _int(usage.get("completion_tokens"))
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
        hit = usage.get("prompt_cache_hit_tokens")
        if hit is None and isinstance(prompt_details, Mapping):
            hit = prompt_details.get("cached_tokens")
        hit = _int(hit)
        miss = usage.get("prompt_cache_miss_tokens")
        miss = _int(miss) if miss is not None else max(prompt - hit, 0)
        reasoning = 0
        if isinstance(completion_details, Mapping):
            reasoning = _int(completion_details.get("reasoning_tokens"))
        return cls(prompt, completion, hit, miss, reasoning)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def reported_cost(usage: Mapping[str, Any]) -> float | None:
    """What the provider says the response cost, in USD, or None when it does not say.

    OpenRouter sends `usage.cost` in credits, and one credit is one US dollar
    (https://openrouter.ai/docs/use-cases/usage-accounting, read 2026-11). A value that
    is not a finite, non-negative number is no figure at all.
    """
    cost = usage.get("cost")
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        return None
    return float(cost) if math.isfinite(cost) and cost >= 0 else None


@dataclass(frozen=True)
class ToolCall:
    """One complete tool call; `arguments` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str
    index: int = 0


@dataclass(frozen=True)
class Completion:
    """The whole of one model response."""

    content: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    usage: Usage | None
    model: str
    # The provider's own figure for this response, in USD (OpenRouter's `usage.cost`).
    cost: float | None = None


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of tool call `index`; `id` and `name` arrive with its first fragment."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True)
class StreamFinished:
    completion: Completion


StreamEvent = TextDelta | ReasoningDelta | ToolCallDelta | StreamFinished
