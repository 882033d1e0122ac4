"""Revive round trip (issue 30, item 4): a completed explore child gets a follow-up through
agent_eval's `message`; how long until its new report reaches the parent.

The clock starts as agent_eval is called and stops when the child's completion event
arrives in the parent's inbox, which is where the parent's model reads it. The child
answers at once (the loopback model, in-process, no delay), so the figure is the
runtime's own cost of a revival: rebuilding the run, one model request of the child's
whole context, parsing its report and delivering the completion. Median and worst of RUNS.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from codewhale.runtime.runtime import Runtime
from tests.support.llm_server import LoopbackLLM, Reply

RUNS = int(os.environ.get("BENCH_REVIVE_RUNS", "10"))
KEY = "sk-bench-000000000000"
REPORT = "SUMMARY: {what}\nCHANGES: None.\nEVIDENCE:\n- a.py:1\nRISKS: none\nBLOCKERS: None."


async def completion_of(session: Runtime, agent_id: str) -> str:
    """Wait for `agent_id`'s completion event in the parent's inbox and take it."""
    inbox = session.manager.root.inbox
    while True:
        for text in inbox.runtime_events():
            if agent_id in text and "subagent_completion" in text:
                inbox.withdraw(text)
                return text
        await inbox.next_arrival()


async def one_run(workspace: Path, llm: LoopbackLLM) -> float:
    """Milliseconds from the follow-up to the revived child's completion at the parent."""
    llm.respond = lambda body: Reply(text=REPORT.format(what=len(body["messages"])))
    session = open_runtime(workspace=workspace, mode=Mode.YOLO)
    try:
        opened = session.manager.open({"prompt": "survey the modules", "type": "explore"})
        agent_id = opened["agent_id"]
        await completion_of(session, agent_id)
        started = time.perf_counter()
        reply = await session.manager.evaluate({"agent_id": agent_id, "message": "count tests"})
        event = await completion_of(session, agent_id)
        elapsed = (time.perf_counter() - started) * 1000
        assert reply["message_delivery"] == {"delivered": True, "revived": True}, reply
        assert "completed" in event and session.manager.find(agent_id).record.runs == 2
        return elapsed
    finally:
        await session.close()


async def measure() -> None:
    times = []
    with LoopbackLLM() as llm:
        for run in range(RUNS + 1):  # the first is a warm-up (imports, connections)
            with tempfile.TemporaryDirectory() as scratch:
                os.environ.update(
                    CODEWHALE_HOME=str(Path(scratch) / "home"),
                    CODEWHALE_BASE_URL=llm.base_url,
                    DEEPSEEK_API_KEY=KEY,
                )
                workspace = Path(scratch) / "ws"
                workspace.mkdir()
                elapsed = await one_run(workspace, llm)
            if run:
                times.append(elapsed)
    print(
        f"revive: follow-up to the revived child's report at the parent: median "
        f"{statistics.median(times):.1f} ms, worst {max(times):.1f} ms ({RUNS} runs)"
    )


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
