"""A finished child revived by agent_eval's message (issue 30, item 4): a new run on its
own transcript, which sees its first task and the follow-up, and whose new report
reaches the parent."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import for_task

FIRST = (
    "SUMMARY: 3 modules read.\nCHANGES: None.\nEVIDENCE:\n- a.py:1\nRISKS: None.\nBLOCKERS: None."
)
SECOND = (
    "SUMMARY: 12 tests counted.\nCHANGES: None.\nEVIDENCE:\n- t.py:1\nRISKS: None.\nBLOCKERS: None."
)


def test_a_completed_child_revived_with_a_message_reports_again(llm, tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    llm.route(for_task("survey the modules"), Reply(text=FIRST), Reply(text=SECOND))
    follow_up = "Also count the tests."
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "agent_open",
                    {"prompt": "survey the modules", "name": "surveyor", "type": "explore"},
                )
            ]
        ),
        Reply(tool_calls=[ToolCallSpec("agent_wait", {})]),
        Reply(tool_calls=[ToolCallSpec("agent_eval", {"name": "surveyor", "message": follow_up})]),
        Reply(tool_calls=[ToolCallSpec("agent_wait", {})]),
        Reply(text="both done"),
    )
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "survey"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    child_requests = [r.json for r in llm.requests if for_task("survey the modules")(r.json)]
    assert len(child_requests) == 2
    revived = child_requests[1]["messages"]
    said = [str(m.get("content")) for m in revived]
    # Its own context: the first task, its first report, then the follow-up.
    assert any("survey the modules" in text for text in said)
    assert any(FIRST in text for text in said)
    assert follow_up in said[-1]
    tool_results = [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    reply = json.loads(tool_results[2])
    revival = reply["revival"]
    assert revival["revived"] is True and revival["run_id"] != revival["previous_run_id"]
    assert reply["message_delivery"] == {"delivered": True, "revived": True}
    assert reply["runs"] == 2 and reply["run_id"] == revival["run_id"]
    # The new report reached the parent.
    assert any("12 tests counted" in text for text in tool_results[3:])
    # The run count is kept with the record: `codewhale agents list/show` read it back.
    listing = agents_command(env, workspace, "list", "--json")
    (record,) = json.loads(listing)["agents"]
    assert record["runs"] == 2 and record["status"] == "completed"
    assert "(run 2)" in agents_command(env, workspace, "list")
    assert "  runs: 2" in agents_command(env, workspace, "show", "surveyor").splitlines()


def agents_command(env: dict[str, str], workspace, *arguments: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "agents", *arguments, "-C", str(workspace)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
