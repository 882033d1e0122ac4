"""/rewind and Esc Esc: pick an earlier prompt, then what goes back to before it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from codewhale.runtime import RuntimeRequestError
from codewhale.sanitize import clean_text
from codewhale.tui.attachment_format import split_attachments

if TYPE_CHECKING:
    from codewhale.runtime.rewind import RewindPoint
    from codewhale.tui.app import CodeWhaleApp

# What can go back, as the choice offers it: (option id, label, conversation, files).
CHOICES = (
    ("both", "Restore the conversation and the files", True, True),
    ("conversation", "Restore the conversation only (files stay as they are)", True, False),
    ("files", "Restore the files only (the conversation stays)", False, True),
)


def typed_text(point: RewindPoint) -> str:
    """The prompt as the user typed it: without the files its `@path`s attached."""
    return split_attachments(point.text)[0]


class RewindPicker(ModalScreen["RewindPoint | None"]):
    """The earlier prompts of this run, newest first, each with its time and first line."""

    BINDINGS: ClassVar = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, points: list[RewindPoint]) -> None:
        super().__init__()
        self.points = {str(point.number): point for point in points}

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static("Rewind to before a prompt (Enter), Esc to cancel", classes="title")
            yield OptionList(
                *(
                    Option(f"{_clock(point.sent_at)}  {_preview(point)}", id=number)
                    for number, point in self.points.items()
                )
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.points[str(event.option.id)])

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class RewindChoice(ModalScreen["tuple[bool, bool] | None"]):
    """What goes back to before the prompt: (conversation, files), or None to cancel."""

    BINDINGS: ClassVar = [Binding("escape", "dismiss_none", "Cancel")]

    def __init__(self, point: RewindPoint) -> None:
        super().__init__()
        self.point = point

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(f"Rewind to before: {_preview(self.point)}", classes="title")
            if not self.point.conversation:
                yield Static("A compaction summarised this prompt: only the files can go back.")
            yield OptionList(
                *(
                    Option(label, id=key, disabled=conversation and not self.point.conversation)
                    for key, label, conversation, _files in CHOICES
                )
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0 if self.point.conversation else len(CHOICES) - 1
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        _key, _label, conversation, files = next(c for c in CHOICES if c[0] == event.option.id)
        self.dismiss((conversation, files))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


async def rewind_command(app: CodeWhaleApp, arguments: str) -> None:
    """Open the picker of earlier prompts; the choice made there is carried out."""
    runtime = app.runtime
    assert runtime is not None  # run_command refuses commands needing a session without one
    if runtime.turn_running:
        await app.transcript.notice("a turn is running; press Esc first, then /rewind", "error")
        return
    points = runtime.rewind_points()
    if not points:
        await app.transcript.notice("No earlier prompt of this run to rewind to.")
        return

    def picked(point: RewindPoint | None) -> None:
        if point is not None:
            app.push_screen(RewindChoice(point), lambda choice: chosen(point, choice))

    def chosen(point: RewindPoint, choice: tuple[bool, bool] | None) -> None:
        if choice is not None:
            app.run_worker(_rewind(app, point, *choice), group="rewind", exclusive=True)

    app.push_screen(RewindPicker(points), picked)


async def _rewind(app: CodeWhaleApp, point: RewindPoint, conversation: bool, files: bool) -> None:
    runtime = app.runtime
    if runtime is None:
        return
    try:
        outcome = await runtime.rewind(point.number, conversation=conversation, files=files)
    except RuntimeRequestError as error:
        await app.transcript.notice(str(error), "error")
        return
    if conversation:
        await app.transcript.reset()
        await app.replay_history(runtime.messages)
    await app.transcript.notice(outcome.summary(conversation=conversation, files=files))
    app.refresh_status()
    app.fill_composer(typed_text(point))


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _preview(point: RewindPoint) -> str:
    """The prompt's first line, cut to fit one row of the picker."""
    first = clean_text(typed_text(point)).strip().split("\n", 1)[0]
    return first if len(first) <= 70 else first[:69] + "…"
