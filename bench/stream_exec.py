"""Long answers through `codewhale exec`: time per size, beside a bare reader of the same stream.

The loopback server (in a process of its own, so its threads do not share a measured
process's GIL) streams an answer of 100 KB, 580 KB, 2.3 MB and 5 MB, in deltas of
DELTA_CHARS characters, one SSE event per write, as a provider sends them. Each size is
read, end to end in a fresh process, by:

- a bare reader: httpx, the SSE lines parsed and each delta's JSON decoded, the text
  joined once and printed: what any client must do to show the answer;
- `codewhale exec`: the app's whole path (provider client, engine, events, session
  file, printer), its stdout checked to be exactly the answer.

Runs are interleaved (a noisy neighbour slows both, not one) and each figure is the
median of RUNS. An answer that grows in linear time takes about 4× as long at 2.3 MB as
at 580 KB (less, since start-up is shared); the target (issue 27) is a ratio ≤ 5.5.
A run that has not finished within TIMEOUT_SECS is reported as such, and fails the target.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any

from bench.targets import target
from tests.support.llm_server import Reply
from tests.support.serve import loopback_process
from tests.support.settings import app_environment

SIZES = (100_000, 580_000, 2_300_000, 5_000_000)
DELTA_CHARS = 64
RUNS = int(os.environ.get("BENCH_STREAM_RUNS", "3"))
TIMEOUT_SECS = float(os.environ.get("BENCH_STREAM_TIMEOUT", "300"))
KEY = "sk-bench-000000000000"
PROMPT = "answer {size}"
TARGET = 5.5
# The line of prose the answers repeat: Markdown-ish, with a few non-ASCII characters so
# multi-byte UTF-8 sequences straddle the network's pieces.
LINE = "- line {n:07d}: the café's naïve résumé, with `code`, **bold** and a [link](x).\n"

BARE_READER = """
import json, sys, httpx
url, key, prompt = sys.argv[1:]
body = {"model": "deepseek-v4-flash", "stream": True,
        "messages": [{"role": "user", "content": prompt}]}
parts = []
with httpx.Client(trust_env=False, timeout=600) as client:
    with client.stream("POST", url + "/chat/completions", json=body,
                       headers={"Authorization": "Bearer " + key}) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:])["choices"]:
                    parts.append(choice["delta"].get("content") or "")
sys.stdout.write("".join(parts) + "\\n")
"""


def answer_text(size: int) -> str:
    """`size` characters of prose, ending in a printable character (exec strips the end)."""
    lines: list[str] = []
    total = 0
    while total < size:
        lines.append(LINE.format(n=len(lines)))
        total += len(lines[-1])
    return "".join(lines)[: size - 1] + "."


@cache
def sse_body(size: int) -> bytes:
    """The whole streamed answer of `size` characters, rendered once per server process."""
    text = answer_text(size)
    events = []
    for start in range(0, len(text), DELTA_CHARS):
        delta: dict[str, Any] = {"content": text[start : start + DELTA_CHARS]}
        if not start:
            delta["role"] = "assistant"
        events.append(_event([{"index": 0, "delta": delta, "finish_reason": None}]))
    events.append(_event([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
    events.append(b"data: [DONE]\n\n")
    return b"".join(events)


def _event(choices: list[dict[str, Any]]) -> bytes:
    chunk = {"object": "chat.completion.chunk", "model": "deepseek-v4-flash", "choices": choices}
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"


def responder(body: Any) -> Reply:
    """The answer whose size the last user message names ("answer 580000")."""
    prompt = str(body["messages"][-1]["content"])
    return Reply(recorded_sse=sse_body(int(prompt.split()[-1])))


def timed(name: str, command: list[str], env: dict[str, str], expected: str) -> float | None:
    """Seconds until `command` exited having printed exactly `expected`; None on a timeout."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECS
        )
    except subprocess.TimeoutExpired:
        return None
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or done.stdout != expected:
        sys.exit(
            f"{name} exited {done.returncode} printing {len(done.stdout)} characters "
            f"(expected {len(expected)}):\n{done.stderr[-2000:]}"
        )
    return elapsed


def median(samples: list[float | None]) -> float | None:
    """The median, or None if any run timed out."""
    if any(sample is None for sample in samples):
        return None
    return statistics.median(sample for sample in samples if sample is not None)


def ratio(seconds: float | None, baseline: float | None) -> float | None:
    """seconds / baseline, or None if either run timed out."""
    return seconds / baseline if seconds is not None and baseline else None


def shown(seconds: float | None) -> str:
    return f"{seconds:7.2f} s" if seconds is not None else f"> {TIMEOUT_SECS:g} s (timed out)"


def measure(base_url: str, home: Path, workspace: Path) -> dict[str, dict[int, float | None]]:
    env = app_environment(
        CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=base_url, DEEPSEEK_API_KEY=KEY
    )
    exec_command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace)]
    samples: dict[str, dict[int, list[float | None]]] = {"bare": {}, "exec": {}}
    expected = {size: answer_text(size) + "\n" for size in SIZES}
    # Warm-up: bytecode compiled, the server's first body rendered.
    warm_up = [*exec_command, "--approve", "auto", PROMPT.format(size=SIZES[0])]
    timed("exec", warm_up, env, expected[SIZES[0]])
    for _ in range(RUNS):
        for size in SIZES:
            prompt = PROMPT.format(size=size)
            commands = {
                "bare": [sys.executable, "-c", BARE_READER, base_url, KEY, prompt],
                "exec": [*exec_command, "--approve", "auto", prompt],
            }
            for name, command in commands.items():
                runs = samples[name].setdefault(size, [])
                if None not in runs:  # a run past the timeout is not tried again
                    runs.append(timed(name, command, env, expected[size]))
    return {
        kind: {size: median(runs) for size, runs in by_size.items()}
        for kind, by_size in samples.items()
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        home, workspace = Path(scratch) / "home", Path(scratch) / "ws"
        workspace.mkdir()
        with loopback_process("bench.stream_exec:responder") as base_url:
            figures = measure(base_url, home, workspace)
    bare, app = figures["bare"], figures["exec"]
    print(f"stream_exec: deltas of {DELTA_CHARS} characters, median of {RUNS} runs")
    for size in SIZES:
        versus = ratio(app[size], bare[size])
        print(
            f"stream_exec: {size / 1e6:5.2f} MB  bare reader {shown(bare[size])}"
            f"  exec {shown(app[size])}"
            + (f"  {versus:5.2f}x the bare reader" if versus is not None else "")
        )
    small, large = 580_000, 2_300_000
    if (bare_growth := ratio(bare[large], bare[small])) is not None:
        print(f"stream_exec: bare reader 2.3 MB / 580 KB {bare_growth:.2f}x")
    growth = ratio(app[large], app[small])
    target(
        "exec time 2.3 MB / 580 KB answer", growth if growth is not None else math.inf, "≤", TARGET
    )


if __name__ == "__main__":
    main()
