"""Textual's Linux terminal driver, made to outlive a hangup of its terminal (POSIX only:
it needs termios; codewhale/tui/hangup.py imports it only where Textual chose it)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from typing import IO, Any

from textual.app import App
from textual.drivers.linux_driver import LinuxDriver

# How often the hangup watch looks whether the app has ended.
POLL_MS = 250


class _TerminalOutput:
    """The terminal for Textual's writer thread; once a write fails (the terminal is
    gone), the rest of the output is dropped."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> None:
        if not self._gone:
            try:
                self._stream.write(text)
            except OSError:
                self._gone = True

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except OSError:
                self._gone = True

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()


class HangupProofDriver(LinuxDriver):
    """Textual's terminal driver, outliving a hangup of its terminal."""

    def __init__(self, app: App[Any], **options: Any) -> None:
        super().__init__(app, **options)
        if self._file is not None:
            # Textual only writes, flushes and asks fileno() and isatty() of it.
            self._file = _TerminalOutput(self._file)  # type: ignore[assignment]

    def run_input_thread(self) -> None:
        threading.Thread(target=self._watch_for_hangup, name="hangup-watch", daemon=True).start()
        # The terminal is gone: no more keys, and its SIGHUP closes the app.
        with contextlib.suppress(OSError):
            super().run_input_thread()

    def _watch_for_hangup(self) -> None:
        """Send this process the SIGHUP of a terminal that closed without sending one.

        Only a controlling terminal's hangup is signalled; one that is not (a program
        that started the app on a pseudo-terminal of its own, then died) reads as end of
        file, and Textual's reader then spins a core for as long as the app lives. The
        kernel says the terminal hung up to a poll that asks for nothing else.
        """
        watch = select.poll()
        watch.register(self.fileno, 0)  # no events asked: only a hangup or an error is told
        while not self.exit_event.is_set():
            if watch.poll(POLL_MS):
                os.kill(os.getpid(), signal.SIGHUP)  # the same hangup twice counts once
                return
