"""Run a LoopbackLLM in its own process: `python -m tests.support.serve module:responder`.

Benchmarks use it so the server's Python threads do not share the measured
process's GIL. Prints the base URL on one line, serves until stdin closes.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.llm_server import LoopbackLLM


@contextmanager
def loopback_process(responder: str) -> Iterator[str]:
    """Serve `module:function` from a separate process; yields the base URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.serve", responder],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    try:
        yield server.stdout.readline().strip()
    finally:
        try:
            server.communicate(input="", timeout=30)
        except subprocess.TimeoutExpired:  # what it served is measured: don't fail on this
            server.kill()
            server.communicate()


def main() -> None:
    module_name, _, function_name = sys.argv[1].partition(":")
    responder = getattr(importlib.import_module(module_name), function_name)
    with LoopbackLLM() as llm:
        llm.respond = responder
        print(llm.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
