"""Worker records (what is persisted) and projections (what tools return)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codewhale.subagents.budget import Budget

if TYPE_CHECKING:
    from codewhale.subagents.worktree import Worktree

MAX_EVENTS = 128
TERMINAL = frozenset({"completed", "failed", "cancelled", "interrupted"})
# A finished child an agent_eval message revives (a cancelled one was stopped on purpose).
REVIVABLE = frozenset({"completed", "failed"})
USAGE_KEYS = ("input", "output", "cache_hit", "cache_miss")
WHALES = (
    "Moby",
    "Humphrey",
    "Shamu",
    "Willy",
    "Migaloo",
    "Keiko",
    "Tilikum",
    "Luna",
    "Springer",
    "Granny",
    "Old Tom",
    "Blue",
    "Narwhal",
    "Beluga",
    "Orca",
    "Minke",
    "Bowhead",
    "Sei",
    "Fin",
    "Bryde",
    "Pilot",
    "Sperm",
    "Gray",
    "Right",
    "Humpback",
    "Vaquita",
    "Baiji",
)


def new_agent_id() -> str:
    return "agent_" + secrets.token_hex(4)


def now_ms() -> int:
    return int(time.time() * 1000)


def zero_usage() -> dict[str, int]:
    return dict.fromkeys(USAGE_KEYS, 0)


@dataclass
class WorkerRecord:
    """One child's persisted state, owned by the manager.

    `status` and `worker_status` change only in `lifecycle.apply_move`.
    """

    run_id: str
    agent_id: str
    name: str
    nickname: str
    objective: str
    description: str
    type: str
    role: str
    model: str
    workspace: str
    git_branch: str | None
    session_boot_id: str
    status: str = "pending"
    worker_status: str = "queued"
    created_at_ms: int = field(default_factory=now_ms)
    updated_at_ms: int = field(default_factory=now_ms)
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    steps_taken: int = 0
    # Tool calls started, for the Work sidebar (steps count model responses).
    tool_calls: int = 0
    result: str | None = None
    error: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[str, str] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=zero_usage)
    # Tokens its own children (and theirs) spent: rolled up, never counted in `usage`.
    descendant_usage: dict[str, int] = field(default_factory=zero_usage)
    verification: dict[str, Any] = field(default_factory=lambda: {"status": "self_report_only"})
    report: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    allowed_tools: list[str] = field(default_factory=list)
    # Its definition's colour for the Work sidebar (None: the role's colour).
    color: str | None = None
    fork_context: bool = False
    max_depth: int = 0
    activity: str = ""
    # The process running it: its pid and start token (state.owners), so a record whose
    # process is gone is told from one a live process (another run) still owns.
    owner_pid: int | None = None
    owner_start: str | None = None
    event_seq: int = 0
    # The conversation (session id) it belongs to, and the child that opened it, if any.
    session_id: str = ""
    parent_agent_id: str | None = None
    # Its ceiling (authority.Authority.to_json()), so a continuation never widens it.
    authority: dict[str, Any] = field(default_factory=dict)
    # isolation: worktree: its worktree (worktree.Worktree.to_json()); None: the shared tree.
    # Replaced, never changed in place, so the state log sees every change.
    worktree: dict[str, Any] | None = None
    # Its runs: 1, plus one each time a message revived it after it finished.
    runs: int = 1
    # What it may spend (budget.Budget.to_json()); empty: no limit.
    budget: dict[str, Any] = field(default_factory=dict)
    # Fields a newer CodeWhale wrote: not ours to read, but written back as they were.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def add_event(self, status: str, message: str, **extra: Any) -> None:
        self.event_seq += 1
        entry: dict[str, Any] = {
            "seq": self.event_seq,
            "ts_ms": now_ms(),
            "status": status,
            "message": message,
        }
        entry.update({key: value for key, value in extra.items() if value is not None})
        self.events.append(entry)
        del self.events[:-MAX_EVENTS]
        self.updated_at_ms = entry["ts_ms"]

    def duration_ms(self) -> int:
        if self.started_at_ms is None:
            return 0
        return (self.finished_at_ms or now_ms()) - self.started_at_ms

    def to_json(self) -> dict[str, Any]:
        """Plain data for JSON; shallow copies are enough because it is serialized at once."""
        data = dict(vars(self))
        data.update(data.pop("extra"))
        for key in ("events", "allowed_tools"):
            data[key] = list(data[key])
        for key in (
            "artifacts",
            "usage",
            "descendant_usage",
            "verification",
            "authority",
            "budget",
        ):
            data[key] = dict(data[key])
        if data["worktree"] is not None:
            data["worktree"] = dict(data["worktree"])
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkerRecord:
        known = set(cls.__dataclass_fields__) - {"extra"}
        values = {key: value for key, value in data.items() if key in known}
        values["extra"] = {key: value for key, value in data.items() if key not in known}
        values.setdefault("nickname", values.get("name", ""))
        values.setdefault("session_boot_id", "")
        values.setdefault("description", "")
        return cls(**values)

    def projection(
        self, transcript_handle: dict[str, Any] | None = None, **extra: Any
    ) -> dict[str, Any]:
        """The JSON that agent_open / agent_eval / agent_close return (spec §6)."""
        forked = self.fork_context
        data: dict[str, Any] = {
            "name": self.name,
            "agent_id": self.agent_id,
            "run_id": self.run_id,
            "nickname": self.nickname,
            "description": self.description,
            "type": self.type,
            "role": self.role,
            "model": self.model,
            "status": self.status,
            "worker_status": self.worker_status,
            "terminal": self.terminal,
            "context_mode": "forked" if forked else "fresh",
            "prefix_cache": {"mode": "forked", "parent_prefix": "preserved_byte_identical"}
            if forked
            else {"mode": "fresh", "parent_prefix": "not_inherited"},
            "steps_taken": self.steps_taken,
            "runs": self.runs,
            "duration_ms": self.duration_ms(),
            "result": self.result if self.terminal else None,
            "report": self.report,
            "transcript_handle": transcript_handle,
            "follow_up": {"tool": "agent_eval", "agent_id": self.agent_id},
            "usage": dict(self.usage),
            "descendant_usage": dict(self.descendant_usage),
            "authority": dict(self.authority),
            "verification": dict(self.verification),
        }
        if self.error:
            data["error"] = self.error
        if self.budget:
            data["budget"] = dict(self.budget)
        if self.status == "interrupted":
            data["checkpoint"] = {"saved": self.checkpoint is not None}
            data["continuable"] = self.checkpoint is not None
        if self.worktree is not None:
            from codewhale.subagents.worktree import Isolation

            data["isolation"] = Isolation.WORKTREE.value
            data["worktree"] = _worktree_view(_worktree(self.worktree))
        data.update(extra)
        return data


@dataclass(frozen=True)
class AgentSnapshot:
    """A read-only view of one child for the UI."""

    agent_id: str
    name: str
    nickname: str
    description: str
    type: str
    role: str
    status: str
    worker_status: str
    activity: str
    steps_taken: int
    elapsed_ms: int
    tokens: int
    terminal: bool
    model: str = ""
    color: str | None = None
    # Interrupted with a checkpoint: `agent_eval {continue: true}` can run it on.
    continuable: bool = False
    tool_calls: int = 0
    # When it reached its terminal state (wall clock): the sidebar orders and fades by it.
    finished_at_ms: int | None = None
    # isolation: worktree: its branch and what it changed ("" when not isolated) ...
    worktree: str = ""
    # ... and whether agent_apply (the agent screen's Apply) can merge it now.
    applicable: bool = False
    # Its report's SUMMARY once it has one: what a finished child's cell shows.
    summary: str = ""
    # 1, or more once a message revived it after it finished.
    runs: int = 1
    # Completed or failed: a message starts a new run of it (the agent screen offers it).
    revivable: bool = False
    # What it may spend (no part set: no limit), and the tokens counted against it
    # (its own and its children's).
    budget: Budget = field(default_factory=Budget)
    budget_tokens: int = 0


def snapshot_of_record(record: WorkerRecord) -> AgentSnapshot:
    usage = record.usage
    return AgentSnapshot(
        agent_id=record.agent_id,
        name=record.name,
        nickname=record.nickname,
        description=record.description,
        type=record.type,
        role=record.role,
        status=record.status,
        worker_status=record.worker_status,
        activity=record.activity,
        steps_taken=record.steps_taken,
        elapsed_ms=record.duration_ms(),
        tokens=_total(usage),
        terminal=record.terminal,
        model=record.model,
        color=record.color,
        continuable=record.status == "interrupted" and record.checkpoint is not None,
        tool_calls=record.tool_calls,
        finished_at_ms=record.finished_at_ms if record.terminal else None,
        summary=str((record.report or {}).get("summary") or ""),
        runs=record.runs,
        revivable=record.status in REVIVABLE,
        budget=Budget.from_json(record.budget),
        budget_tokens=_total(usage) + _total(record.descendant_usage),
        **_worktree_fields(record),
    )


def _total(usage: dict[str, int]) -> int:
    return usage.get("input", 0) + usage.get("output", 0)


def _worktree(data: dict[str, Any]) -> Worktree:
    # worktree.py runs git (and loads the sandbox for it): imported only for a record
    # that has a worktree, so drawing a resumed conversation loads neither.
    from codewhale.subagents.worktree import Worktree

    return Worktree.from_json(data)


def _worktree_view(tree: Worktree) -> dict[str, Any]:
    """A worktree as projections show it: where, against what, what changed, what became of it."""
    return {
        "path": tree.path,
        "branch": tree.branch,
        "base_commit": tree.base_commit,
        "diff": tree.diff.to_json() if tree.diff is not None else None,
        "applied": tree.applied_at_ms is not None,
        "kept": bool(tree.keep),
        "deleted": tree.removed_at_ms is not None,
    }


def _worktree_fields(record: WorkerRecord) -> dict[str, Any]:
    if record.worktree is None:
        return {}
    tree = _worktree(record.worktree)
    state = [tree.branch or tree.path]
    if tree.diff is not None:
        state.append(tree.diff.line())
    if tree.applied_at_ms is not None:
        state.append("applied")
    elif tree.removed_at_ms is not None:
        state.append("deleted")
    applicable = (
        record.terminal
        and tree.applied_at_ms is None
        and tree.removed_at_ms is None
        and (tree.diff is None or tree.diff.files_changed > 0)
    )
    return {"worktree": " · ".join(state), "applicable": applicable}
