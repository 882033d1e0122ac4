"""Writes to paths that run programs or steer the app ask first in every mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codewhale.engine import events
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.permissions import Mode, ModeSwitch
from codewhale.protected_paths import protection
from codewhale.providers.types import ToolCall
from codewhale.tools.base import ToolContext
from codewhale.tools.edit import EditFile
from codewhale.tools.files import WriteFile
from codewhale.tools.patch import ApplyPatch
from codewhale.tools.registry import ToolRegistry


@pytest.mark.parametrize(
    "relative",
    [
        ".git/config",
        ".git/hooks/pre-commit",
        "vendor/lib/.git/config",
        ".GIT/config",
        ".codewhale/config.toml",
        ".codewhale/agents/explore.md",
        ".claude/settings.json",
        ".claude/agents/x.md",
        ".mcp.json",
        "sub/.mcp.json",
    ],
)
def test_protected_paths_name_why(tmp_path, relative):
    reason = protection(tmp_path, tmp_path.resolve() / relative)
    assert reason is not None
    assert reason.startswith(f"{relative} is protected: ")


@pytest.mark.parametrize(
    "relative",
    ["a.py", "src/git/config", ".github/workflows/ci.yml", "x.mcp.json", ".codewhale/handoff.md"],
)
def test_ordinary_paths_are_not_protected(tmp_path, relative):
    assert protection(tmp_path, tmp_path.resolve() / relative) is None


def test_protection_is_relative_to_the_agents_own_workspace(tmp_path):
    """A worktree child writes its tree freely; its parent writing there is asked."""
    repo = tmp_path.resolve()
    tree = repo / ".git" / "codewhale-worktrees" / "ab12cd34"
    assert protection(tree, tree / "src" / "a.py") is None
    assert protection(tree, tree / ".git") is not None  # the worktree's link to its repo
    assert protection(repo, tree / "src" / "a.py") is not None


class Run:
    """One dispatcher in `mode` whose approvals are answered with `answer`."""

    def __init__(self, workspace: Path, mode: Mode, answer: str = "deny") -> None:
        self.asked: list[events.ApprovalRequested] = []
        self.answer = answer
        context = ToolContext(workspace=workspace, session_id="s", modes=ModeSwitch(mode))
        tools = ToolRegistry([WriteFile(), EditFile(), ApplyPatch()])
        self.dispatcher = ToolDispatcher(tools, context, self._emit)

    def _emit(self, event: events.Event) -> None:
        if isinstance(event, events.ApprovalRequested):
            self.asked.append(event)
            event.resolve(self.answer)

    async def call(self, name: str, **arguments: str) -> tuple[bool, str]:
        [outcome] = await self.dispatcher.run([ToolCall("c1", name, json.dumps(arguments))])
        return outcome.result.ok, outcome.result.output


@pytest.fixture
def repo(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text("{}\n")
    return tmp_path


HOOKED = "[core]\n\thooksPath = evil\n"


@pytest.mark.parametrize("mode", [Mode.AGENT, Mode.YOLO])
async def test_a_protected_write_asks_in_every_mode_and_a_denial_writes_nothing(repo, mode):
    run = Run(repo, mode)
    ok, output = await run.call("write_file", path=".git/config", content=HOOKED)
    assert not ok and "denied" in output
    assert (repo / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    [request] = run.asked
    assert ".git/config is protected: git's own directory" in request.summary
    assert "hooksPath = evil" in request.preview  # the user sees the change they decide on


async def test_an_approved_protected_write_is_written(repo):
    run = Run(repo, Mode.YOLO, answer="approve")
    ok, _ = await run.call("write_file", path=".git/config", content=HOOKED)
    assert ok and (repo / ".git" / "config").read_text() == HOOKED


async def test_plan_mode_refuses_a_protected_write_without_asking(repo):
    run = Run(repo, Mode.PLAN)
    ok, output = await run.call("write_file", path=".mcp.json", content="{}")
    assert not ok and "Plan mode" in output
    assert run.asked == [] and not (repo / ".mcp.json").exists()


async def test_ordinary_writes_do_not_ask_in_yolo_mode(repo):
    """Agent mode asks for every file change (tests/unit/test_edit_review.py); YOLO only
    for protected paths."""
    run = Run(repo, Mode.YOLO)
    ok, _ = await run.call("write_file", path="src/a.py", content="x = 1\n")
    assert ok and run.asked == []


async def test_edit_and_patch_of_protected_paths_ask(repo):
    run = Run(repo, Mode.YOLO)
    ok, _ = await run.call(
        "edit_file", path=".claude/settings.json", old_string="{}", new_string='{"hooks": {}}'
    )
    assert not ok and (repo / ".claude" / "settings.json").read_text() == "{}\n"
    patch = "--- /dev/null\n+++ b/.mcp.json\n@@ -0,0 +1 @@\n+{}\n"
    ok, _ = await run.call("apply_patch", patch=patch)
    assert not ok and not (repo / ".mcp.json").exists()
    assert ".claude/settings.json is protected" in run.asked[0].summary
    assert ".mcp.json is protected" in run.asked[1].summary


async def test_a_symlink_to_a_protected_path_is_protected_too(repo):
    (repo / "innocent").symlink_to(repo / ".git")
    run = Run(repo, Mode.YOLO)
    ok, _ = await run.call("write_file", path="innocent/config", content=HOOKED)
    assert not ok and run.asked


async def test_always_for_one_protected_path_covers_no_other(repo):
    run = Run(repo, Mode.YOLO, answer="approve_always")
    assert (await run.call("write_file", path=".git/config", content=HOOKED))[0]
    assert (await run.call("write_file", path=".git/config", content=HOOKED + "#\n"))[0]
    assert len(run.asked) == 1  # the same file again: covered
    assert (await run.call("write_file", path=".git/hooks/post-checkout", content="#!/bin/sh\n"))[0]
    assert len(run.asked) == 2  # another protected file: asked again
