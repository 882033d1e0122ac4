"""The Work sidebar: checklist, plan and every sub-agent, updated row by row."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from codewhale.runtime.events import AgentSnapshot
from codewhale.sanitize import clean_text
from codewhale.subagents.roles import UI_COLORS, lookup_role

GLYPHS = {
    "pending": "◌",
    "running": "●",
    "completed": "✓",
    "failed": "✗",
    "cancelled": "⊘",
    "interrupted": "⏸",
}


def _tokens(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


class AgentRow(Static, can_focus=True):
    """One child; click or Enter opens its agent screen."""

    @dataclass
    class Selected(Message):
        agent_id: str

    def __init__(self, snapshot: AgentSnapshot) -> None:
        super().__init__(id=f"row-{snapshot.agent_id}", classes="agent-row", markup=False)
        self.agent_id = snapshot.agent_id
        self.show(snapshot)

    def show(self, snapshot: AgentSnapshot) -> None:
        role = lookup_role(snapshot.role)
        color = snapshot.color or (UI_COLORS.get(role, "white") if role else "white")
        line = Text()
        line.append(f"{GLYPHS.get(snapshot.status, '?')} ", style=color)
        line.append(clean_text(snapshot.nickname), style="bold")
        line.append(f"  {snapshot.type}", style=color)
        seconds = snapshot.elapsed_ms // 1000
        line.append(f"  {seconds}s  {_tokens(snapshot.tokens)} tok\n", style="dim")
        activity = "queued" if snapshot.worker_status == "queued" else snapshot.activity
        if snapshot.terminal:
            activity = snapshot.status
        if snapshot.continuable:
            activity = "continuable: Enter, then Continue"
        line.append(f"  {clean_text(activity or snapshot.worker_status)[:40]}", style="dim")
        self.update(line)

    def on_click(self) -> None:
        self.post_message(self.Selected(self.agent_id))

    def key_enter(self) -> None:
        self.post_message(self.Selected(self.agent_id))


class WorkSidebar(VerticalScroll):
    """Reads snapshots; never blocks the engine; rebuilt only for sections that changed."""

    def __init__(self) -> None:
        super().__init__(id="work")
        self.border_title = "Work"
        self.checklist = Static("", classes="section", markup=False)
        self.plan = Static("", classes="section", markup=False)
        self.rlm = Static("—", classes="section", markup=False)
        self.agents_title = Static("Sub-agents: none", classes="section-title")
        self._rows: dict[str, AgentRow] = {}
        self._statuses: dict[str, str] = {}

    def compose(self):
        yield Static("Checklist", classes="section-title")
        yield self.checklist
        yield Static("Plan", classes="section-title")
        yield self.plan
        yield Static("RLM sessions", classes="section-title")
        yield self.rlm
        yield self.agents_title

    def show_work(self, work: dict) -> None:
        items = work.get("checklist", [])
        marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
        if items:
            lines = [f"{work.get('percent_complete', 0)}% complete"]
            lines += [f"{marks[i['status']]} {clean_text(i['text'])}" for i in items]
            self.checklist.update("\n".join(lines))
        else:
            self.checklist.update("—")
        steps = work.get("plan", [])
        self.plan.update(
            "\n".join(f"{marks[s['status']]} {clean_text(s['text'])}" for s in steps) or "—"
        )

    def show_rlm(self, sessions: dict) -> None:
        lines = [
            f"{name}  {len(s.context):,} chars · {s.evals} evals · {s.kernel.rpc_count} calls"
            for name, s in sessions.items()
        ]
        self.rlm.update("\n".join(lines) or "—")

    async def show_agent(self, snapshot: AgentSnapshot) -> None:
        row = self._rows.get(snapshot.agent_id)
        if row is None:
            row = AgentRow(snapshot)
            self._rows[snapshot.agent_id] = row
            await self.mount(row)
        else:
            row.show(snapshot)
        self._statuses[snapshot.agent_id] = snapshot.status
        running = sum(status == "running" for status in self._statuses.values())
        self.agents_title.update(f"Sub-agents: {len(self._rows)} ({running} running)")
