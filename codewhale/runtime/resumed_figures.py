"""The figures a resumed session's status line opens with, from its file alone.

`open_runtime` counts a resumed session on from the usage totals its file keeps, and its
first context estimate sums the messages' sizes the file gives (runtime/build.py). The
same sums are taken here without opening the session (no engine loop, provider client or
config models), so a front end can show them while the session opens.
"""

from __future__ import annotations

from dataclasses import dataclass

from codewhale.engine.compaction import estimate_messages
from codewhale.engine.conversation import UsageMeter
from codewhale.providers.types import Usage
from codewhale.sessions.store import LoadedSession


@dataclass(frozen=True)
class ResumedFigures:
    """What `Runtime.usage`, `cost_usd` and `context_use` will say once it has opened."""

    usage: Usage  # every token it spent, its children's too
    cost: float | None
    # The messages' share of `context_use`: the rest is the tool schemas'
    # (`Runtime.tools_context`).
    messages_tokens: int


def resumed_figures(loaded: LoadedSession) -> ResumedFigures:
    meter = UsageMeter.from_json(loaded.meter)
    tokens = estimate_messages(loaded.messages, 0, loaded.sizes)
    return ResumedFigures(meter.total, meter.cost_usd, tokens)
