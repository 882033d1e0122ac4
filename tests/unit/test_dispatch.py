"""Tool dispatch order: read-only calls overlap, writes run one at a time in order."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from codewhale.engine import events
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.permissions import ApprovalClass, Mode, ModeSwitch
from codewhale.providers.types import ToolCall
from codewhale.tools.base import Tool, ToolContext, ToolResult
from codewhale.tools.registry import ToolRegistry


class Probe(Tool):
    """Records when each call starts and ends; read probes wait for each other."""

    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    description = "test probe"
    log: ClassVar[list[str]] = []
    barrier: ClassVar[asyncio.Barrier | None] = None

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        self.log.append(f"start {self.name}")
        if self.approval is ApprovalClass.AUTO and self.barrier is not None:
            # Only returns once all three read calls are in flight together (the ceiling
            # is for calls run one at a time, which would never all meet).
            await asyncio.wait_for(self.barrier.wait(), 60)
        else:
            await asyncio.sleep(0.01)
        self.log.append(f"end {self.name}")
        return ToolResult(self.name)


class ReadProbe(Probe):
    name = "read_probe"


class WriteProbe(Probe):
    name = "write_probe"
    approval = ApprovalClass.SUGGEST


async def test_reads_overlap_and_writes_keep_their_order(tmp_path):
    Probe.log = []
    Probe.barrier = asyncio.Barrier(3)
    context = ToolContext(workspace=tmp_path, session_id="s", modes=ModeSwitch(Mode.YOLO))
    seen: list[events.Event] = []
    dispatcher = ToolDispatcher(ToolRegistry([ReadProbe(), WriteProbe()]), context, seen.append)
    calls = [
        ToolCall("r1", "read_probe", "{}"),
        ToolCall("r2", "read_probe", "{}"),
        ToolCall("r3", "read_probe", "{}"),
        ToolCall("w1", "write_probe", "{}"),
        ToolCall("w2", "write_probe", "{}"),
    ]
    outcomes = await dispatcher.run(calls)
    assert [o.call.id for o in outcomes] == ["r1", "r2", "r3", "w1", "w2"]
    assert all(o.result.ok for o in outcomes)
    assert Probe.log[:3] == ["start read_probe"] * 3
    assert Probe.log[-4:] == ["start write_probe", "end write_probe"] * 2
