"""A screen's frame clock that draws a refresh as soon as the frame rate allows.

Textual draws a screen on an interval timer, paused while nothing needs drawing and
resumed by a refresh. Once a tick comes late (every tick after a pause does), Textual's
timer skips to the tick after the next one, so a refresh that comes soon after a frame
waits one to two frame periods (17–33 ms at 60 fps) while the event loop sits idle. With
children streaming nearly every keystroke's echo comes soon after a frame: that wait was
the largest part of the keystroke latency's p95 (bench/keystroke.py). This clock keeps
Textual's frame rate cap and drops the rest of its schedule: a frame that shows the
user's input (a key, a paste) is drawn as soon as a frame period has passed since the
last. Other redraws (twenty children streaming into the sidebar) wait two periods, the
rate Textual's schedule settles at under that load: drawing them at the full rate cost
the app 3-6 points of a core (bench/ui_load.py) for frames nobody reads faster.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from textual import constants
from textual.screen import Screen, ScreenResultType
from textual.timer import EventTargetGone, Timer

FRAME_SECS = 1 / constants.MAX_FPS  # Textual's own cap (TEXTUAL_FPS, 60 by default)
# Between frames that show no input: half that rate.
BACKGROUND_FRAME_SECS = 2 * FRAME_SECS


def frame_wait(last_frame: float, now: float, period: float = FRAME_SECS) -> float:
    """Seconds until the next frame may be drawn: none once `period` has passed."""
    return max(last_frame + period - now, 0.0)


class FrameClock(Timer):
    """The screen's update timer, ticking once a frame is wanted and due (see above)."""

    last_frame = float("-inf")  # when it last ticked (time.monotonic)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._input = asyncio.Event()  # set while the next frame shows the user's input

    def hurry(self) -> None:
        """The next frame shows the user's input: draw it one frame period after the last."""
        self._input.set()

    async def _run(self) -> None:
        while True:
            await self._active.wait()  # paused while nothing needs drawing
            period = FRAME_SECS if self._input.is_set() else BACKGROUND_FRAME_SECS
            wait = frame_wait(self.last_frame, time.monotonic(), period)
            if wait > 0:
                if self._input.is_set():
                    await asyncio.sleep(wait)
                else:  # input arriving meanwhile brings the frame forward
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._input.wait(), wait)
                continue  # paused meanwhile (a layout drew it): wait to be wanted again
            hurried, drawn = self._input.is_set(), self.last_frame
            self._input.clear()
            self.last_frame = time.monotonic()
            batched = self._batched()
            try:
                await self._tick(next_timer=self.last_frame, count=0)
            except EventTargetGone:
                return
            if batched and not self._active.is_set():
                # The tick drew nothing and paused the clock: counted as a frame, it kept the
                # frame the batch's end asks for waiting two periods, idle (a resumed
                # conversation's history did), and a key typed meanwhile unhurried. A tick
                # Textual skips (the app exiting) leaves the clock running: paced as a frame.
                self.last_frame = drawn
                if hurried:
                    self._input.set()

    def _batched(self) -> bool:
        """Whether the app is in a `batch_update`, when a tick draws nothing."""
        screen = self._target()
        return isinstance(screen, Screen) and screen.app._batch_count > 0


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

    def input_arrived(self) -> None:
        """A key or paste for this screen: its echo gets the next frame."""
        clock = self._update_timer
        assert isinstance(clock, FrameClock)
        clock.hurry()
