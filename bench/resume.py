"""`--continue` of a long session against a fresh start, to a settled screen.

Sessions of 200, 1,000 and 5,000 messages are written with the real SessionStore (user
prompts, tool calls with their results, diffs, sub-agent opens, Markdown answers and
usage totals). Each start runs headless (Textual's run_test) in a fresh process, timed
from launch until the screen has settled: the session is open and, when resuming, the
conversation's last answer is on screen. Fresh starts and resumes are interleaved and
each figure is a median; the ratios compare them within this run. Loading the session
file alone (SessionStore.load) is timed too, so its share of a resume is visible.

Options (environment): BENCH_RESUME_RUNS (rounds, default 5), BENCH_RESUME_SIZES (the
session sizes, comma-separated, default 200,1000,5000; the target is read at the largest).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.targets import target
from codewhale.engine.conversation import UsageMeter
from codewhale.paths import user_dirs
from codewhale.providers.types import Usage
from codewhale.sessions.store import SessionStore

SIZES = tuple(int(n) for n in os.environ.get("BENCH_RESUME_SIZES", "200,1000,5000").split(","))
RUNS = int(os.environ.get("BENCH_RESUME_RUNS", "5"))
MESSAGES_PER_TURN = 6  # prompt, tool calls, two results, a sub-agent open's result, answer
TARGET = 1.3  # issue 16: a 5,000-message --continue within 1.3x a fresh start

SETTLE = """
import asyncio, sys, time
from pathlib import Path
from codewhale.config import load_config
from codewhale.tui.app import CodeWhaleApp

async def main(workspace, resume):
    app = CodeWhaleApp(load_config(workspace=workspace), workspace, continue_latest=resume)
    async with app.run_test(size=(120, 40)) as pilot:
        def settled():
            if app.runtime is None:
                return False
            if not resume:
                return True
            # Imported here: a fresh start does not load the answer cell (Markdown) to settle.
            from codewhale.tui.answer import AssistantMessage
            last = app.query(AssistantMessage).last() if app.query(AssistantMessage) else None
            return last is not None and "the end" in last.answer and bool(last.children)
        while not settled():
            await pilot.pause(0.002)
        await pilot.pause()
        print("settled", len(app.transcript.children), flush=True)
        await app.action_quit()

asyncio.run(main(Path(sys.argv[1]), sys.argv[2] == "continue"))
"""

ANSWER = """## Step {n}

Checked `calc.py` and **fixed** the rounding:

- `round_half_up` now handles negatives
- the tests pass

```python
def round_half_up(x):
    return math.floor(x + 0.5)
```
"""
DIFF = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-def f(x):\n+def f(x, y):\n     return x\n"


def turn(n: int) -> list[dict[str, Any]]:
    """One turn of a coding session: a prompt, two tool calls and a sub-agent, an answer."""
    calls = [
        {"id": f"r{n}", "name": "read_file", "arguments": {"path": "calc.py"}},
        {"id": f"e{n}", "name": "edit_file", "arguments": {"path": "calc.py", "old": "x"}},
        {"id": f"a{n}", "name": "agent_open", "arguments": {"prompt": f"check step {n}"}},
    ]
    source = "\n".join(f"{i:4d}  line {i} of calc.py" for i in range(40))
    opened = {"agent_id": f"agent_{n}", "nickname": "Moby", "type": "explorer"}
    return [
        {"role": "user", "content": f"step {n}: fix the rounding in calc.py"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": f"Step {n}: read the file, then edit it.",
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
                }
                for call in calls
            ],
        },
        {"role": "tool", "tool_call_id": f"r{n}", "content": source},
        {"role": "tool", "tool_call_id": f"e{n}", "content": f"Edited calc.py.\n{DIFF}"},
        {"role": "tool", "tool_call_id": f"a{n}", "content": json.dumps(opened)},
        {"role": "assistant", "content": ANSWER.format(n=n)},
    ]


def write_session(home: Path, workspace: Path, count: int) -> Path:
    """A session of `count` messages after the system prompt, its last answer "the end"."""
    store = SessionStore(user_dirs({"CODEWHALE_HOME": str(home)}).data_dir)
    info, writer = store.create(workspace, "deepseek-v4-pro")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are CodeWhale."}]
    n = 0
    while len(messages) - 1 < count:
        messages += turn(n)
        n += 1
    del messages[count + 1 :]
    messages[-1] = {"role": "assistant", "content": "That is **the end** of the session."}
    writer.record_messages(messages)
    tokens = 1_000 * count
    meter = UsageMeter()
    meter.add_own(Usage(input_tokens=tokens, output_tokens=tokens // 10), cost=0.01 * count)
    writer.record_meter(meter.to_json())
    writer.close()
    return info.path


def _env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "CODEWHALE_HOME": str(home),
        "DEEPSEEK_API_KEY": "sk-bench-0000000000",
        "CODEWHALE_BASE_URL": "http://127.0.0.1:9/v1",
        "TERM": "xterm-256color",
    }


def settle_ms(home: Path, workspace: Path, resume: bool) -> tuple[float, int]:
    """Milliseconds from launching a fresh process to its settled screen; cells mounted."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", SETTLE, str(workspace), "continue" if resume else "fresh"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    elapsed = (time.perf_counter() - started) * 1000
    _, stderr = process.communicate(timeout=60)
    if not line.startswith("settled"):
        raise RuntimeError(f"the app never settled: {stderr[-2000:]}")
    return elapsed, int(line.split()[1])


def load_ms(home: Path, session: Path) -> float:
    store = SessionStore(user_dirs({"CODEWHALE_HOME": str(home)}).data_dir)
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        store.load(session.stem)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        fresh_workspace = Path(scratch) / "fresh"
        fresh_workspace.mkdir()
        workspaces, sessions = {}, {}
        for count in SIZES:
            workspaces[count] = Path(scratch) / f"ws{count}"
            workspaces[count].mkdir()
            sessions[count] = write_session(home, workspaces[count].resolve(), count)
        settle_ms(home, fresh_workspace, resume=False)  # warm-up: bytecode, disk cache
        fresh: list[float] = []
        resumed: dict[int, list[float]] = {count: [] for count in SIZES}
        cells: dict[int, int] = {}
        for _ in range(RUNS):
            fresh.append(settle_ms(home, fresh_workspace, resume=False)[0])
            for count in SIZES:
                elapsed, cells[count] = settle_ms(home, workspaces[count], resume=True)
                resumed[count].append(elapsed)
        loads = {count: load_ms(home, sessions[count]) for count in SIZES}
        sizes = {count: sessions[count].stat().st_size for count in SIZES}
    base = statistics.median(fresh)
    print(f"resume: fresh start              median {base:7.1f} ms to a settled screen")
    for count in SIZES:
        value = statistics.median(resumed[count])
        print(
            f"resume: --continue {count:>5,} messages median {value:7.1f} ms"
            f"  ({value / base:.2f}x a fresh start; {cells[count]} cells mounted;"
            f" SessionStore.load {loads[count]:5.1f} ms of a {sizes[count] / 1e6:.1f} MB file)"
        )
    ratio = statistics.median(resumed[SIZES[-1]]) / base
    print(
        f"resume: --continue of {SIZES[-1]:,} messages / fresh start: {ratio:.2f}x"
        f" (target ≤ {TARGET}x)"
    )
    if SIZES[-1] == 5_000:  # the size the target is set at
        target("--continue 5,000 messages vs fresh start", ratio, "≤", TARGET)


if __name__ == "__main__":
    main()
