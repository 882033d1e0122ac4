"""Run every benchmark, each in its own process so peak-memory figures stay separate,
then list every target line they printed (see bench/targets.py) in one place. Exits 1
when a benchmark fails or any target is NOT met, naming which.
"""

from __future__ import annotations

import subprocess
import sys

from bench.targets import MARK

BENCHMARKS = (
    "startup",
    "engine_overhead",
    "fanout",
    "fanout_rss",
    "state_io",
    "rlm",
    "handles",
    "ui_load",
    "keystroke",
    "resume",
    "completion",
    "local",
    "compaction",
    "mcp",
    "worktree",
    "stream_exec",
    "stream_tui",
    "background_tasks",
    "hook_overhead",
    "revive",
)


def run(name: str) -> tuple[list[str], int]:
    """Echo one benchmark's output as it comes; return its target lines and exit code."""
    targets = []
    with subprocess.Popen(
        [sys.executable, "-m", f"bench.{name}"], stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(line, end="", flush=True)
            if line.startswith(MARK):
                targets.append(f"{name}: {line[len(MARK) :].strip()}")
    return targets, process.returncode


def main() -> None:
    targets, failed = [], []
    for name in BENCHMARKS:
        lines, code = run(name)
        targets += lines
        if code:
            failed.append(name)
    print("\n== targets (each measured against its baseline in the same run) ==")
    print("\n".join(targets))
    missed = [line for line in targets if line.endswith("NOT met")]
    if missed:
        print(f"\n{len(missed)} of {len(targets)} targets NOT met:")
        print("\n".join(f"  {line}" for line in missed))
    if failed:
        print(f"benchmarks that failed: {', '.join(failed)}")
    if missed or failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
