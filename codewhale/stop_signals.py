"""SIGINT, SIGTERM and SIGHUP as requests to stop: the first asks the app to stop cleanly
(record the turn, stop children and servers), a second one while it does ends it at once
(but not a second SIGHUP: a hangup is one event, however often it is told).

A process killed by a signal's default action leaves its children behind (a stdio MCP
server that ignores the end of its input runs on) and writes no result, so the app takes
these signals itself for as long as it runs.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from types import TracebackType

from codewhale import process_tree

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def exit_status(signum: int) -> int:
    """The shell's status for a process ended by `signum` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + signum


def kill_leftovers() -> None:
    """Kill every process still running below this one: after a stop, whatever closing
    did not end (a server that ignores SIGTERM, while its stop timed out) would outlive us."""
    process_tree.kill_below(os.getpid())


def force_exit(signum: int) -> None:
    """End the process now: what it started is killed first (it would outlive us)."""
    name = signal.Signals(signum).name
    # os.write: the Python streams may be mid-write in the code this interrupted.
    os.write(2, f"codewhale: {name} again while stopping; exiting at once\n".encode())
    kill_leftovers()
    os._exit(exit_status(signum))


class StopSignals:
    """While entered (in a running event loop), the first stop signal calls `on_stop`
    with its number; another one after it calls `force_exit`. Left after a signal, it
    kills what is left below the process."""

    def __init__(
        self,
        on_stop: Callable[[int], object],
        signals: tuple[signal.Signals, ...] = STOP_SIGNALS,
    ) -> None:
        self.on_stop = on_stop
        self.signals = signals
        self.received: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def exit_status(self) -> int | None:
        """The status to exit with for the signal received, None when none came."""
        return exit_status(self.received) if self.received is not None else None

    def install(self) -> None:
        """Take the signals, on the running event loop."""
        self._loop = asyncio.get_running_loop()
        for signum in self.signals:
            self._loop.add_signal_handler(signum, self._arrived, signum)

    def remove(self) -> None:
        """Give the signals back their default actions."""
        if self._loop is not None and not self._loop.is_closed():
            for signum in self.signals:
                self._loop.remove_signal_handler(signum)
        self._loop = None

    def __enter__(self) -> StopSignals:
        self.install()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.remove()
        if self.received is not None:
            kill_leftovers()

    def _arrived(self, signum: int) -> None:
        if self.received == signum == signal.SIGHUP:
            return  # one hangup, told twice (the kernel, and the app's watch of its terminal)
        if self.received is not None:
            force_exit(signum)
        self.received = signum
        self.on_stop(signum)
