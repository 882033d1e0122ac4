"""One sub-agent up close: its record, report and live transcript; message or cancel it."""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Static

from codewhale.runtime import Runtime, RuntimeRequestError
from codewhale.sanitize import clean_text

TRANSCRIPT_TAIL = 40


class AgentScreen(Screen[None]):
    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]  # noqa: RUF012

    def __init__(self, agent_id: str) -> None:
        super().__init__()
        self.agent_id = agent_id

    def compose(self) -> ComposeResult:
        yield Static("", id="agent-header", markup=False)
        with VerticalScroll(id="agent-body"):
            yield Static("", id="agent-record", markup=False)
            yield Static("", id="agent-transcript", markup=False)
        yield Input(
            placeholder="Message this sub-agent (delivered at its next step)", id="agent-message"
        )
        with Horizontal(id="agent-actions"):
            yield Button("Cancel agent", id="cancel", variant="error")
            yield Button("Continue", id="continue", variant="primary")
            yield Button("Back", id="back")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_view()  # later refreshes come from the app on this agent's mailbox events

    @property
    def runtime(self) -> Runtime | None:
        return getattr(self.app, "runtime", None)

    def refresh_view(self) -> None:
        runtime = self.runtime
        if runtime is None:
            return
        snapshot = runtime.manager.snapshot_of(self.agent_id)
        if snapshot is None:
            return
        self.query_one("#continue", Button).display = snapshot.continuable
        self.query_one("#cancel", Button).disabled = snapshot.terminal
        record = next(r for r in runtime.manager.records() if r["agent_id"] == self.agent_id)
        self.query_one("#agent-header", Static).update(
            f"{snapshot.nickname} · {snapshot.type} · {snapshot.status} · "
            f"{snapshot.steps_taken} steps · {snapshot.tokens} tokens"
        )
        details = [f"objective: {record['objective']}", f"model: {record['model']}"]
        if record.get("error"):
            details.append(f"error: {record['error']}")
        report = record.get("report") or {}
        for section in ("summary", "changes", "evidence", "risks", "blockers"):
            if report.get(section):
                details.append(f"{section.upper()}: {report[section]}")
        self.query_one("#agent-record", Static).update(clean_text("\n".join(details)))
        path = runtime.transcript_path(self.agent_id)
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        shown = []
        for line in lines[-TRANSCRIPT_TAIL:]:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            content = message.get("content") or ""
            calls = [c["function"]["name"] for c in message.get("tool_calls") or ()]
            text = f"{message.get('role')}: {str(content)[:400]}"
            if calls:
                text += f" [calls {', '.join(calls)}]"
            shown.append(text)
        self.query_one("#agent-transcript", Static).update(clean_text("\n\n".join(shown)))

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        runtime = self.runtime
        if not event.value.strip() or runtime is None:
            return
        reply = await runtime.message_agent(self.agent_id, event.value)
        delivery = reply.get("message_delivery", {})
        self.notify("delivered" if delivery.get("delivered") else delivery.get("reason", ""))
        event.input.value = ""

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        runtime = self.runtime
        if event.button.id in ("cancel", "continue") and runtime is not None:
            try:
                if event.button.id == "cancel":
                    await runtime.cancel_agent(self.agent_id)
                else:
                    await runtime.continue_agent(self.agent_id)
            except RuntimeRequestError as error:
                self.notify(str(error), severity="error")
            self.refresh_view()
        else:
            self.app.pop_screen()
