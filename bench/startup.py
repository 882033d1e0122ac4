"""Start-up times, medians of repeated runs in fresh processes.

`codewhale --version` and `codewhale config path` are reported next to a bare
`python -c pass` measured in the same run, so the ratio stays meaningful on a noisy
machine. Time to the composer being painted is measured twice: headless (Textual's
run_test in a fresh process) and in a real pseudo-terminal (until the composer's
placeholder reaches the screen).
"""

from __future__ import annotations

import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 21


def median_wall_ms(command: list[str], runs: int = RUNS) -> float:
    """Median wall time of `command` in milliseconds (one warm-up run discarded)."""
    subprocess.run(command, check=True, capture_output=True)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


HEADLESS = """
import asyncio, os, tempfile
from pathlib import Path
from codewhale.config import load_config
from codewhale.tui.app import CodeWhaleApp

async def main():
    workspace = Path(tempfile.mkdtemp())
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    async with app.run_test() as pilot:
        await pilot.pause()
        print("painted", flush=True)
        await app.action_quit()

asyncio.run(main())
"""


def _env(home: str) -> dict[str, str]:
    return {
        **os.environ,
        "CODEWHALE_HOME": home,
        "DEEPSEEK_API_KEY": "sk-bench-0000000000",
        "CODEWHALE_BASE_URL": "http://127.0.0.1:9/v1",
        "TERM": "xterm-256color",
    }


def headless_paint_ms(home: str, runs: int = 7) -> float:
    samples = []
    for _ in range(runs + 1):
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-c", HEADLESS],
            capture_output=True,
            text=True,
            env=_env(home),
            check=True,
        )
        assert "painted" in result.stdout, result.stderr
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples[1:])


def pty_paint_ms(home: str, runs: int = 7) -> float:
    samples = []
    for _ in range(runs + 1):
        controller, terminal = pty.openpty()
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "codewhale"],
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env=_env(home),
            cwd=tempfile.gettempdir(),
        )
        os.close(terminal)
        seen = b""
        while b"Ask" not in seen:
            if select.select([controller], [], [], 5)[0]:
                seen += os.read(controller, 65536)
            else:
                raise RuntimeError("the composer never appeared")
        samples.append((time.perf_counter() - started) * 1000)
        os.write(controller, b"\x11")
        process.wait(timeout=10)
        os.close(controller)
    return statistics.median(samples[1:])


def main() -> None:
    baseline = median_wall_ms([sys.executable, "-c", "pass"])
    version = median_wall_ms([sys.executable, "-m", "codewhale", "--version"])
    config = median_wall_ms([sys.executable, "-m", "codewhale", "config", "path"])
    print(f"startup: python -c pass         median {baseline:7.1f} ms over {RUNS} runs")
    for label, value in (("codewhale --version", version), ("codewhale config path", config)):
        ratio = value / baseline
        print(f"startup: {label:<22} median {value:7.1f} ms  ({ratio:.2f}x bare python)")
    with tempfile.TemporaryDirectory() as home:
        headless = headless_paint_ms(home)
        real = pty_paint_ms(home)
    print(f"startup: composer painted, headless  median {headless:7.1f} ms (fresh process)")
    print(f"startup: composer painted, real pty  median {real:7.1f} ms (fresh process)")


if __name__ == "__main__":
    main()
