"""What a real `codewhale exec` writes about the conversation is its user's alone: after a
run with a child, an MCP server and a memory note, under umask 022, every file in the
app's data and state folders and in the workspace's .codewhale/ is 0600 and every
folder 0700, folders an older version left 0755 included."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.mcp import demo_server, setup_home
from tests.support.subagents import REPORT, for_task


def wrong_modes(root: Path) -> list[str]:
    """Every folder not 0700 and file not 0600 at or below `root`, with its mode."""
    wrong = []
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        expected = 0o700 if path.is_dir() else 0o600
        if mode != expected:
            wrong.append(f"{path.relative_to(root.parent)} {mode:o}")
    return wrong


def test_conversation_files_are_0600_in_0700_folders(llm, tmp_path):
    config = demo_server() + "[memory]\nenabled = true\n"
    workspace, home, env = setup_home(tmp_path, config, llm)
    (workspace / "a.py").write_text("print('a')\n")
    # Left wide by an older version: tightened when the app opens them. (A .codewhale/
    # the user made is theirs, with their config and agents: only what is in it is ours.)
    (home / "state").mkdir(mode=0o755)
    (workspace / ".codewhale").mkdir(mode=0o700)
    (workspace / ".codewhale" / "state").mkdir(mode=0o755)
    llm.route(
        for_task("look"),
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "a.py"})]),
        Reply(text=REPORT),
    )
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("mcp__demo__echo", {"text": "hello"}),
                ToolCallSpec("remember", {"note": "the user likes tests"}),
                ToolCallSpec("agent_open", {"prompt": "look", "type": "general"}),
            ]
        ),
        Reply(text="waiting for the child"),
        Reply(text="done"),
    )
    command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace)]
    done = subprocess.run(
        [*command, "--approve", "auto", "go"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
        umask=0o022,
    )
    assert done.returncode == 0, done.stderr
    state = workspace / ".codewhale" / "state"
    written = [
        *(home / "data" / "sessions").glob("*.jsonl"),
        home / "data" / "memory.md",
        home / "state" / "mcp" / "demo.log",
        state / "subagents.v1.json",
        *(state / "subagent-transcripts").glob("*.jsonl"),
    ]
    assert len(written) == 5 and all(path.is_file() for path in written)
    roots = [home / "data", home / "state", workspace / ".codewhale"]
    assert [line for root in roots for line in wrong_modes(root)] == []
