"""Skills through a real `codewhale exec` against the loopback model (issue 30): listed to
the model, loaded by the `skill` tool, preloaded by an agent file's `skills:`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.mcp import offered
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task

CHANGELOG = """---
name: changelog
description: Write the CHANGELOG entry for a change. Use before every release.
allowed-tools: Read, Edit
---

# Writing a changelog entry

Put the entry under "Unreleased", newest first, one line per change: WHALE-7.
"""

WRITER = """---
name: release-writer
description: Prepares release notes.
tools: Read, Grep
skills: [changelog]
---
You prepare releases.
"""


@pytest.fixture
def project(tmp_path) -> tuple[Path, dict[str, str]]:
    workspace = tmp_path / "repo"
    (workspace / ".claude" / "skills" / "changelog").mkdir(parents=True)
    (workspace / ".claude" / "skills" / "changelog" / "SKILL.md").write_text(CHANGELOG)
    (workspace / ".claude" / "skills" / "changelog" / "template.md").write_text("## x.y.z")
    (workspace / ".claude" / "agents").mkdir(parents=True)
    (workspace / ".claude" / "agents" / "release-writer.md").write_text(WRITER)
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    return workspace, env


def codewhale(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codewhale", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )


def test_the_model_sees_the_skill_and_loads_it_with_the_skill_tool(llm, project):
    workspace, env = project
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("skill", {"name": "changelog"})]),
        Reply(tool_calls=[ToolCallSpec("skill", {"name": "changelog", "file": "template.md"})]),
        Reply(text="done"),
    )
    result = codewhale(
        {**env, "CODEWHALE_BASE_URL": llm.base_url}, "exec", "-C", str(workspace), "release"
    )
    assert result.returncode == 0, result.stderr
    description = offered(llm.requests[0].json)["skill"]["description"]
    assert "- changelog: Write the CHANGELOG entry for a change." in description
    results = [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    assert "one line per change: WHALE-7" in results[0] and "- template.md" in results[0]
    assert results[1] == "## x.y.z"


def test_an_agent_file_preloads_its_skills_into_the_childs_prompt(llm, project):
    workspace, env = project
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "notes for 2.0", "type": "release-writer"})
            ]
        ),
        Reply(text="waiting"),
    )
    llm.route(for_task("notes for 2.0"), Reply(text=REPORT))
    llm.respond = lambda body: Reply(text="done")
    result = codewhale(
        {**env, "CODEWHALE_BASE_URL": llm.base_url},
        "exec",
        "-C",
        str(workspace),
        "--approve",
        "auto",
        "release",
    )
    assert result.returncode == 0, result.stderr
    child = next(r.json for r in llm.requests if for_task("notes for 2.0")(r.json))
    system = child["messages"][0]["content"]
    assert "# Skill: changelog" in system and "one line per change: WHALE-7" in system


def test_skills_list_names_each_skill_and_who_may_run_it(project):
    workspace, env = project
    listed = codewhale(env, "skills", "list", "--json", "-C", str(workspace))
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)["skills"]
    assert entry["name"] == "changelog" and entry["allowed_tools"] == ["Read", "Edit"]
    assert entry["model_invocable"] and entry["user_invocable"]
