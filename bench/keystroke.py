"""Keystroke latency to the frame with 20 sub-agents streaming, beside a bare Textual app.

Both apps run at the same time, each in its own 120×40 pseudo-terminal: CodeWhale against
the loopback model (in its own process) with 20 children each streaming 50 tokens/s, and a
bare Textual app with an Input and 20 Statics, each updated 50 times a second (in place,
without laying the screen out: like CodeWhale's previews, each keeps its one row). Real keys
are written to the terminals, so they go through each app's driver and message queue, the
queue the engine's events share. Keys go to the two terminals in turn, so both are measured
under the same machine load. A keystroke's latency is the time from writing the key until
the terminal output that shows the character in the input line has been read (the screen's
text is tracked with bench/startup.py's model of it). Each key is then erased with
Backspace, waited for but not counted, so the input stays one line; a random pause between
keys keeps them from falling into step with the apps' frame clocks.

The target (issue 31): p95 within 1.5× the bare app's and under 33 ms (two 1/60 s frames).
"""

from __future__ import annotations

import fcntl
import math
import os
import pty
import random
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path

from bench.startup import COLUMNS, PLACEHOLDER, ROWS, Screen
from bench.targets import target
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.serve import loopback_process

CHILDREN = 20
TOKENS_PER_SECOND = 50
# Long enough that every child still streams when the last key is measured (checked).
STREAM_SECONDS = 120
SAMPLES = int(os.environ.get("BENCH_KEYSTROKE_SAMPLES", "200"))
PREFIX = "keys:"  # typed once, so the measured character has a place no other text shares
TARGET_RATIO = 1.5
TARGET_P95_MS = 33.0
WAIT_SECS = 30.0
BARE_PLACEHOLDER = "type here"
STREAMING = f"waiting on {CHILDREN} sub-agents"  # CodeWhale's status line while they run

BARE_APP = f"""
from textual.app import App
from textual.containers import VerticalScroll
from textual.widgets import Input, Static


class Bare(App):
    AUTO_FOCUS = "Input"

    def compose(self):
        self.lines = [Static(f"child {{i}}") for i in range({CHILDREN})]
        yield VerticalScroll(*self.lines)
        yield Input(placeholder={BARE_PLACEHOLDER!r})

    def on_mount(self):
        self.tokens = 0
        self.set_interval(1 / {TOKENS_PER_SECOND}, self.stream)

    def stream(self):
        self.tokens += 1
        for i, line in enumerate(self.lines):
            # One row each, whatever the text: redrawn without laying the screen out,
            # as CodeWhale's stream previews are.
            line.update(f"child {{i}} tok{{self.tokens}}", layout=False)


Bare().run()
"""


def responder(body: dict) -> Reply:
    if any("Assignment metadata" in str(m.get("content")) for m in body["messages"]):
        tokens = [f"tok{i} " for i in range(STREAM_SECONDS * TOKENS_PER_SECOND)]
        return Reply(text=tokens, chunk_delay=1 / TOKENS_PER_SECOND)
    if body["messages"][-1].get("content") == "fan out":
        opens = [ToolCallSpec("agent_open", {"prompt": f"job {i}"}) for i in range(CHILDREN)]
        return Reply(tool_calls=opens)
    return Reply(text="noted")


class Terminal:
    """One app in a pseudo-terminal, with the text its screen shows."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.name = name
        self.controller, terminal = pty.openpty()
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.process = subprocess.Popen(
            command, stdin=terminal, stdout=terminal, stderr=terminal, env=env, cwd=cwd
        )
        os.close(terminal)
        self.screen = Screen(COLUMNS, ROWS)
        self.last_read = 0.0
        self.input_row = -1
        self.latencies: list[float] = []

    def read(self) -> None:
        try:
            data = os.read(self.controller, 65536)
        except OSError:  # EIO: nothing holds the terminal open any more
            data = b""
        self.last_read = time.perf_counter()  # before parsing: the bytes are here now
        if not data:
            raise RuntimeError(f"{self.name} exited while it was measured")
        self.screen.feed(data)

    def shows(self, text: str) -> bool:
        return text in self.screen.text()

    def input_shows(self, text: str) -> bool:
        return text in "".join(self.screen.cells[self.input_row])

    def type(self, keys: str) -> None:
        os.write(self.controller, keys.encode())

    def stop(self) -> None:
        """Ask the app to stop (SIGTERM), then kill it if it has not within 10 s."""
        self.process.send_signal(signal.SIGTERM)
        os.close(self.controller)  # an app blocked writing to the terminal gets EIO and ends
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def pump(terminals: list[Terminal], until: Callable[[], bool], what: str) -> None:
    """Feed every terminal its app's output until `until()` holds (at most WAIT_SECS)."""
    deadline = time.perf_counter() + WAIT_SECS
    while not until():
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise RuntimeError(f"waited {WAIT_SECS:.0f} s for {what}")
        ready = select.select([t.controller for t in terminals], [], [], remaining)[0]
        for terminal in terminals:
            if terminal.controller in ready:
                terminal.read()


def drain(terminals: list[Terminal], seconds: float) -> None:
    """Feed every terminal its app's output for `seconds`, so no app waits on a full pipe."""
    end = time.perf_counter() + seconds
    pump(terminals, lambda: time.perf_counter() >= end, "a pause between keys")


def find_input_row(terminal: Terminal, placeholder: str) -> None:
    """Remember the row the input line is on: the one showing its placeholder."""
    rows = ["".join(cells) for cells in terminal.screen.cells]
    terminal.input_row = next(i for i, row in enumerate(rows) if placeholder in row)


def keystroke(terminals: list[Terminal], terminal: Terminal) -> None:
    """Type one character, time it to the output that shows it, then erase it."""
    shown = PREFIX + "x"
    started = time.perf_counter()
    terminal.type("x")
    pump(terminals, lambda: terminal.input_shows(shown), f"{terminal.name} to show a key")
    terminal.latencies.append((terminal.last_read - started) * 1000)
    terminal.type("\x7f")  # Backspace
    pump(terminals, lambda: not terminal.input_shows(shown), f"{terminal.name} to erase it")


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest sample at or above `fraction` of them."""
    ordered = sorted(samples)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


def measure(scratch: Path, base_url: str) -> tuple[Terminal, Terminal]:
    """Start both apps, set 20 children streaming, time SAMPLES keys in each in turn."""
    workspace = scratch / "ws"
    workspace.mkdir()
    env = {
        **os.environ,
        "CODEWHALE_HOME": str(scratch / "home"),
        "CODEWHALE_BASE_URL": base_url,
        "DEEPSEEK_API_KEY": "sk-bench-000000000000",
        "TERM": "xterm-256color",
    }
    bare = Terminal("the bare app", [sys.executable, "-c", BARE_APP], env, workspace)
    app = Terminal("codewhale", [sys.executable, "-m", "codewhale"], env, workspace)
    both = [bare, app]
    try:
        pump(both, lambda: bare.shows(BARE_PLACEHOLDER), "the bare app's input")
        pump(both, lambda: app.shows(PLACEHOLDER), "codewhale's composer")
        find_input_row(bare, BARE_PLACEHOLDER)
        find_input_row(app, PLACEHOLDER)
        app.type("fan out\r")
        pump(both, lambda: app.shows(STREAMING), f"codewhale's status line: {STREAMING}")
        for terminal in both:
            terminal.type(PREFIX)
            pump(both, lambda t=terminal: t.input_shows(PREFIX), f"{terminal.name}'s input")
        pacing = random.Random(31)
        for sample in range(SAMPLES):
            # Each goes first in every other pair, so neither always follows the other's frame.
            for terminal in both if sample % 2 else reversed(both):
                keystroke(both, terminal)
                drain(both, pacing.uniform(0.01, 0.04))
        if not app.shows(STREAMING):
            raise RuntimeError("the children stopped streaming before the last key")
    finally:
        for terminal in both:
            terminal.stop()
    return bare, app


def main() -> None:
    with (
        loopback_process("bench.keystroke:responder") as base_url,
        tempfile.TemporaryDirectory() as scratch,
    ):
        bare, app = measure(Path(scratch), base_url)
    for terminal in (bare, app):
        samples = terminal.latencies
        print(
            f"keystroke: {terminal.name:<12} {CHILDREN} streaming, {len(samples)} keys to the"
            f" frame: p50 {percentile(samples, 0.50):5.1f} ms  p95"
            f" {percentile(samples, 0.95):5.1f} ms  p99 {percentile(samples, 0.99):5.1f} ms"
        )
    p95 = percentile(app.latencies, 0.95)
    floor = percentile(bare.latencies, 0.95)
    target(
        "keystroke to frame p95 vs bare Textual, 20 children streaming",
        p95 / floor,
        "≤",
        TARGET_RATIO,
    )
    target("keystroke to frame p95, 20 children streaming", p95, "<", TARGET_P95_MS, " ms")


if __name__ == "__main__":
    main()
