"""A real `codewhale exec` under the rules a project keeps in Claude Code's settings.json.

`deny: ["Bash(rm:*)"]` stops `rm` in YOLO mode, in the parent and in a child;
`deny: ["Read(./secrets/**)"]` keeps a secret out of every read path (read_file,
grep_files, file_search, rlm_open) and so out of every request the model gets; an
`allow: ["Bash(echo:*)"]` in the user's Claude settings runs echo unasked under
`--approve deny`, while the same rule in a project file is not applied.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task, last_tool_results

SECRET = "TOPSECRET-4f2a9c"
PROJECT_RULES = {
    "permissions": {"deny": ["Bash(rm:*)", "Read(./secrets/**)"], "allow": ["Bash(ls:*)"]},
    # Ignored: a project file never raises the mode, and other keys are not ours.
    "defaultMode": "bypassPermissions",
    "model": "opus",
}


def make_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "repo"
    (workspace / "secrets").mkdir(parents=True)
    (workspace / "secrets" / "key.txt").write_text(f"api = {SECRET}\n")
    (workspace / "public").mkdir()
    (workspace / "public" / "key.txt").write_text("api = PUBLIC-VALUE\n")
    (workspace / "doomed.txt").write_text("keep me\n")
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(PROJECT_RULES))
    return workspace


def run_exec(
    llm, tmp_path: Path, workspace: Path, *, mode: str, user_rules: dict | None = None
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    # Unsandboxed, so an `rm` that got through would really delete the file.
    (home / "config" / "config.toml").write_text("[sandbox]\nenabled = false\n")
    claude = tmp_path / "claude-user"
    claude.mkdir()
    if user_rules is not None:
        (claude / "settings.json").write_text(json.dumps(user_rules))
    env = app_environment(
        CODEWHALE_HOME=str(home),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
        CLAUDE_CONFIG_DIR=str(claude),
    )
    command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "--json"]
    done = subprocess.run(
        [*command, "--mode", mode, "--approve", "deny", "go"],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    return done, [json.loads(line) for line in done.stdout.splitlines()]


def tool_results(llm) -> list[str]:
    return [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]


def test_a_project_deny_stops_rm_in_yolo_mode_in_the_parent_and_in_a_child(llm, tmp_path):
    workspace = make_workspace(tmp_path)
    llm.route(
        for_task("wipe"),
        Reply(
            tool_calls=[
                ToolCallSpec("exec_shell", {"command": "rm -f doomed.txt"}),
                ToolCallSpec("read_file", {"path": "secrets/key.txt"}),
            ]
        ),
        Reply(text=REPORT),
    )
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("exec_shell", {"command": "rm -f doomed.txt"}),
                ToolCallSpec("exec_shell", {"command": "echo ok && /bin/rm doomed.txt"}),
                ToolCallSpec("exec_shell", {"command": "echo still-runs"}),
            ]
        ),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "wipe", "type": "general"})]),
        Reply(text="waiting for the child"),
        Reply(text="done"),
    )
    _, records = run_exec(llm, tmp_path, workspace, mode="yolo")
    assert (workspace / "doomed.txt").read_text() == "keep me\n"
    parent = tool_results(llm)
    refusal = "Error: exec_shell is denied by the permission rule 'Bash(rm:*)' in "
    assert parent[0].startswith(refusal) and parent[1].startswith(refusal)
    assert str(workspace / ".claude" / "settings.json") in parent[0]
    assert "still-runs" in parent[2]  # YOLO itself is untouched
    # The child shares the parent's rules.
    child = last_tool_results(llm, "wipe")
    assert child[0].startswith(refusal)
    assert child[1].startswith("Error: read_file is denied by the permission rule 'Read(")
    assert not any(SECRET.encode() in request.raw_body for request in llm.requests)
    # YOLO asked nothing: the rules refuse, they do not ask.
    assert not [r for r in records if r["type"] == "approval_requested"]


def test_a_denied_read_is_refused_by_every_read_path(llm, tmp_path):
    workspace = make_workspace(tmp_path)
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("read_file", {"path": "secrets/key.txt"}),
                ToolCallSpec("grep_files", {"pattern": "api ="}),
                ToolCallSpec("grep_files", {"pattern": "api", "path": "secrets"}),
                ToolCallSpec("file_search", {"query": "key"}),
                ToolCallSpec("rlm_open", {"file_path": "secrets/key.txt", "name": "s"}),
                ToolCallSpec("list_dir", {"path": "secrets"}),
                ToolCallSpec("read_file", {"path": "public/key.txt"}),
            ]
        ),
        Reply(text="done"),
    )
    run_exec(llm, tmp_path, workspace, mode="agent")
    read, grep_all, grep_dir, search, rlm, listing, public = tool_results(llm)
    assert read.startswith("Error: read_file is denied by the permission rule 'Read(./secrets/**)'")
    assert "public/key.txt" in grep_all and "PUBLIC-VALUE" in grep_all
    assert "secrets" not in grep_all
    assert grep_dir.startswith("Error: grep_files is denied")
    assert "public/key.txt" in search and "secrets/key.txt" not in search
    assert rlm.startswith("Error: rlm_open is denied")
    assert listing.startswith("Error: list_dir is denied")
    assert "PUBLIC-VALUE" in public
    # The secret reached no request the model got.
    assert not any(SECRET.encode() in request.raw_body for request in llm.requests)


def test_a_user_allow_runs_echo_unasked_under_approve_deny(llm, tmp_path):
    workspace = make_workspace(tmp_path)
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("exec_shell", {"command": "echo allowed-by-rule"}),
                ToolCallSpec("exec_shell", {"command": "ls public"}),
                ToolCallSpec("exec_shell", {"command": "echo x && touch made.txt"}),
            ]
        ),
        Reply(text="done"),
    )
    user_rules = {"permissions": {"allow": ["Bash(echo:*)"]}}
    done, records = run_exec(llm, tmp_path, workspace, mode="agent", user_rules=user_rules)
    echo, ls, chained = tool_results(llm)
    assert "allowed-by-rule" in echo
    # The project's own `Bash(ls:*)` allow is not applied: asked, and --approve deny said no.
    assert ls.startswith("Error: the user denied this exec_shell call")
    assert chained.startswith("Error: the user denied")  # `touch` is not covered
    assert not (workspace / "made.txt").exists()
    asked = [r["summary"] for r in records if r["type"] == "approval_requested"]
    assert asked == ["ls public", "echo x && touch made.txt"]
    assert "allow rule(s) in this project's files are not applied (Bash(ls:*))" in done.stderr
