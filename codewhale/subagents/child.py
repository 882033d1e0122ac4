"""The live side of the delegation tree: who can open children, and one running child."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from codewhale.authority import Authority
from codewhale.engine.conversation import Conversation, Inbox, UsageMeter
from codewhale.engine.loop import Engine
from codewhale.subagents.budget import Budget
from codewhale.subagents.lifecycle import ChildState, state_of
from codewhale.subagents.records import WorkerRecord
from codewhale.tools.base import ToolContext

TAIL_CHARS = 200


@dataclass(frozen=True)
class Opener:
    """A conversation that can open children: the session's own, or a child's.

    Built before its engine, so the agent tools and the engine share it without either
    being patched afterwards. Completions of its children arrive in its inbox.
    """

    agent_id: str | None  # None: the session's top-level conversation
    conversation: Conversation
    inbox: Inbox
    meter: UsageMeter
    context: ToolContext
    # The largest max_depth a child opened here may have (3 at the top, then one less).
    depth: int

    @property
    def authority(self) -> Authority:
        return self.context.authority


@dataclass
class Child:
    """One sub-agent as the manager holds it: its record and, once launched, its engine."""

    record: WorkerRecord
    # Who receives its completion: whoever opened it, or whoever continued it.
    opener: Opener
    engine: Engine | None = None
    # What it (and its own children) spent this run; kept when a finished child's engine
    # is let go, so /cost can still say what each child cost.
    meter: UsageMeter | None = None
    # What it may spend (agent_open, `[subagents]` defaults); the runner enforces it.
    budget: Budget = field(default_factory=Budget)
    # The watchdog that ends it at its max_runtime_secs, while it runs.
    deadline: asyncio.TimerHandle | None = None
    # Its own opener when it may open children (max_depth > 0).
    seat: Opener | None = None
    first_prompt: str = ""
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    # (state, message) chosen by whoever stops it; applied when its task unwinds.
    stop: tuple[ChildState, str] | None = None
    last_progress: float = field(default_factory=time.monotonic)
    # The same moment by the wall clock, for a front end's "no output for 45s".
    last_output_at: float = field(default_factory=time.time)
    last_tail_publish: float = 0.0
    # The end of the answer the current step is writing, and what progress last showed.
    text_tail: str = ""
    published_tail: str = ""

    @property
    def agent_id(self) -> str:
        return self.record.agent_id

    @property
    def state(self) -> ChildState:
        return state_of(self.record)

    @property
    def live(self) -> bool:
        return self.task is not None and not self.task.done()

    def add_text(self, text: str) -> str:
        """Keep the last characters the child wrote, for a readable live preview."""
        self.text_tail = (self.text_tail + text)[-TAIL_CHARS:]
        return self.text_tail
