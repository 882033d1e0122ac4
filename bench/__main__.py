"""Run every benchmark in turn and print its report."""

from __future__ import annotations

from bench import engine_overhead, fanout, startup, state_io


def main() -> None:
    for benchmark in (startup, engine_overhead, fanout, state_io):
        benchmark.main()


if __name__ == "__main__":
    main()
