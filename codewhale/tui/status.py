"""The status line: workspace, mode, model, tokens, cache hit rate, cost, a missing sandbox,
the children that run while the Work sidebar is hidden, and notifications on small terminals.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from rich.text import Text
from textual.content import Content
from textual.markup import MarkupError
from textual.timer import Timer
from textual.widgets import Static

from codewhale.permissions import Mode
from codewhale.providers.pricing import format_cost
from codewhale.providers.types import Usage
from codewhale.sanitize import clean_text

MODE_STYLES = {Mode.PLAN: "bold green", Mode.AGENT: "bold cyan", Mode.YOLO: "bold red"}
SEVERITY_STYLES = {"information": "bold cyan", "warning": "bold yellow", "error": "bold red"}
# Below either size a toast would cover the transcript or the sidebar, so the status line
# says it instead (80×24 is the smallest terminal we lay out for).
TOAST_MIN_COLUMNS = 100
TOAST_MIN_ROWS = 30


def toasts_fit(width: int, height: int) -> bool:
    return width >= TOAST_MIN_COLUMNS and height >= TOAST_MIN_ROWS


def _tokens(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def children_text(running: int, waiting: int) -> str:
    """`2 agents running · 1 waiting`; empty when no child runs or waits."""

    def agents(number: int) -> str:
        return f"{number} agent{'' if number == 1 else 's'}"

    if running and waiting:
        return f"{agents(running)} running · {waiting} waiting"
    if running:
        return f"{agents(running)} running"
    return f"{agents(waiting)} waiting" if waiting else ""


class StatusLine(Static):
    def __init__(self) -> None:
        super().__init__("CodeWhale", id="status", markup=False)
        self._mode = Text()
        self._rest = Text("CodeWhale")
        self._flash: Text | None = None
        self._flash_timer: Timer | None = None

    def show(
        self,
        *,
        workspace: Path,
        mode: Mode,
        model: str,
        usage: Usage,
        running: bool,
        cost: float | None = None,
        limits: str | None = None,
        sandboxed: bool = True,
        children: tuple[int, int] | None = None,
    ) -> None:
        """`children` (running, waiting) is given while the Work sidebar is hidden."""
        self._mode = Text(f" {mode.value.upper()} ", style=f"reverse {MODE_STYLES[mode]}")
        line = Text()
        if children and (said := children_text(*children)):
            line.append(f"  ● {said}", style="bold magenta")
        line.append(f"  {workspace.name}", style="bold")
        line.append(f"  {model}")
        if limits:
            line.append(f" ({limits})", style="bold yellow")
        if not sandboxed:
            line.append("  no sandbox", style="bold red")
        line.append(
            f"  ↑{_tokens(usage.input_tokens)} ↓{_tokens(usage.output_tokens)}", style="dim"
        )
        prompt = usage.cache_hit_tokens + usage.cache_miss_tokens
        if prompt:
            line.append(f"  cache {100 * usage.cache_hit_tokens // prompt}%", style="dim")
        if cost is not None and usage.total_tokens:
            line.append(f"  {format_cost(cost)}", style="dim")
        if running:
            line.append("  ● working (Enter steers, Tab queues, Esc cancels)", style="yellow")
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
        self.update(line)
