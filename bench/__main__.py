"""Run every benchmark, each in its own process so peak-memory figures stay separate."""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = (
    "startup",
    "engine_overhead",
    "fanout",
    "state_io",
    "rlm",
    "handles",
    "ui_load",
    "resume",
    "completion",
    "local",
    "compaction",
)


def main() -> None:
    for name in BENCHMARKS:
        subprocess.run([sys.executable, "-m", f"bench.{name}"], check=True)


if __name__ == "__main__":
    main()
