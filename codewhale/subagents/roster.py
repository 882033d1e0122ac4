"""Who the children are: this run's children, earlier runs' records, and lookup by name.

The roster is the one place a child is found: by id, unique name or unique
nickname, including a record an earlier run left (which is adopted on first
reference, so it can be continued or closed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from codewhale.subagents.budget import Budget
from codewhale.subagents.child import Child, Opener
from codewhale.subagents.records import (
    WHALES,
    AgentSnapshot,
    WorkerRecord,
    new_agent_id,
    now_ms,
    snapshot_of_record,
)
from codewhale.subagents.spawn import SpawnError
from codewhale.subagents.store import SubagentStore


class Roster:
    def __init__(self, store: SubagentStore, prior: list[WorkerRecord]) -> None:
        self.store = store
        self.children: dict[str, Child] = {}
        # Records of earlier runs not yet adopted; they stay in the state file as they are.
        self.prior = prior

    def __iter__(self) -> Iterator[Child]:
        return iter(self.children.values())

    def add(self, child: Child) -> None:
        self.children[child.agent_id] = child

    def get(self, agent_id: str) -> Child | None:
        return self.children.get(agent_id)

    # -- counting ------------------------------------------------------------------------

    def live_count(self) -> int:
        return sum(1 for child in self if child.live)

    def unfinished_ids(self) -> list[str]:
        return [c.agent_id for c in self if not c.record.terminal]

    def hold_for(self, opener: Opener) -> Callable[[], bool]:
        """For an engine: whether children it opened are still running.

        A child whose record has ended has already posted its completion, so it no
        longer holds its opener even while its task winds down.
        """
        return lambda: any(c.live and not c.record.terminal and c.opener is opener for c in self)

    # -- names ---------------------------------------------------------------------------

    def nickname(self) -> str:
        # Unique among this conversation's children, which is where nicknames resolve.
        taken = {c.record.nickname for c in self}
        for round_ in range(1, 1000):
            for whale in WHALES:
                name = whale if round_ == 1 else f"{whale}-{round_}"
                if name not in taken:
                    return name
        return new_agent_id()  # pragma: no cover - a thousand rounds of whales

    def check_name_free(self, name: str) -> None:
        for other in self:
            if other.record.name == name and not other.record.terminal:
                age = (now_ms() - other.record.created_at_ms) // 1000
                raise SpawnError(
                    f"Agent session name '{name}' is already used by {other.record.agent_id} "
                    f"({other.record.status}, {age}s old)"
                )

    def find(self, reference: Any, opener: Opener) -> Child:
        """By id, then unique name, then unique nickname; earlier runs' records too."""
        if not isinstance(reference, str) or not reference.strip():
            raise SpawnError("agent_eval/agent_close need 'name' or 'agent_id'")
        reference = reference.strip()
        if reference in self.children:
            return self.children[reference]
        for record in self.prior:
            if record.agent_id == reference:
                return self.adopt(record, opener)
        for key in ("name", "nickname"):
            matches = [c for c in self if _matches(getattr(c.record, key), reference)]
            if len(matches) > 1:
                raise SpawnError(f"Agent session name '{reference}' is ambiguous; use an agent_id")
            if matches:
                return matches[0]
        raise SpawnError(f"Agent session {reference} not found")

    # -- earlier runs --------------------------------------------------------------------

    def adopt(self, record: WorkerRecord, opener: Opener) -> Child:
        """An earlier run's child, listed again and continuable, reporting to `opener`."""
        self.prior = [r for r in self.prior if r is not record]
        if record.status == "interrupted" and record.checkpoint is None:
            # The state file may lag the transcript (coalesced writes): trust the file.
            lines = len(self.store.load_transcript(record.agent_id))
            if lines:
                record.checkpoint = self.store.checkpoint(record.agent_id, lines)
        # Its budget holds in this run too: a continuation spends under the same limits.
        child = Child(record=record, opener=opener, budget=Budget.from_json(record.budget))
        child.done.set()
        self.add(child)
        return child

    def adopt_session(self, session_id: str, opener: Opener) -> list[WorkerRecord]:
        mine = [r for r in self.prior if r.session_id == session_id]
        for record in mine:
            self.adopt(record, opener)
        return mine

    # -- reading -------------------------------------------------------------------------

    def snapshot(self) -> tuple[AgentSnapshot, ...]:
        return tuple(snapshot_of_record(c.record) for c in self)

    def records(self, include_archived: bool = False) -> list[dict[str, Any]]:
        current = [c.record.to_json() for c in self]
        if not include_archived:
            return current
        prior = [{**record.to_json(), "from_prior_session": True} for record in self.prior]
        return prior + current

    def all_records(self) -> list[WorkerRecord]:
        """Everything the state file keeps: this run's records and the earlier ones."""
        current = [c.record for c in self]
        ids = {r.agent_id for r in current}
        return [r for r in self.prior if r.agent_id not in ids] + current


def _matches(value: str, reference: str) -> bool:
    return value == reference or value.lower() == reference.lower()
