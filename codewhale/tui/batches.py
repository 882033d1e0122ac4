"""Engine events applied to the main screen a frame's worth at a time.

With 20 children streaming, events come by the hundred each second, and in bursts (twenty
children opened or finishing at once) many of them mount or resize a cell. Every frame
after such a change lays out the whole screen and redraws what moved, so applying events
one by one cost a layout for nearly every event of a burst. Applied in batches, with
redraws held until a batch is done, a burst costs a layout per batch.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from textual.app import App

from codewhale.tui.status import Coalescer

Item = TypeVar("Item")
# Redraws are held while a batch is applied, a keystroke's echo too: a batch stops after
# this long and the rest waits for the next tick (the twenty mounts of a fan-out took
# 180 ms in one batch).
BATCH_SECS = 0.02


class Batches(Generic[Item]):
    """Hands the items added to `apply` in the order they came, at most once per
    `status.REDRAW_SECS` (at once after a quiet spell), with the app's redraws held
    while a batch is applied; while `ready()` is false they wait (see `resume`).

    An item added with a `supersedes` key replaces a pending one added with the same key,
    which is then skipped (a child's stream preview: only the latest tail is shown).
    """

    def __init__(
        self,
        app: App,
        apply: Callable[[Item], Awaitable[None]],
        *,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self._app = app
        self._apply = apply
        self._ready = ready
        self._pending: deque[tuple[Hashable, Item]] = deque()
        self._latest: dict[Hashable, Item] = {}
        self._added = self._handled = 0  # items so far, and of those applied or skipped
        self._progress = asyncio.Condition()
        self._coalescer = Coalescer(app, self._schedule)

    def add(self, item: Item, *, supersedes: Hashable = None) -> None:
        self._pending.append((supersedes, item))
        self._added += 1
        if supersedes is not None:
            self._latest[supersedes] = item
        self._coalescer.request()

    def resume(self) -> None:
        """`ready()` may have changed: apply what waits, or let `applied` stop waiting."""
        self._coalescer.request()

    def _schedule(self) -> None:
        # In the app's message queue, so a batch runs between other handlers, never
        # during one, as each event's own message did.
        self._app.call_later(self._apply_pending)

    async def _apply_pending(self) -> None:
        if not self._ready():  # `resume` brings it back
            async with self._progress:
                self._progress.notify_all()
            return
        deadline = time.monotonic() + BATCH_SECS
        with self._app.batch_update():
            while self._pending:
                key, item = self._pending.popleft()
                if key is None:
                    await self._apply(item)
                elif self._latest[key] is item:  # else a later one is pending: skipped
                    del self._latest[key]
                    await self._apply(item)
                self._handled += 1
                if time.monotonic() >= deadline:
                    break
        # A frame asked for during the batch (a keystroke's echo) was skipped, and ending
        # the batch prompts only the app: the screen draws once prompted too.
        self._app.screen.check_idle()
        if self._pending:
            self._coalescer.request()
        async with self._progress:
            self._progress.notify_all()

    async def applied(self) -> None:
        """Returns once the items added so far are applied (or skipped), however many
        more come meanwhile; at once while they wait for `ready()`."""
        added = self._added
        async with self._progress:
            await self._progress.wait_for(lambda: self._handled >= added or not self._ready())
