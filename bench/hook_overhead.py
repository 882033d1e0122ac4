"""What a lifecycle hook costs a tool call (issue 30, item 1).

A session against the loopback model (in-process, YOLO mode) makes CALLS read_file
calls, one per model response, so each call is dispatched alone. A call's time runs from
its tool_call_started event to its tool_call_finished event: checks, hooks, the read and
the result's bookkeeping, no model time. Three settings, measured in the same run:

- no hooks at all (the baseline);
- hooks declared only for other events (the check every call pays when hooks exist);
- one PreToolUse and one PostToolUse hook matching every call, each the command `true`
  (a process started and waited for twice per call: the real price of a hook).

Figures are medians over the calls of ROUNDS sessions per setting.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.targets import target
from codewhale.permissions import Mode
from codewhale.runtime import events, open_runtime
from tests.support.llm_server import LoopbackLLM, Reply, ToolCallSpec

CALLS = 20
ROUNDS = int(os.environ.get("BENCH_HOOK_ROUNDS", "3"))
KEY = "sk-bench-000000000000"
# One process per hook per call is the design; it should stay small beside a model step.
TARGET_MS = 25.0


def hooks(*events_: str) -> dict:
    group = [{"matcher": "*", "hooks": [{"type": "command", "command": "true"}]}]
    return {"hooks": {event: group for event in events_}}


SETTINGS = {
    "no hooks": None,
    "hooks for other events": hooks("SessionEnd", "Notification"),
    "PreToolUse + PostToolUse `true`": hooks("PreToolUse", "PostToolUse"),
}


async def call_times(workspace: Path, llm: LoopbackLLM) -> list[float]:
    """Milliseconds each read_file call took in one session."""
    call = ToolCallSpec("read_file", {"path": "notes.txt"})
    llm.enqueue(*(Reply(tool_calls=[call]) for _ in range(CALLS)), Reply(text="done"))
    started: dict[str, float] = {}
    took: list[float] = []

    def stamp(event: events.Event) -> None:
        now = time.perf_counter()
        if isinstance(event, events.ToolCallStarted):
            started[event.call_id] = now
        elif isinstance(event, events.ToolCallFinished):
            took.append((now - started.pop(event.call_id)) * 1000)

    session = open_runtime(workspace=workspace, mode=Mode.YOLO, emit=stamp)
    try:
        await session.submit("read it")
    finally:
        await session.close()
    assert len(took) == CALLS, took
    return took


async def measure(root: Path, llm: LoopbackLLM) -> dict[str, float]:
    workspace = root / "repo"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("a line\n" * 20)
    settings_file = root / "claude" / "settings.json"
    settings_file.parent.mkdir()
    medians = {}
    for name, settings in SETTINGS.items():
        settings_file.write_text(json.dumps(settings or {}))
        times = []
        for _ in range(ROUNDS):
            times += await call_times(workspace, llm)
        medians[name] = statistics.median(times)
    return medians


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, LoopbackLLM() as llm:
        root = Path(folder)
        os.environ.update(
            CODEWHALE_HOME=str(root / "home"),
            CODEWHALE_BASE_URL=llm.base_url,
            DEEPSEEK_API_KEY=KEY,
            CLAUDE_CONFIG_DIR=str(root / "claude"),
        )
        medians = asyncio.run(measure(root, llm))
    base = medians["no hooks"]
    for name, median in medians.items():
        print(f"{name:34} {median:7.2f} ms per call  ({median / base:.2f}× the baseline)")
    idle = medians["hooks for other events"]
    hooked = medians["PreToolUse + PostToolUse `true`"]
    print(f"declared but not matching: {idle - base:+.2f} ms per call")
    print(
        f"two hooks run per call:    {hooked - base:+.2f} ms per call "
        f"({(hooked - base) / 2:.2f} ms per hook run)"
    )
    target("hook overhead per tool call, two hooks", hooked - base, "≤", TARGET_MS, " ms")


if __name__ == "__main__":
    main()
