"""One sub-agent up close: its assignment and live transcript; message, cancel or continue it,
continue a finished one with a message (a new run), and apply an isolated one's changes to
the work tree.

On open the screen shows the child's conversation so far once, then follows the child's
own engine events (`runtime.watch_agent`), applied by the same Transcript the main
conversation uses. Lifecycle changes arrive from the app as typed mailbox events.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any, ClassVar, assert_never

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Footer, Input, Static

from codewhale.runtime import Runtime, RuntimeRequestError, events
from codewhale.runtime.events import AgentSnapshot
from codewhale.sanitize import clean_text
from codewhale.tui.batches import Batches
from codewhale.tui.frame_clock import FramedScreen
from codewhale.tui.history import Backlog, child_conversation
from codewhale.tui.sidebar import budget_text, plural, runs_text
from codewhale.tui.transcript import Transcript, agent_heading


@dataclass
class ChildEngineEvent(Message):
    """One raw engine event of the child this screen follows."""

    event: events.Event


def assignment_text(record: dict[str, Any]) -> Text:
    """What the child was asked to do, and as what (never its system prompt)."""
    text = Text("Assignment", style="bold")
    text.append(
        f"  {record.get('type')} · role {record.get('role')} · model {record.get('model')}\n",
        style="dim",
    )
    if record.get("description"):
        text.append(clean_text(str(record["description"])) + "\n", style="italic")
    text.append(clean_text(str(record.get("objective") or "")))
    return text


class MessageBox(Input):
    """The message box: Textual's Input, without a screen layout per keystroke.

    Input keeps its virtual width at its text's width, a reactive that lays out the whole
    screen when it changes; only the box's own scrolling reads it, and the box keeps its
    size. With children streaming, that was a layout of the agent screen per key typed.
    """

    def _watch_value(self, value: str) -> None:
        self.set_reactive(Input.virtual_size, Size(self.content_width, 1))
        super()._watch_value(value)


STEER_PLACEHOLDER = "Message this sub-agent (delivered at its next step)"
REVIVE_PLACEHOLDER = "Follow-up for a new run on its own context (Enter sends)"


class AgentScreen(FramedScreen[None]):
    BINDINGS: ClassVar = [Binding("escape", "back", "Back")]
    DEFAULT_CSS = """
    AgentScreen #agent-header { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    AgentScreen #agent-transcript { height: 1fr; padding: 0 1; }
    AgentScreen .assignment { border-left: thick $accent; padding: 0 1; margin-bottom: 1; }
    AgentScreen #agent-actions { height: auto; }
    AgentScreen #agent-actions Button { margin-right: 1; }
    """

    def __init__(self, agent_id: str) -> None:
        super().__init__()
        self.agent_id = agent_id
        self._unwatch: Callable[[], None] | None = None
        # Children this one opens while the screen is open (the others have cells in the
        # history): their cells in this transcript follow their mailbox events.
        self._children: set[str] = set()
        self._header = ""
        # The child's answer deltas waiting, in order, as the last item of `_updates`.
        self._deltas: list[str] | None = None
        # Kept, not looked up: events still come while the app takes the screen down.
        self._header_line = Static("", id="agent-header", markup=False)
        # A report's sections are one per line: kept so, not joined into a paragraph.
        self.transcript = Transcript(id="agent-transcript", keep_line_breaks=True)
        self._message_box = MessageBox(placeholder=STEER_PLACEHOLDER, id="agent-message")
        # "Continue with a message" was pressed: the box takes the follow-up of a finished
        # child, which is sent only once asked for (a new run spends tokens).
        self._reviving = False
        self._buttons = {
            "send": Button("Send", id="send", variant="primary"),
            "interrupt": Button("Interrupt", id="interrupt", variant="warning"),
            "cancel": Button("Cancel agent", id="cancel", variant="error"),
            "continue": Button("Continue", id="continue", variant="success"),
            # Shown only for a completed or failed child.
            "revive": Button("Continue with a message", id="revive", variant="success"),
            # Shown only for a child opened with isolation: worktree.
            "apply": Button("Apply", id="apply", variant="success"),
            "back": Button("Back", id="back"),
        }
        self._buttons["apply"].display = False
        self._buttons["revive"].display = False

    def compose(self) -> ComposeResult:
        yield self._header_line
        yield self.transcript
        yield self._message_box
        with Horizontal(id="agent-actions"):
            yield from self._buttons.values()
        yield Footer()

    @property
    def runtime(self) -> Runtime | None:
        return getattr(self.app, "runtime", None)

    async def on_mount(self) -> None:
        runtime = self.runtime
        if runtime is None:
            return
        # Read and subscribe in one synchronous step: no event falls between the two.
        messages = runtime.agent_messages(self.agent_id)
        streamed = runtime.agent_streamed_text(self.agent_id)
        self._unwatch = runtime.watch_agent(self.agent_id, self._follow)
        record = next((r for r in runtime.agent_records() if r["agent_id"] == self.agent_id), None)
        snapshot = runtime.agent_snapshot(self.agent_id)
        live = snapshot is not None and not snapshot.terminal

        def agents() -> dict[str, AgentSnapshot]:
            return {child.agent_id: child for child in runtime.agents()}

        above = [] if record is None else [Static(assignment_text(record), classes="assignment")]
        backlog = Backlog(child_conversation(messages), agents, live=live)
        await self.transcript.show_history(backlog, above)
        if streamed:  # the step under way: the deltas that follow go on from here
            await self.transcript.apply(events.AssistantDelta(text=streamed))
        if snapshot is not None and snapshot.terminal and record and record.get("error"):
            await self.transcript.notice(f"{snapshot.status}: {record['error']}", "warning")
        self.show_state()
        self._focus_first_action()

    def on_unmount(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None

    # -- what the child does -----------------------------------------------------------

    def _follow(self, event: events.Event) -> None:
        """Called inside the child's engine: hand the event to this screen's queue, no more."""
        self.post_message(ChildEngineEvent(event))

    @cached_property
    def _updates(self) -> Batches[Callable[[], Awaitable[None]]]:
        """What the child does, shown a frame's worth at a time (`tui/batches.py`), in the
        order it came: a streaming child sends a delta every few milliseconds, and drawing
        each (a markdown block parsed, the screen laid out) was most of this screen's work.
        """
        return Batches(self.app, lambda update: update(), ready=lambda: self.is_attached)

    def on_child_engine_event(self, message: ChildEngineEvent) -> None:
        event = message.event
        # The lifecycle event says how the child's run ended; the parent's wording
        # ("turn cancelled; sub-agents keep running") does not fit a child.
        if isinstance(event, events.TurnComplete):
            return
        if isinstance(event, events.AssistantDelta):
            if self._deltas is None:  # else the waiting ones are the last in the queue
                self._deltas = []
                self._updates.add(partial(self._show_deltas, self._deltas))
            self._deltas.append(event.text)
            return
        self._queue(partial(self.transcript.apply, event))

    async def _show_deltas(self, deltas: list[str]) -> None:
        """The answer's deltas that came since the last frame, drawn as one: the answer's
        markdown is parsed and laid out once a frame, not once a delta."""
        if self._deltas is deltas:  # the deltas still to come go after these
            self._deltas = None
        await self.transcript.apply(events.AssistantDelta(text="".join(deltas)))

    def _queue(self, update: Callable[[], Awaitable[None]]) -> None:
        self._deltas = None  # a later delta goes after this
        self._updates.add(update)

    async def agent_event(self, event: events.AnyAgentEvent) -> None:
        """A mailbox event of any agent; this screen's child and its own children matter.

        The header and the actions follow at once; what the transcript says of it is shown
        in turn with the child's engine events (`_updates`), so that its end comes after
        the last of its output."""
        agent_id = event.agent_id
        if agent_id == self.agent_id:
            match event:
                case events.AgentSpawned():
                    self._children.add(event.child_agent_id)
                case events.AgentFinished() | events.AgentQueued():
                    self._queue(partial(self._say, event))
                case (
                    events.AgentStarted()
                    | events.AgentProgress()
                    | events.AgentToolStarted()
                    | events.AgentToolFinished()
                    | events.AgentUsage()
                ):
                    pass  # the header shows them, from the child's snapshot
                case _:
                    assert_never(event)
            self.show_state()
        elif agent_id in self._children or self.transcript.has_agent(agent_id):
            self._queue(partial(self._show_grandchild, event))

    async def _say(self, event: events.AgentFinished | events.AgentQueued) -> None:
        """The child's end, or why it waits, as a notice."""
        detail = event.message
        if isinstance(event, events.AgentFinished):
            status = event.status
            shown = f"{status}: {detail}" if detail and detail != status else status
            await self.transcript.notice(shown, "error" if status == "failed" else "info")
        elif detail:
            await self.transcript.notice(detail)

    async def _show_grandchild(self, event: events.AnyAgentEvent) -> None:
        """A child of this one, in its cell in this transcript."""
        snapshot = self.runtime.agent_snapshot(event.agent_id) if self.runtime else None
        if snapshot is not None:
            title = agent_heading(snapshot.nickname, snapshot.type, snapshot.description)
            self.transcript.agent_event(event, title, snapshot.summary)

    def show_state(self) -> None:
        """The header, and only the actions that apply to the child as it is now."""
        runtime = self.runtime
        snapshot = runtime.agent_snapshot(self.agent_id) if runtime is not None else None
        cost = runtime.agent_cost(self.agent_id) if runtime is not None else None
        header = header_text(self.agent_id, snapshot, cost)
        if header != self._header:  # progress events come many a second; most change nothing
            self._header = header
            self._header_line.update(header, layout=False)
        before = self.focused
        live = snapshot is not None and not snapshot.terminal
        buttons = self._buttons
        revivable = bool(snapshot and snapshot.revivable)
        self._reviving = self._reviving and revivable
        for widget in (self._message_box, buttons["send"]):
            widget.disabled = not (live or self._reviving)
        self._message_box.placeholder = REVIVE_PLACEHOLDER if self._reviving else STEER_PLACEHOLDER
        for widget in (buttons["interrupt"], buttons["cancel"]):
            widget.disabled = not live
        buttons["revive"].display = revivable
        buttons["revive"].disabled = not revivable or self._reviving
        buttons["continue"].disabled = not (snapshot and snapshot.continuable)
        buttons["apply"].display = bool(snapshot and snapshot.worktree)
        buttons["apply"].disabled = not (snapshot and snapshot.applicable)
        # An action that no longer applies hands the focus to the first one that does.
        if before is None or before.disabled:
            self._focus_first_action()

    def _focus_first_action(self) -> None:
        buttons = self._buttons
        actions = ("continue", "revive", "apply", "back")
        for widget in (self._message_box, *(buttons[name] for name in actions)):
            if not widget.disabled:
                # At once, not after the next refresh (Widget.focus): what has the focus
                # goes with the state just shown.
                self.set_focus(widget)
                return

    # -- what the user does --------------------------------------------------------------

    def typing_target(self) -> Widget | None:
        """What typed text goes to while a cell or a button has the focus (tui/typing_target.py)."""
        return self._message_box

    def action_back(self) -> None:
        # Dismissed, not only popped: the app's callback gives the composer the focus.
        self.dismiss(None)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        await self._send(interrupt=False)

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        runtime = self.runtime
        button = event.button.id
        if button == "back" or runtime is None:
            self.action_back()
        elif button in ("send", "interrupt"):
            await self._send(interrupt=button == "interrupt")
        elif button == "revive":
            self._reviving = True
            self.show_state()
            self.set_focus(self._message_box)
        elif button in ("cancel", "continue"):
            try:
                if button == "cancel":
                    await runtime.cancel_agent(self.agent_id)
                else:
                    await runtime.continue_agent(self.agent_id)
            except RuntimeRequestError as error:
                self.notify(str(error), severity="error")
            self.show_state()
        elif button == "apply":
            event.button.disabled = True  # a merge takes a moment; once is enough
            await self._apply(runtime)
            self.show_state()

    async def _apply(self, runtime: Runtime) -> None:
        """Merge the child's changes into the work tree, as agent_apply does; say how it went."""
        try:
            reply = await runtime.apply_agent(self.agent_id)
        except RuntimeRequestError as error:
            self.notify(clean_text(str(error)), severity="error")
            return
        message = clean_text(str(reply.get("message", "")))
        applied = bool(reply.get("applied"))
        await self.transcript.notice(message, "info" if applied else "warning")
        self.notify(message, severity="information" if applied else "warning")

    async def _send(self, *, interrupt: bool) -> None:
        """The box's text as a message (`interrupt`: dropping the child's pending ones first)."""
        runtime = self.runtime
        box = self._message_box
        text = box.value.strip()
        if runtime is None or not text:
            return
        try:
            reply = await runtime.message_agent(self.agent_id, text, interrupt=interrupt)
        except RuntimeRequestError as error:
            self.notify(str(error), severity="error")
            return
        delivery = reply.get("message_delivery", {})
        if delivery.get("revived"):
            # A new run: the screen goes on following the same child through it.
            box.value = ""
            self._reviving = False
            await self.transcript.user(text)
            self.show_state()
        elif delivery.get("delivered"):
            box.value = ""
            await self.transcript.user(text, steer=True)
        else:
            self.notify(str(delivery.get("reason", "not delivered")), severity="warning")


def header_text(agent_id: str, snapshot: AgentSnapshot | None, cost: float | None = None) -> str:
    if snapshot is None:
        return f"{agent_id} · not in this session's records"
    state = snapshot.status
    if snapshot.status == "running" and snapshot.activity:
        state = f"running · {snapshot.activity}"
    if snapshot.continuable:
        state = "interrupted · continuable"
    # While it runs its activity names the step under way ("step 2 · read_file"): the
    # count of finished steps beside it read as "step 1 · 0 steps".
    steps = (
        "" if state.startswith("running · step ") else f"{plural(snapshot.steps_taken, 'step')} · "
    )
    if runs := runs_text(snapshot):
        state = f"{state} · {runs}"
    if snapshot.worktree:
        state = f"{state} · worktree {snapshot.worktree}"
    budget = budget_text(snapshot, snapshot.elapsed_ms, cost)
    return clean_text(
        f"{snapshot.nickname} · {snapshot.type} · {state} · {steps}{snapshot.tokens} tokens"
        + (f" · {budget}" if budget else "")
    )
