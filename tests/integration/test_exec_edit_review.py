"""A real `codewhale exec` in Agent mode: file changes ask like commands do, so with
`--approve deny` write_file, edit_file and apply_patch change nothing, and with
`--approve auto` the same run changes all three files."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment

FILES = {"written.txt": "old\n", "edited.py": "x = 1\n", "patched.txt": "bee\n"}
PATCH = "--- a/patched.txt\n+++ b/patched.txt\n@@ -1 +1 @@\n-bee\n+BEE\n"
EDITS = [
    ToolCallSpec("write_file", {"path": "written.txt", "content": "new\n"}),
    ToolCallSpec("edit_file", {"path": "edited.py", "old_string": "x = 1", "new_string": "x = 2"}),
    ToolCallSpec("apply_patch", {"patch": PATCH}),
]


def run_exec(llm, tmp_path, approve: str) -> tuple[dict[str, str], list[dict]]:
    """Run one Agent-mode exec whose model makes the three edits; (files after, events)."""
    workspace = tmp_path / "repo"
    workspace.mkdir()
    for name, text in FILES.items():
        (workspace / name).write_text(text)
    llm.enqueue(Reply(tool_calls=EDITS), Reply(text="done"))
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace)]
    done = subprocess.run(
        [*command, "--mode", "agent", "--approve", approve, "--json", "edit"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return {name: (workspace / name).read_text() for name in FILES}, records


def test_approve_deny_keeps_every_agent_mode_edit_from_happening(llm, tmp_path):
    after, records = run_exec(llm, tmp_path, "deny")
    assert after == FILES
    asked = [r for r in records if r["type"] == "approval_requested"]
    assert [r["tool"] for r in asked] == ["write_file", "edit_file", "apply_patch"]
    assert [r["files"] for r in asked] == [["written.txt"], ["edited.py"], ["patched.txt"]]
    assert all(r["file_change"] for r in asked)
    assert "+x = 2" in asked[1]["preview"]
    resolved = [r for r in records if r["type"] == "approval_resolved"]
    assert [(r["decision"], r["message"]) for r in resolved] == [("deny", "")] * 3
    # The model was told each edit was refused.
    tool_messages = [m for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 3
    assert all("the user denied this" in m["content"] for m in tool_messages)


def test_approve_auto_lets_the_same_edits_run(llm, tmp_path):
    after, records = run_exec(llm, tmp_path, "auto")
    assert after == {"written.txt": "new\n", "edited.py": "x = 2\n", "patched.txt": "BEE\n"}
    resolved = [r["decision"] for r in records if r["type"] == "approval_resolved"]
    assert resolved == ["approve"] * 3
