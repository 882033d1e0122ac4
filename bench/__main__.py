"""Run every benchmark in turn and print its report."""

from __future__ import annotations

from bench import engine_overhead, startup


def main() -> None:
    for benchmark in (startup, engine_overhead):
        benchmark.main()


if __name__ == "__main__":
    main()
