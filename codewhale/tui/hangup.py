"""SIGHUP (the terminal was closed) and SIGTERM in the app: save the session and quit
without asking, since nobody is there to answer; a second one quits at once.

Ctrl+C is a key in the app (the terminal is in raw mode), so SIGINT is not taken here.

A closed terminal fails every read and write (EIO). Textual's driver does not expect
that: its writer thread dies at the first failed write, and once that thread's queue is
full the next screen update blocks the app for good; its reader thread's failure ends
the app with a traceback. `HangupProofDriver` drops the output and ends the reader
quietly instead, so the app lives on long enough to close its session.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from textual.app import App
from textual.driver import Driver

from codewhale.stop_signals import StopSignals, exit_status, kill_leftovers

APP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
LINUX_DRIVER_MODULE = "textual.drivers.linux_driver"


def driver_for(chosen: type[Driver]) -> type[Driver]:
    """The driver to run the app with, where Textual chose `chosen`."""
    if chosen.__module__ != LINUX_DRIVER_MODULE:
        return chosen
    # Imported only here: Textual's Linux driver needs termios, which Windows lacks.
    from codewhale.tui.hangup_driver import HangupProofDriver

    return HangupProofDriver


def detach_from_terminal() -> None:
    """Point stdin, stdout and stderr at /dev/null opened for writing only, so that what
    the process still prints after a hangup (an exit message, Python flushing its streams)
    cannot fail, and Textual's reader, whose next read then fails, ends (at the end of a
    file it would read on, a core's worth, until the app has closed)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)


def quit_on_stop_signals(
    app: App[Any], close_session: Callable[[], Awaitable[None]]
) -> StopSignals:
    """From now on SIGTERM and SIGHUP close the session, then end `app` with the status
    a shell gives for the signal (143, 129)."""
    quitting: set[asyncio.Task[None]] = set()

    async def save_and_quit(signum: int) -> None:
        await close_session()
        kill_leftovers()
        app.exit(return_code=exit_status(signum))

    def stop(signum: int) -> None:
        if signum == signal.SIGHUP:
            detach_from_terminal()
        # A task of its own, not a message to the app: closing waits for the running turn
        # to end, and the turn's end waits for the app to apply its last events.
        task = asyncio.get_running_loop().create_task(save_and_quit(signum))
        quitting.add(task)
        task.add_done_callback(quitting.discard)

    signals = StopSignals(stop, APP_SIGNALS)
    signals.install()
    return signals
