"""The status line: workspace, mode, model, tokens, cache hit rate, context use, cost, a
missing sandbox, the children that run while the Work sidebar is hidden, and notifications
on small terminals.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.content import Content
from textual.markup import MarkupError
from textual.message_pump import MessagePump
from textual.timer import Timer
from textual.widgets import Static

from codewhale.permissions import Mode
from codewhale.providers.pricing import format_cost
from codewhale.sanitize import clean_text
from codewhale.tui.waiting import waiting_text

if TYPE_CHECKING:  # the dataclasses load with the engine, after the first frame
    from codewhale.providers.types import Usage

MODE_STYLES = {Mode.PLAN: "bold green", Mode.AGENT: "bold cyan", Mode.YOLO: "bold red"}
SEVERITY_STYLES = {"information": "bold cyan", "warning": "bold yellow", "error": "bold red"}
# Below either size a toast would cover the transcript or the sidebar, so the status line
# says it instead (80×24 is the smallest terminal we lay out for).
TOAST_MIN_COLUMNS = 100
TOAST_MIN_ROWS = 30
# With 20 children streaming, events that change the status line or the Work sidebar come
# by the hundred each second; drawing them more often than this is work nobody sees.
REDRAW_SECS = 1 / 30


def toasts_fit(width: int, height: int) -> bool:
    return width >= TOAST_MIN_COLUMNS and height >= TOAST_MIN_ROWS


def _tokens(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def context_text(tokens: int, window: int) -> str:
    """`ctx 42%`: how much of the model's context window the next request fills."""
    return f"ctx {100 * tokens // max(window, 1)}%"


def children_text(running: int, waiting: int) -> str:
    """`2 agents running · 1 waiting`; empty when no child runs or waits."""

    def agents(number: int) -> str:
        return f"{number} agent{'' if number == 1 else 's'}"

    if running and waiting:
        return f"{agents(running)} running · {waiting} waiting"
    if running:
        return f"{agents(running)} running"
    return f"{agents(waiting)} waiting" if waiting else ""


class Coalescer:
    """Runs `redraw` at most once per REDRAW_SECS however often it is asked: at once when
    the last run is that long ago, otherwise once at the next tick of a clock every
    Coalescer shares, so the widgets asked within one period are drawn in one frame."""

    def __init__(self, owner: MessagePump, redraw: Callable[[], None]) -> None:
        self._owner = owner
        self._redraw = redraw
        self._last = float("-inf")
        self._timer: Timer | None = None

    def request(self) -> None:
        if self._timer is not None:  # already due: that run will see this change too
            return
        now = time.monotonic()
        if now - self._last >= REDRAW_SECS:
            self._run()
        else:
            self._timer = self._owner.set_timer(REDRAW_SECS - now % REDRAW_SECS, self._run)

    def drawn(self) -> None:
        """The owner drew just now by other means: a pending run would only repeat it."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._last = time.monotonic()

    def _run(self) -> None:
        self._timer = None
        self._last = time.monotonic()
        self._redraw()


class StatusLine(Static):
    def __init__(self) -> None:
        super().__init__("CodeWhale", id="status", markup=False)
        self._mode = Text()
        self._rest = Text("CodeWhale")
        self._flash: Text | None = None
        self._flash_timer: Timer | None = None
        self._draw: Callable[[], None] = lambda: None
        self._coalescer = Coalescer(self, lambda: self._draw())

    def show_soon(self, draw: Callable[[], None]) -> None:
        """Have `draw` (which calls `show`) run at most once a frame however often this is
        asked: the figures are gathered once, when the line is drawn."""
        self._draw = draw
        self._coalescer.request()

    def show(
        self,
        *,
        workspace: Path,
        mode: Mode,
        model: str,
        usage: Usage,
        running: bool,
        waiting_on: int = 0,
        cost: float | None = None,
        limits: str | None = None,
        sandboxed: bool = True,
        accept_edits: bool = False,
        children: tuple[int, int] | None = None,
        context: tuple[int, int] | None = None,
    ) -> None:
        """`children` (running, waiting) is given while the Work sidebar is hidden;
        `context` is (tokens the next request carries, the model's window);
        `accept_edits`: Agent mode's posture where file changes run unasked;
        `waiting_on`: the children a running turn is held open for."""
        self._coalescer.drawn()  # an earlier `show_soon` must not draw over this later one
        self._mode = Text(f" {mode.value.upper()} ", style=f"reverse {MODE_STYLES[mode]}")
        if accept_edits and mode is Mode.AGENT:  # Plan refuses edits, YOLO runs them anyway
            self._mode.append(" ⏵⏵ accept edits ", style="reverse bold yellow")
        line = Text()
        if children and (said := children_text(*children)):
            line.append(f"  ● {said}", style="bold magenta")
        line.append(f"  {workspace.name}", style="bold")
        line.append(f"  {model}")
        if limits:
            line.append(f" ({limits})", style="bold yellow")
        if not sandboxed:
            line.append("  no sandbox", style="bold red")
        # "~": the server sent no counts, so they were estimated from the bytes.
        about = "~" if usage.estimated else ""
        line.append(
            f"  ↑{about}{_tokens(usage.input_tokens)} ↓{about}{_tokens(usage.output_tokens)}",
            style="dim",
        )
        prompt = usage.cache_hit_tokens + usage.cache_miss_tokens
        if prompt:
            line.append(f"  cache {100 * usage.cache_hit_tokens // prompt}%", style="dim")
        if context is not None:
            line.append(f"  {context_text(*context)}", style="dim")
        if cost is not None and usage.total_tokens:
            line.append(f"  {format_cost(cost)}", style="dim")
        if running:
            # A turn held open only for its children is not working: it waits, for minutes.
            doing = waiting_text(waiting_on) if waiting_on else "working"
            line.append(f"  ● {doing} (Enter steers, Tab queues, Esc cancels)", style="yellow")
        self._rest = line
        self._paint()

    def flash(
        self,
        message: str,
        *,
        title: str = "",
        severity: str = "information",
        timeout: float,
        markup: bool = True,
    ) -> None:
        """Show a notification after the mode for `timeout` seconds, coloured by severity."""
        if markup:
            with contextlib.suppress(MarkupError):  # not markup after all: shown as written
                message = Content.from_markup(message).plain
        text = " ".join(clean_text(f"{title}: {message}" if title else message).split())
        self._flash = Text(f"  {text}", style=SEVERITY_STYLES.get(severity, "bold"))
        if self._flash_timer is not None:
            self._flash_timer.stop()
        self._flash_timer = self.set_timer(timeout, self._end_flash)
        self._paint()

    @property
    def flashing(self) -> str:
        """The notification being shown, if any."""
        return self._flash.plain.strip() if self._flash is not None else ""

    def _end_flash(self) -> None:
        self._flash = self._flash_timer = None
        self._paint()

    def _paint(self) -> None:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append_text(self._mode)
        if self._flash is not None:
            line.append_text(self._flash)
        line.append_text(self._rest)
        # Redrawn only when it changed; one row whatever it says (`#status` height), so
        # with no layout pass.
        if line != self.content:
            self.update(line, layout=False)
