"""The status line: workspace, mode, model, tokens, cache hit rate, cost, a missing sandbox."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Static

from codewhale.permissions import Mode
from codewhale.providers.pricing import format_cost
from codewhale.providers.types import Usage

MODE_STYLES = {Mode.PLAN: "bold green", Mode.AGENT: "bold cyan", Mode.YOLO: "bold red"}


def _tokens(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


class StatusLine(Static):
    def __init__(self) -> None:
        super().__init__("CodeWhale", id="status", markup=False)

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
    ) -> None:
        line = Text()
        line.append(f" {mode.value.upper()} ", style=f"reverse {MODE_STYLES[mode]}")
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
        self.update(line)
