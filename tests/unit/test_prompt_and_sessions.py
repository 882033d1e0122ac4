"""The system prompt's ingredients and the sessions listing."""

from __future__ import annotations

import subprocess
import sys

from codewhale.engine.prompt import build_system_prompt
from codewhale.permissions import Mode
from codewhale.sessions.store import SessionStore


def test_prompt_includes_agents_md_from_repo_root_down_memory_and_mode(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Use tabs.")
    workspace = repo / "service"
    workspace.mkdir()
    (workspace / "AGENTS.md").write_text("Run make check.")
    (tmp_path / "AGENTS.md").write_text("outside the repo: ignored")
    memory = tmp_path / "memory.md"
    memory.write_text("- (2026-01-01 10:00 UTC) prefers short answers\n")
    prompt = build_system_prompt(workspace, Mode.PLAN, memory_file=memory, today="2026-11-22")
    assert prompt.index("Use tabs.") < prompt.index("Run make check.")
    assert "outside the repo" not in prompt
    assert "prefers short answers" in prompt
    assert "Plan mode: read-only" in prompt
    assert f"Workspace: {workspace.resolve()}" in prompt
    assert "Date: 2026-11-22" in prompt


def test_a_model_without_tools_is_told_so_and_gets_no_tool_instructions(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Use tabs.")
    prompt = build_system_prompt(tmp_path, Mode.AGENT, today="2026-11-22", tools=False)
    assert "no network and no tools" in prompt and "Today is 2026-11-22." in prompt
    assert "Use tabs." not in prompt and "Agent mode" not in prompt and "edit_file" not in prompt
    assert len(prompt) < 800


def test_sessions_list_shows_this_workspace_newest_first(tmp_path, isolated_home):
    store = SessionStore(isolated_home / "data")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    first, writer = store.create(workspace, "deepseek-v4-pro")
    writer.record_messages([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
    writer.close()
    other, writer = store.create(tmp_path, "m")
    writer.close()
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "-C", str(workspace), "sessions", "list"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0
    assert first.id in result.stdout and "hi" in result.stdout
    assert other.id not in result.stdout
