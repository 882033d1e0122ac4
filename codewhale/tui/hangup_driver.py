"""Textual's Linux terminal driver, made to outlive a hangup of its terminal (POSIX only:
it needs termios; codewhale/tui/hangup.py imports it only where Textual chose it)."""

from __future__ import annotations

import contextlib
from typing import IO, Any

from textual.app import App
from textual.drivers.linux_driver import LinuxDriver


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
        # The terminal is gone: no more keys, and its SIGHUP closes the app.
        with contextlib.suppress(OSError):
            super().run_input_thread()
