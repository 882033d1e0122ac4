"""The app's own git never runs repository code and never hands it the key.

A repository armed as the measured attack armed it (core.hooksPath at committed hooks,
clean/smudge filters, a textconv, an external diff and a merge driver for `*.md`, an
fsmonitor), or as a husky user sets it up: every place the app runs git (the file
listing, the claim check, the branch in the prompt, a worktree's creation, summary,
apply and removal), then a real `codewhale exec --approve auto` whose model uses them
all (its only approvals are the child's edit and the apply), leave no witness.
Unsandboxed the overrides alone must hold; sandboxed the same calls must still work
(the repository under /tmp, hidden by the sandbox's own /tmp).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codewhale import gitrun
from codewhale.engine.prompt import git_branch
from codewhale.sandbox import sandbox_status
from codewhale.subagents import worktree
from codewhale.subagents.contract import verify_claims
from codewhale.subagents.store import SubagentStore
from codewhale.tools.walk import git_files
from tests.support.hostile_git import NOTES, hostile_repo, traces
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task

SANDBOX = sandbox_status()
KEY = "sk-app-git-canary-7d41c0"
NEEDS_SANDBOX = (
    pytest.mark.sandbox,
    pytest.mark.skipif(not SANDBOX.available, reason=f"no sandbox here: {SANDBOX.reason}"),
)
CHANGED_NOTES = REPORT.replace("CHANGES: None.", "CHANGES:\n- notes.md")


def last_tool_result(body) -> str:
    messages = body["messages"]
    return next(m["content"] for m in reversed(messages) if m["role"] == "tool")


@pytest.fixture(params=[False, pytest.param(True, marks=NEEDS_SANDBOX)], ids=["bare", "sandboxed"])
def sandboxed(request):
    """The app's git with the sandbox off (the overrides alone) or on."""
    gitrun.follow_sandbox_setting(request.param)
    yield request.param
    gitrun.follow_sandbox_setting("auto")


@pytest.mark.parametrize("husky", [False, True], ids=["attack", "husky"])
def test_every_entry_point_runs_no_repository_code(tmp_path, monkeypatch, sandboxed, husky):
    monkeypatch.setenv("CODEWHALE_API_KEY", KEY)
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    witness = tmp_path / "witness"
    repo = hostile_repo(tmp_path / "repo", witness, husky=husky)
    (repo / "notes.md").write_text(NOTES + "the parent's line\n")

    assert git_files(repo) is not None and "notes.md" in (git_files(repo) or ())
    assert git_branch(repo) == "main"
    claimed = verify_claims(repo, {"changes": "- notes.md"})
    assert claimed == {"status": "self_report_only", "git_checked": True}

    prepared = worktree.create(repo)
    tree = worktree.name_branch(prepared.tree, "Moby")
    child_notes = prepared.workspace / "notes.md"
    # Checked out without a smudge filter: the parent's state, byte for byte.
    assert child_notes.read_text() == NOTES + "the parent's line\n"
    child_notes.write_text(NOTES + "the parent's line\nthe child's line\n")
    assert [change.path for change in worktree.summarize(tree).files] == ["notes.md"]
    assert verify_claims(prepared.workspace, {"changes": "- notes.md"})["git_checked"]
    assert worktree.apply(tree).applied
    assert (repo / "notes.md").read_text().endswith("the child's line\n")

    # A 3-way merge of notes.md would go to the repository's merge driver: it gets none,
    # and the clash is reported as a conflict.
    clashing = worktree.create(repo)
    other = worktree.name_branch(clashing.tree, "Ahab")
    (clashing.workspace / "notes.md").write_text("# Rewritten by the child\n")
    (repo / "notes.md").write_text("# Rewritten by the parent\n")
    outcome = worktree.apply(other)
    assert not outcome.applied and outcome.conflicts == ("notes.md",)
    assert (repo / "notes.md").read_text() == "# Rewritten by the parent\n"

    worktree.remove(tree)
    worktree.remove(other)
    assert not Path(tree.path).exists() and not Path(other.path).exists()
    assert traces(witness, repo) == []


@pytest.mark.parametrize("husky", [False, True], ids=["attack", "husky"])
def test_codewhale_exec_runs_no_repository_code_and_leaks_no_key(llm, tmp_path, husky):
    witness = tmp_path / "witness"
    repo = hostile_repo(tmp_path / "repo", witness, husky=husky)
    edit = {"path": "notes.md", "old_string": "first line", "new_string": "the child's line"}
    llm.route(
        for_task("edit the notes"),
        Reply(tool_calls=[ToolCallSpec("edit_file", edit)]),
        Reply(text=CHANGED_NOTES),
    )
    # The explore child lists files (git's listing) and claims notes.md changed (the
    # claim check's git status).
    llm.route(
        for_task("look around"),
        Reply(tool_calls=[ToolCallSpec("file_search", {"query": "notes"})]),
        Reply(text=CHANGED_NOTES),
    )
    seen: dict[str, object] = {}

    def parent(body) -> Reply:
        if "opened" not in seen:
            seen["opened"] = True
            implementer = {
                "prompt": "edit the notes",
                "name": "scribe",
                "type": "implementer",
                "isolation": "worktree",
            }
            explorer = {"prompt": "look around", "name": "scout", "type": "explore"}
            return Reply(
                tool_calls=[
                    ToolCallSpec("agent_open", implementer),
                    ToolCallSpec("agent_open", explorer),
                ]
            )
        finished = [
            m for m in body["messages"] if 'kind="subagent_completion"' in str(m["content"])
        ]
        if "applied" not in seen and len(finished) == 2:
            seen["applied"] = True
            return Reply(tool_calls=[ToolCallSpec("agent_apply", {"name": "scribe"})])
        if "applied" in seen and "result" not in seen:
            seen["result"] = json.loads(last_tool_result(body))
            return Reply(text="applied")
        return Reply(text="waiting for the children")

    llm.respond = parent
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
        CODEWHALE_BASE_URL=llm.base_url,
        CODEWHALE_API_KEY=TEST_KEY,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    done = subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(repo), "--approve", "auto", "go"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr

    # Everything the app's git was asked to do happened.
    result = seen["result"]
    assert isinstance(result, dict) and result["applied"] is True
    assert (repo / "notes.md").read_text() == NOTES.replace("first line", "the child's line")
    searched = [r.json for r in llm.requests if for_task("look around")(r.json)][-1]
    assert "notes.md" in searched["messages"][-1]["content"]
    # Both claims were checked with git status: true in the worktree, not yet in the parent's.
    checked = {r.name: r.verification for r in SubagentStore(repo).load()}
    assert checked["scribe"] == {"status": "self_report_only", "git_checked": True}
    assert checked["scout"]["not_in_git_status"] == ["notes.md"]
    # And no script ran: no witness anywhere, and no file anywhere holds the key.
    assert traces(witness, repo) == []
    holding_key = [
        str(path)
        for path in tmp_path.rglob("*")
        if path.is_file() and not path.is_symlink() and TEST_KEY.encode() in path.read_bytes()
    ]
    assert holding_key == []
