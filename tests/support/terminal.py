"""Programs on a pseudo-terminal, as a person at a terminal window runs them, and reading
what they show there."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import termios
import time
from collections.abc import Callable, Mapping


def start_on_terminal(
    command: list[str],
    env: Mapping[str, str],
    *,
    controlling: bool = False,
    piped: bool = False,
) -> tuple[subprocess.Popen, int]:
    """Start `command` on a new pseudo-terminal; returns the process and the terminal's
    controller end, which the caller closes.

    Its stdin, stdout and stderr are the terminal, unless `piped`: then stdin is empty and
    stdout and stderr are text pipes, so with `controlling` the terminal is reached only as
    /dev/tty.
    `controlling` makes it the controlling terminal of a new session, as a terminal window
    does: it is /dev/tty, Ctrl-C there signals the process, and closing the controller
    hangs it up (SIGHUP).
    """
    controller, terminal = pty.openpty()
    if piped:
        stdin, stdout, stderr = subprocess.DEVNULL, subprocess.PIPE, subprocess.PIPE
    else:
        stdin = stdout = stderr = terminal
    process = subprocess.Popen(
        command,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        text=piped,
        env=env,
        start_new_session=controlling,
        # Held open by the child: with no process holding the terminal, reading the
        # controller ends (EIO) before the program opens /dev/tty.
        pass_fds=(terminal,) if piped else (),
        # Run in the child before exec, while it still holds every descriptor of ours.
        preexec_fn=(lambda: fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)) if controlling else None,
    )
    os.close(terminal)
    return process, controller


def read_until(fd: int, until: bytes | Callable[[bytes], bool], timeout: float) -> bytes:
    """Read `fd` until what was read holds `until` (a marker, or a test of all read so far),
    `timeout` seconds pass, or the other end is gone; returns all that was read.

    Reading also keeps a program going: one whose terminal is full blocks writing to it.
    """

    def done(seen: bytes) -> bool:
        return until(seen) if callable(until) else until in seen

    seen = b""
    deadline = time.monotonic() + timeout
    while not done(seen) and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                break
            if not chunk:  # the end of a pipe
                break
            seen += chunk
    return seen


def run_with_typed_answer(
    command: list[str], env: Mapping[str, str], answer: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `command` to its end with a new pseudo-terminal for stdin, `answer` and Enter
    typed ahead into it; stdout and stderr are captured as text."""
    controller, terminal = pty.openpty()
    try:
        # Typed ahead: the terminal holds the line until the question reads it.
        os.write(controller, f"{answer}\n".encode())
        return subprocess.run(
            command,
            stdin=terminal,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    finally:
        os.close(terminal)
        os.close(controller)
