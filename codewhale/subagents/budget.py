"""A child's budget: how long it may run, how many tokens and dollars it may spend.

Each of `max_runtime_secs`, `max_tokens` and `max_cost_usd` comes from agent_open's
argument, else its agent definition's frontmatter, else the `[subagents]` default (unset:
no limit). A child over its budget is stopped and recorded `failed` with the budget it went
past as its reason, so a runaway fan-out costs what the parent allowed and no more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a record's budget is read without the config models
    from codewhale.config_models import SubagentsConfig

FIELDS = ("max_runtime_secs", "max_tokens", "max_cost_usd")


class BudgetError(ValueError):
    """A budget argument that is not a positive number; the message names it."""


@dataclass(frozen=True)
class Budget:
    max_runtime_secs: float | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None

    def runtime_reason(self) -> str:
        return f"budget: ran past max_runtime_secs={self.max_runtime_secs:g}"

    def spent_reason(self, tokens: int, cost: float | None) -> str | None:
        """Why spending `tokens` (and `cost` dollars) is over this budget; None if it is not."""
        if self.max_tokens is not None and tokens > self.max_tokens:
            return f"budget: {tokens:,} tokens used, over max_tokens={self.max_tokens:,}"
        if self.max_cost_usd is not None and cost is not None and cost > self.max_cost_usd:
            return f"budget: ${cost:.4f} spent, over max_cost_usd={self.max_cost_usd:g}"
        return None

    def to_json(self) -> dict[str, float | int]:
        return {name: value for name in FIELDS if (value := getattr(self, name)) is not None}

    @classmethod
    def from_json(cls, data: Any) -> Budget:
        """A record's saved budget; a part that is not a positive number is no limit."""
        if not isinstance(data, Mapping):
            return cls()
        values: dict[str, Any] = {}
        for name in FIELDS:
            try:
                values[name] = budget_value(name, data.get(name))
            except BudgetError:
                values[name] = None
        return cls(**values)


def budget_value(name: str, value: Any) -> float | int | None:
    """`value` as the budget part `name`; None stays None (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise BudgetError(f"{name} must be a positive number, got {value!r}")
    return math.ceil(value) if name == "max_tokens" else value


def parse_budget(
    arguments: Mapping[str, Any], config: SubagentsConfig, preset: Budget | None = None
) -> Budget:
    """The budget agent_open asks for; each part it leaves out comes from `preset` (the
    agent definition's), else from `[subagents]`."""
    values: dict[str, Any] = {}
    for name in FIELDS:
        value = budget_value(name, arguments.get(name))
        if value is None and preset is not None:
            value = getattr(preset, name)
        if value is None:
            value = budget_value(name, getattr(config, name))
        values[name] = value
    return Budget(**values)
