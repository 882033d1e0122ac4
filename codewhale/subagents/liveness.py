"""The heartbeat: auto-cancel a child that has made no progress of its own (spec §5).

Progress is the child's own activity (stream bytes, a tool starting or finishing).
Time spent waiting on the user or on its own children is not a stall: waiting states
are skipped, and leaving one counts as progress, so the clock restarts there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from codewhale.subagents.child import Child
from codewhale.subagents.lifecycle import ChildState


def stall_message(timeout_secs: float) -> str:
    return f"Auto-cancelled after {timeout_secs:g}s without sub-agent progress."


class LivenessMonitor:
    def __init__(
        self,
        timeout_secs: float,
        children: Callable[[], Iterable[Child]],
        on_stall: Callable[[Child], None],
    ) -> None:
        self.timeout = timeout_secs
        self.children = children
        self.on_stall = on_stall
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def touch(child: Child) -> None:
        child.last_progress = time.monotonic()
        child.last_output_at = time.time()

    def ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def stalled(self, child: Child, now: float) -> bool:
        state = child.state
        if not child.live or child.stop is not None or state is ChildState.QUEUED:
            return False
        if state.terminal or state.waiting:
            return False
        return now - child.last_progress > self.timeout

    async def _watch(self) -> None:
        interval = min(max(self.timeout / 4, 0.05), 5.0)
        while any(child.live for child in self.children()):
            await asyncio.sleep(interval)
            now = time.monotonic()
            for child in list(self.children()):
                if self.stalled(child, now):
                    self.on_stall(child)
