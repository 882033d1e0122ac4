"""The frame clock (tui/frame_clock.py): a refresh waits only for the rest of the frame
period, and the screens that stream draw with it."""

from __future__ import annotations

import asyncio
import time

from pytest import approx
from textual.app import App
from textual.widgets import Input

from codewhale.tui.agent_screen import AgentScreen
from codewhale.tui.frame_clock import (
    BACKGROUND_FRAME_SECS,
    FRAME_SECS,
    FrameClock,
    FramedScreen,
    frame_wait,
)
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.tui.conftest import is_child, open_agent_screen, type_and_send, wait_for


def test_a_frame_waits_only_for_the_rest_of_its_period():
    # Textual's own timer would wait for the tick after the next one here: up to 2 periods.
    assert frame_wait(last_frame=10.0, now=10.0) == approx(FRAME_SECS)
    assert frame_wait(last_frame=10.0, now=10.0 + FRAME_SECS / 4) == approx(FRAME_SECS * 3 / 4)
    assert frame_wait(last_frame=10.0, now=10.0 + FRAME_SECS) == 0
    assert frame_wait(last_frame=10.0, now=11.0) == 0  # long idle: drawn at once
    assert frame_wait(last_frame=float("-inf"), now=0.0) == 0  # the first frame
    # A frame that shows no input (children streaming) waits two periods.
    assert frame_wait(10.0, 10.0, BACKGROUND_FRAME_SECS) == approx(2 * FRAME_SECS)


def frame_clock(screen) -> FrameClock:
    """The clock that draws `screen` (Textual reaches it as the screen's update timer)."""
    assert isinstance(screen, FramedScreen)
    clock = screen._update_timer
    assert isinstance(clock, FrameClock)
    return clock


async def test_a_keystroke_on_the_main_screen_is_drawn_by_the_frame_clock(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        clock = frame_clock(app.screen)
        pressed = time.monotonic()
        await pilot.press("x")
        await wait_for(pilot, lambda: app.composer.text == "x" and clock.last_frame > pressed)


async def test_a_keystroke_on_an_agent_screen_is_drawn_by_the_frame_clock(llm, make_app, workspace):
    llm.route(is_child, Reply(fault=Fault.stall(seconds=30)))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "long survey"})]),
        Reply(text="waiting"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        await type_and_send(pilot, "go")
        screen = await open_agent_screen(pilot, app)
        assert isinstance(screen, AgentScreen)
        clock = frame_clock(screen)
        box = screen.query_one("#agent-message", Input)
        box.focus()
        pressed = time.monotonic()
        await pilot.press("x")
        await wait_for(pilot, lambda: box.value == "x" and clock.last_frame > pressed)


async def test_a_key_hurries_the_next_frame_and_that_frame_ends_the_hurry(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        clock = frame_clock(app.screen)
        assert not clock._input.is_set()  # nothing typed: redraws come at half the rate
        app.screen.input_arrived()
        assert clock._input.is_set()
        drawn = clock.last_frame
        app.screen.refresh()
        await wait_for(pilot, lambda: clock.last_frame > drawn)
        assert not clock._input.is_set()
        await pilot.press("x")  # a real key goes through the app's on_event
        await wait_for(pilot, lambda: app.composer.text == "x" and not clock._input.is_set())


class TickedScreen(FramedScreen):
    """A framed screen that says when its clock has ticked."""

    def __init__(self) -> None:
        super().__init__()
        self.ticked = asyncio.Event()

    def _on_timer_update(self) -> None:
        super()._on_timer_update()
        self.ticked.set()


async def test_a_tick_during_a_batch_update_is_not_a_frame():
    # Textual draws nothing during a batch: counted as a frame, that tick kept the frame
    # the batch's end asks for waiting two periods, idle (a resumed conversation's history),
    # and a key typed meanwhile lost its hurry before it was shown.
    app = App()
    async with app.run_test(size=(80, 24)):
        screen = TickedScreen()
        await app.push_screen(screen)
        clock = frame_clock(screen)
        with app.batch_update():
            drawn = clock.last_frame
            screen.input_arrived()
            screen.ticked.clear()
            clock.resume()
            await screen.ticked.wait()
            assert clock.last_frame == drawn
            assert clock._input.is_set()
        screen.ticked.clear()
        screen.refresh()  # what the batch changed, drawn once it has ended: a frame
        await screen.ticked.wait()
        assert clock.last_frame > drawn
        assert not clock._input.is_set()
