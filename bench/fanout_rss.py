"""Memory over a long session: 40 rounds of 20 sub-agents through one runtime.

Each round is one user turn in which the parent opens 20 children (5 model steps each,
bench/fanout.py's responder on the loopback model, run in its own process). What a
round leaves behind must be what the session really keeps (the conversation, one
record per child), not the children's engines: RSS after 40 rounds against after 10,
with a target of at most 1.2x.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
from pathlib import Path

from bench.targets import target
from codewhale.allocator import tune as tune_allocator
from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from tests.support.serve import loopback_process

ROUNDS = 40
CHILDREN = 20
MEASURED_AT = (10, 40)


def rss_mb() -> float:
    """This process's resident memory now (not its peak), in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def measure() -> dict[int, float]:
    rss: dict[int, float] = {}
    with (
        loopback_process("bench.fanout:responder") as base_url,
        tempfile.TemporaryDirectory() as scratch,
    ):
        home = Path(scratch) / "home"
        os.environ.update(
            CODEWHALE_HOME=str(home),
            CODEWHALE_BASE_URL=base_url,
            DEEPSEEK_API_KEY="sk-bench-000000000000",
        )
        (home / "config").mkdir(parents=True)
        (home / "config" / "config.toml").write_text("[subagents]\nmax_concurrent = 20\n")
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        session = open_runtime(workspace=workspace, mode=Mode.YOLO)
        try:
            for round_number in range(1, ROUNDS + 1):
                await session.submit(f"fan out {CHILDREN}")
                if round_number in MEASURED_AT:
                    gc.collect()  # what is still referenced, not what waits for the collector
                    rss[round_number] = rss_mb()
            finished = sum(agent.status == "completed" for agent in session.agents())
            assert finished == ROUNDS * CHILDREN, f"{finished} children completed"
        finally:
            await session.close()
    return rss


def main() -> None:
    tune_allocator()  # as `codewhale` does when it starts
    rss = asyncio.run(measure())
    early, late = (rss[n] for n in MEASURED_AT)
    children = (MEASURED_AT[1] - MEASURED_AT[0]) * CHILDREN
    print(
        f"fanout_rss: {CHILDREN} children a round: RSS {early:.0f} MB after "
        f"{MEASURED_AT[0]} rounds, {late:.0f} MB after {MEASURED_AT[1]} "
        f"({(late - early) * 1024 / children:.0f} KB a child in between)"
    )
    target(f"RSS after {MEASURED_AT[1]} rounds / after {MEASURED_AT[0]}", late / early, "≤", 1.2)


if __name__ == "__main__":
    main()
