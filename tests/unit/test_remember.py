"""remember writes the user's memory file, and never in Plan mode."""

from __future__ import annotations

import pytest

from codewhale.permissions import Mode, ModeSwitch
from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.work import Remember


async def test_remember_is_refused_in_plan_mode_and_writes_nothing(tmp_path):
    memory = tmp_path / "memory.md"
    context = ToolContext(
        workspace=tmp_path,
        session_id="s1",
        memory_enabled=True,
        memory_file=memory,
        modes=ModeSwitch(Mode.PLAN),
    )
    with pytest.raises(ToolError, match="Plan mode is read-only: remember is disabled"):
        await Remember().run({"note": "keep me"}, context)
    assert not memory.exists()
    context.modes.current = Mode.AGENT
    await Remember().run({"note": "keep me"}, context)
    assert memory.read_text().rstrip().endswith("keep me")
