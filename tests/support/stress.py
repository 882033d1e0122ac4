"""`make test-stress`: the whole suite three times in a row with two CPU-burning processes
beside it, as CI runs on a developer's busy machine. Prints each run's counts; exits 1 if
any run failed."""

from __future__ import annotations

import multiprocessing
import re
import subprocess
import sys

RUNS = 3
BURNERS = 2


def burn() -> None:
    while True:
        pass


def main() -> int:
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(BURNERS)]
    for burner in burners:
        burner.start()
    failed = False
    try:
        for run in range(1, RUNS + 1):
            # One line per failure (where it failed and why): a flake seen only under
            # load is diagnosed from this output or not at all.
            result = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "--tb=line", *sys.argv[1:]],
                capture_output=True,
                text=True,
            )
            lines = result.stdout.strip().splitlines()
            summary = next(
                (line for line in reversed(lines) if re.search(r" in [\d.]+s", line)), ""
            )
            print(f"run {run} of {RUNS}: {summary.strip('= ') or 'no summary'}", flush=True)
            if result.returncode:
                failed = True
                print("\n".join(line for line in lines if _names_a_failure(line)))
    finally:
        for burner in burners:
            burner.kill()
    return 1 if failed else 0


def _names_a_failure(line: str) -> bool:
    """A summary line of a failed test, or --tb=line's `path:line: error` of one."""
    return line.startswith(("FAILED", "ERROR")) or bool(re.match(r"/\S+:\d+: ", line))


if __name__ == "__main__":
    sys.exit(main())
