"""The system prompt's ingredients and the sessions listing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from codewhale.engine.prompt import build_system_prompt
from codewhale.permissions import Mode
from codewhale.sessions.store import SessionError, SessionStore


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


def test_a_loaded_session_is_titled_as_listed_by_its_prompt_after_the_last_clear(tmp_path):
    store = SessionStore(tmp_path / "data")
    workspace = tmp_path / "ws"
    info, writer = store.create(workspace, "m")
    system = {"role": "system", "content": "s"}
    writer.record_messages([system, {"role": "user", "content": "before the clear"}])
    writer.record_clear()
    writer.record_messages([system, {"role": "user", "content": "after the clear " * 10}])
    writer.record_messages([system, {"role": "user", "content": "after"}, {"role": "user"}])
    writer.close()
    elsewhere, writer = store.create(tmp_path, "m")
    writer.record_messages([system, {"role": "user", "content": "another workspace"}])
    writer.close()
    (listed,) = store.list(workspace)
    loaded = store.load(info.id)
    assert loaded.info == listed == store.info(info.id) == store.latest(workspace)
    assert listed.title == ("after the clear " * 10)[:80]
    assert store.latest(tmp_path) == store.load(elsewhere.id).info
    assert {i.id for i in store.list()} == {info.id, elsewhere.id}


def test_a_file_without_a_session_header_is_refused(tmp_path):
    store = SessionStore(tmp_path / "data")
    store.root.mkdir(parents=True)
    (store.root / "sess_x.jsonl").write_text('{"kind": "message", "message": {}}\n')
    for read in (store.info, store.load):
        with pytest.raises(SessionError, match="not a CodeWhale session file"):
            read("sess_x")
    with pytest.raises(SessionError, match="no session 'sess_y'"):
        store.load("sess_y")
    assert store.list() == []
