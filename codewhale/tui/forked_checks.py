"""The start-up checks of a receipt miss, run in a forked process while this one loads Textual.

A start whose launch receipt misses (a first launch, an edited config, new flags) must
validate the config and look for the key before the full-screen app appears: a problem
is printed plainly, not inside an app that then closes. Reading and validating the
config takes about 40 ms of CPU; loading Textual and the app's modules takes longer.
Neither needs the other, so a fork runs the checks while this process loads the app, on
another core, and the first frame waits only for the longer of the two.

The child answers on a pipe with the problem, or that the checks passed (it has then
written the launch receipt the parent reads the first frame's settings from). It never
touches the terminal and ends with `os._exit`, so nothing of the parent (atexit
handlers, buffered output) runs twice. A child that gives no answer (it died, or its
reply does not parse) leaves the parent to run the checks itself: the same verdict, later.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable

# The checks: the problem found, or None when they passed.
Checks = Callable[[], str | None]


class ForkedChecks:
    """Checks started in a child process; `problem()` waits for the verdict."""

    def __init__(self, checks: Checks, pid: int, reply: int) -> None:
        self._checks, self._pid, self._reply = checks, pid, reply

    @classmethod
    def start(cls, checks: Checks) -> ForkedChecks | None:
        """Fork and run `checks` in the child; None where this process must not fork: no
        fork on this system, or other threads running (a child copies only the caller)."""
        if not hasattr(os, "fork") or threading.active_count() > 1:
            return None
        reply, answer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                os.close(reply)
                with os.fdopen(answer, "w", encoding="utf-8") as channel:
                    channel.write(json.dumps({"problem": checks()}))
                code = 0
            finally:
                os._exit(code)  # not the parent's exit path: its atexit, its buffers
        os.close(answer)
        return cls(checks, pid, reply)

    def problem(self) -> str | None:
        """The problem the child found, None if the checks passed."""
        with os.fdopen(self._reply, "r", encoding="utf-8") as channel:
            reply = channel.read()
        os.waitpid(self._pid, 0)
        try:
            verdict = json.loads(reply)["problem"]
        except (ValueError, TypeError, KeyError):
            return self._checks()  # no answer: checked here
        return verdict if verdict is None or isinstance(verdict, str) else self._checks()
