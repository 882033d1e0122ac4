"""Start-up times, medians of repeated runs in fresh processes, each next to its baseline.

`codewhale --version` and `codewhale config path` are reported next to a bare
`python -c pass` measured in the same run.

The app's start is reported next to a bare Textual app with the same layout (status
line, transcript beside a 38-column sidebar, hint line, a focused bordered composer
with the same placeholder, a footer with the same keys), both measured in the same run,
interleaved, in fresh processes:

- first frame: the whole layout is on screen (the composer's placeholder and the
  footer's keys have been drawn); from here keys are taken (typed text is echoed and a
  prompt sent meanwhile is held until the session is open).
- settled: the screen as it stays. The bare app is settled at its first frame; CodeWhale
  once the session is open and its status line shows the model instead of `starting…`.

Each is measured headless (Textual's headless driver, time until the layout has been
computed and rendered) and in a real pseudo-terminal of 120×40 (time until the text
reaches the terminal), with bytecode compiled as `make run` leaves it. The target
(issue 16) is a first settled screen within 1.2× the bare app.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path

RUNS = 21
APP_RUNS = int(os.environ.get("BENCH_STARTUP_RUNS", "9"))
COLUMNS, ROWS = 120, 40
PLACEHOLDER = "Ask CodeWhale… (/ for commands, @ for files, Tab cycles mode)"
MODEL = "deepseek-v4-pro"  # the status line once the session is open (preset default)

BARE_APP = f"""
from textual.app import App
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Static, TextArea


class Bare(App):
    AUTO_FOCUS = "#composer"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True), Binding("ctrl+b", "w", "Work")]
    CSS = '''
    #status {{ height: 1; background: $panel; }}
    #body {{ height: 1fr; }}
    #transcript {{ width: 1fr; padding: 0 1; }}
    #work {{ width: 38; border-left: solid $primary-darken-2; padding: 0 1; }}
    #hint {{ height: auto; max-height: 2; padding: 0 1; }}
    #composer {{ height: auto; min-height: 3; max-height: 10; border: round $primary; }}
    '''

    def compose(self):
        yield Static("CodeWhale  starting…", id="status")
        with Horizontal(id="body"):
            yield VerticalScroll(id="transcript")
            yield VerticalScroll(Static("Work"), id="work")
        yield Static("", id="hint")
        yield TextArea(id="composer", compact=True, placeholder={PLACEHOLDER!r})
        yield Footer()
"""

# Headless: the layout computed and rendered means the composer has a region on screen.
HEADLESS = """
import asyncio
from textual.app import ScreenStackError
from textual.css.query import NoMatches
{setup}

def painted():
    try:
        return app.query_one("#composer").region.area > 0
    except (ScreenStackError, NoMatches):
        return False

async def main():
    task = asyncio.create_task(app.run_async(headless=True, size=({columns}, {rows})))
    marks = {{"frame": painted, "settled": settled}}
    for mark, reached in marks.items():
        while not reached():
            await asyncio.sleep(0.001)
        print(mark, flush=True)
    app.exit()
    await task

asyncio.run(main())
"""

BARE_HEADLESS = HEADLESS.format(
    setup=BARE_APP + "\napp = Bare()\nsettled = lambda: True",
    columns=COLUMNS,
    rows=ROWS,
)

# As launch_tui builds it: the start-up checks (or their receipt) hand the app its config.
CODEWHALE_HEADLESS = HEADLESS.format(
    setup="""
import argparse, sys
from pathlib import Path
from codewhale.tui.launch import check

workspace = Path(sys.argv[1])
checked = check(argparse.Namespace(workspace_path=workspace, overrides={}, resume=None))
from codewhale.tui.app import CodeWhaleApp

app = CodeWhaleApp(checked, workspace)
settled = app.session_ready.is_set
""",
    columns=COLUMNS,
    rows=ROWS,
)


def median_wall_ms(command: list[str], runs: int = RUNS) -> float:
    """Median wall time of `command` in milliseconds (one warm-up run discarded)."""
    subprocess.run(command, check=True, capture_output=True)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _env(home: str) -> dict[str, str]:
    return {
        **os.environ,
        "CODEWHALE_HOME": home,
        "DEEPSEEK_API_KEY": "sk-bench-0000000000",
        "CODEWHALE_BASE_URL": "http://127.0.0.1:9/v1",
        "TERM": "xterm-256color",
    }


def headless_marks(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Milliseconds from spawning the process to each mark it prints."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    marks = {line.strip(): (time.perf_counter() - started) * 1000 for line in process.stdout}
    if process.wait(timeout=30) != 0 or set(marks) != {"frame", "settled"}:
        raise RuntimeError(f"headless start failed: {marks}")
    return marks


# CSI and OSC sequences, and two-character escapes: what is left is the text drawn.
ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[@-Z\\-_]")


def pty_marks(command: list[str], env: dict[str, str], settled_text: str) -> dict[str, float]:
    """Milliseconds from spawning `command` in a 120×40 pseudo-terminal until the first
    frame (placeholder and footer drawn) and until `settled_text` has been drawn too."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    os.close(terminal)

    def frame(text: str) -> bool:
        return PLACEHOLDER in text and "Quit" in text

    wanted: dict[str, Callable[[str], bool]] = {
        "frame": frame,
        "settled": lambda text: frame(text) and settled_text in text,
    }
    marks: dict[str, float] = {}
    seen = b""
    try:
        while len(marks) < len(wanted):
            if not select.select([controller], [], [], 10)[0]:
                raise RuntimeError(f"{command[-1]}: the screen never settled ({marks})")
            seen += os.read(controller, 65536)
            text = ESCAPES.sub(b"", seen).decode("utf-8", "replace")
            now = (time.perf_counter() - started) * 1000
            for mark, reached in wanted.items():
                if mark not in marks and reached(text):
                    marks[mark] = now
        os.write(controller, b"\x11")  # Ctrl+Q
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
    return marks


def compare(
    label: str, measure_bare: Callable[[], dict], measure_app: Callable[[], dict], runs: int
) -> None:
    """Interleaved runs (one warm-up each), medians and the ratio to the bare app."""
    measure_bare(), measure_app()
    bare: dict[str, list[float]] = {"frame": [], "settled": []}
    app: dict[str, list[float]] = {"frame": [], "settled": []}
    for _ in range(runs):
        for samples, measure in ((bare, measure_bare), (app, measure_app)):
            for mark, value in measure().items():
                samples[mark].append(value)
    for mark, name in (("frame", "first frame"), ("settled", "first settled screen")):
        ours, theirs = statistics.median(app[mark]), statistics.median(bare[mark])
        print(
            f"startup: {name:<20} {label:<24} codewhale {ours:5.0f} ms  bare Textual "
            f"{theirs:4.0f} ms  ({ours / theirs:.2f}x, target <= 1.2x; {runs} runs each)"
        )


def main() -> None:
    # As `make run` leaves it: an editable install with PYTHONDONTWRITEBYTECODE set would
    # otherwise compile every module at every start.
    package = Path(__file__).parents[1] / "codewhale"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    baseline = median_wall_ms([sys.executable, "-c", "pass"])
    version = median_wall_ms([sys.executable, "-m", "codewhale", "--version"])
    config = median_wall_ms([sys.executable, "-m", "codewhale", "config", "path"])
    print(f"startup: python -c pass         median {baseline:7.1f} ms over {RUNS} runs")
    for label, value in (("codewhale --version", version), ("codewhale config path", config)):
        ratio = value / baseline
        print(f"startup: {label:<22} median {value:7.1f} ms  ({ratio:.2f}x bare python)")
    bare_pty = [sys.executable, "-c", BARE_APP + "\nBare().run()"]
    codewhale_pty = [sys.executable, "-m", "codewhale"]
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as workspace:
        env = _env(home)
        compare(
            "headless",
            lambda: headless_marks([sys.executable, "-c", BARE_HEADLESS], env),
            lambda: headless_marks([sys.executable, "-c", CODEWHALE_HEADLESS, workspace], env),
            APP_RUNS,
        )
        compare(
            "real pty",
            lambda: pty_marks(bare_pty, env, "Work"),
            lambda: pty_marks(codewhale_pty, env, MODEL),
            APP_RUNS,
        )
        # A first start (or one after any config change): no receipt, the config is checked.
        compare(
            "real pty, config checked",
            lambda: pty_marks(bare_pty, env, "Work"),
            lambda: pty_marks(codewhale_pty, _env(tempfile.mkdtemp(dir=home)), MODEL),
            APP_RUNS,
        )


if __name__ == "__main__":
    main()
