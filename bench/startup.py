"""How long `codewhale --version` takes, median of repeated runs.

Reported next to bare `python -c pass` measured in the same run, so the ratio
stays meaningful on a noisy machine.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
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


def main() -> None:
    baseline = median_wall_ms([sys.executable, "-c", "pass"])
    version = median_wall_ms([sys.executable, "-m", "codewhale", "--version"])
    config = median_wall_ms([sys.executable, "-m", "codewhale", "config", "path"])
    print(f"startup: python -c pass         median {baseline:7.1f} ms over {RUNS} runs")
    for label, value in (("codewhale --version", version), ("codewhale config path", config)):
        ratio = value / baseline
        print(f"startup: {label:<22} median {value:7.1f} ms  ({ratio:.2f}x bare python)")


if __name__ == "__main__":
    main()
