"""A screen's frame clock that draws a refresh as soon as the frame rate allows.

Textual draws a screen on an interval timer, paused while nothing needs drawing and
resumed by a refresh. Once a tick comes late (every tick after a pause does), Textual's
timer skips to the tick after the next one, so a refresh that comes soon after a frame
waits one to two frame periods (17–33 ms at 60 fps) while the event loop sits idle. With
children streaming nearly every keystroke's echo comes soon after a frame: that wait was
the largest part of the keystroke latency's p95 (bench/keystroke.py). This clock keeps
Textual's frame rate cap and drops the rest of its schedule: a frame is drawn as soon as
one is wanted and a frame period has passed since the last.
"""

from __future__ import annotations

import asyncio
import time

from textual import constants
from textual.screen import Screen, ScreenResultType
from textual.timer import EventTargetGone, Timer

FRAME_SECS = 1 / constants.MAX_FPS  # Textual's own cap (TEXTUAL_FPS, 60 by default)


def frame_wait(last_frame: float, now: float) -> float:
    """Seconds until the next frame may be drawn: none once a period has passed."""
    return max(last_frame + FRAME_SECS - now, 0.0)


class FrameClock(Timer):
    """The screen's update timer, ticking once a frame is wanted and due (see above)."""

    last_frame = float("-inf")  # when it last ticked (time.monotonic)

    async def _run(self) -> None:
        while True:
            await self._active.wait()  # paused while nothing needs drawing
            wait = frame_wait(self.last_frame, time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
                continue  # paused meanwhile (a layout drew it): wait to be wanted again
            self.last_frame = time.monotonic()
            try:
                await self._tick(next_timer=self.last_frame, count=0)
            except EventTargetGone:
                return


class FramedScreen(Screen[ScreenResultType]):
    """A screen drawn by a FrameClock instead of Textual's interval timer."""

    _frame_clock: FrameClock | None = None

    # Textual 8 reaches the update timer only through this property (resumed by a refresh,
    # paused once drawn); tests/tui/test_frame_clock.py fails if a release stops using it,
    # rather than the screens falling back to the old schedule unseen.
    @property
    def _update_timer(self) -> Timer:
        if self._frame_clock is None:
            clock = FrameClock(
                self, FRAME_SECS, name="screen_update", callback=self._on_timer_update, pause=True
            )
            clock._start()
            self._timers.add(clock)  # stopped with the screen, as set_interval's timers are
            self._frame_clock = clock
        return self._frame_clock
