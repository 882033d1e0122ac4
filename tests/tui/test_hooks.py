"""/hooks lists the session's hooks, /hooks trust lets a project's run, and each run is
one line in the transcript."""

from __future__ import annotations

import json
import os
from pathlib import Path

from codewhale.tui.transcript import Notice
from tests.support.llm_server import Reply, ToolCallSpec
from tests.tui.conftest import type_and_send, wait_for
from tests.tui.test_usage_commands import command, notices


def settings(command_text: str, matcher: str) -> str:
    group = {"matcher": matcher, "hooks": [{"type": "command", "command": command_text}]}
    return json.dumps({"hooks": {"PreToolUse": [group], "FutureEvent": [group]}})


async def test_hooks_are_listed_trusted_and_each_run_is_a_transcript_line(llm, make_app, workspace):
    user = Path(os.environ["CLAUDE_CONFIG_DIR"])
    user.mkdir(parents=True, exist_ok=True)
    (user / "settings.json").write_text(settings("true", "Read"))
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(settings("exit 0", "Bash"))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "."})]),
        Reply(text="read"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        listed = await command(pilot, app, "/hooks")
        assert "PreToolUse [Read] true (timeout 60 s)" in listed
        assert "PreToolUse [Bash] exit 0 (timeout 60 s)  [not trusted: does not run]" in listed
        assert "Unused events: FutureEvent" in listed
        trusted = await command(pilot, app, "/hooks trust")
        assert trusted == "Trusted 2 hook(s) of this project; they run from now on."
        assert "not trusted" not in await command(pilot, app, "/hooks")
        before = len(app.query(Notice))
        await type_and_send(pilot, "look")
        await wait_for(pilot, lambda: bool(llm.requests) and not app.turn_running, timeout=20)
        lines = [text for text in notices(app)[before:] if "hook" in text]
        assert len(lines) == 1 and lines[0].startswith("PreToolUse hook ok: true (")
        await app.action_quit()
