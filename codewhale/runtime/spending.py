"""What each sub-agent of the session spent: tokens and dollars, in delegation order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from codewhale.providers.types import Usage
from codewhale.subagents.child import Child


@dataclass(frozen=True)
class AgentSpending:
    """One child's tokens and cost, its own sub-agents' included."""

    agent_id: str
    nickname: str
    type: str
    status: str
    # 0 for a child the session opened, 1 for one of its children, and so on.
    depth: int
    usage: Usage
    # None when unknown: no price for its model, or it ran in an earlier process.
    cost_usd: float | None


def spending_of(children: Iterable[Child]) -> list[AgentSpending]:
    """Every child, each listed after the one that opened it (depth-first, oldest first)."""
    everyone = sorted(children, key=lambda child: child.record.created_at_ms)
    known = {child.agent_id for child in everyone}
    by_parent: dict[str | None, list[Child]] = {}
    for child in everyone:
        parent = child.record.parent_agent_id
        by_parent.setdefault(parent if parent in known else None, []).append(child)
    listed: list[AgentSpending] = []

    def walk(parent: str | None, depth: int) -> None:
        for child in by_parent.get(parent, []):
            listed.append(_spending(child, depth))
            walk(child.agent_id, depth + 1)

    walk(None, 0)
    return listed


def _spending(child: Child, depth: int) -> AgentSpending:
    record = child.record
    if child.meter is not None:
        usage, cost = child.meter.total, child.meter.cost_usd
    else:
        # Run by an earlier process: its record has the tokens, not what they cost.
        usage, cost = _usage(record.usage) + _usage(record.descendant_usage), None
    return AgentSpending(
        agent_id=record.agent_id,
        nickname=record.nickname,
        type=record.type,
        status=record.status,
        depth=depth,
        usage=usage,
        cost_usd=cost,
    )


def _usage(counts: dict[str, int]) -> Usage:
    """A record's counts (keyed as USAGE_KEYS) as a Usage."""
    return Usage(
        input_tokens=counts.get("input", 0),
        output_tokens=counts.get("output", 0),
        cache_hit_tokens=counts.get("cache_hit", 0),
        cache_miss_tokens=counts.get("cache_miss", 0),
    )
