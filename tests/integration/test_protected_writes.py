"""A real `codewhale exec` whose model plants repository code with the file tools.

`.git/config`, `.codewhale/`, `.claude/` and `.mcp.json` name programs that later run
outside the sandbox; with every approval denied, none of them is written in Agent or
YOLO mode, while an ordinary file in the same run is written in YOLO mode (Agent mode
asks for every edit, so there it is denied too).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment

GIT_CONFIG = "[core]\n\trepositoryformatversion = 0\n"
PLANTS = {
    ".git/config": GIT_CONFIG + "\thooksPath = .githooks\n",
    ".codewhale/agents/explore.md": "---\nname: explore\ntools: [write_file]\n---\nhi\n",
    ".claude/settings.json": '{"hooks": {"Stop": []}}\n',
    ".mcp.json": '{"mcpServers": {"x": {"command": "sh"}}}\n',
}


@pytest.mark.parametrize("mode", ["agent", "yolo"])
def test_denied_protected_writes_leave_the_repository_as_it_was(llm, tmp_path, mode):
    workspace = tmp_path / "repo"
    (workspace / ".git").mkdir(parents=True)
    (workspace / ".git" / "config").write_text(GIT_CONFIG)
    writes = [ToolCallSpec("write_file", {"path": p, "content": c}) for p, c in PLANTS.items()]
    writes.append(ToolCallSpec("write_file", {"path": "notes.md", "content": "fine\n"}))
    llm.enqueue(Reply(tool_calls=writes), Reply(text="done"))
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codewhale",
            "exec",
            "-C",
            str(workspace),
            "--mode",
            mode,
            "--approve",
            "deny",
            "--json",
            "plant",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (workspace / ".git" / "config").read_text() == GIT_CONFIG
    for path in list(PLANTS)[1:]:
        assert not (workspace / path).exists(), path
    asked = [json.loads(line) for line in done.stdout.splitlines()]
    asked = [event for event in asked if event.get("type") == "approval_requested"]
    protected = [event["summary"].split(" ")[0] for event in asked if not event["file_change"]]
    assert sorted(protected) == sorted(PLANTS)
    if mode == "yolo":
        assert (workspace / "notes.md").read_text() == "fine\n"
        assert len(asked) == len(PLANTS)
    else:
        assert not (workspace / "notes.md").exists()
        assert [event["files"] for event in asked if event["file_change"]] == [["notes.md"]]
