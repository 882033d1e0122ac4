"""Claude Code agent files, as users already have them, through `codewhale exec` and
`codewhale agents types`, against the loopback LLM."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task

# The project's file, in the shape Claude Code's /agents command writes: <example>
# dialogue inside an unquoted description, capitalised tools, an MCP tool, an alias.
SECURITY_AUDITOR = """---
name: security-auditor
description: Use this agent when code touches authentication, secrets or user input. Examples:

<example>
Context: The user has just written a login handler.
user: "Can you check my login code for problems?"
assistant: "I'll use the security-auditor agent to review it."
<commentary>Authentication code deserves a security review.</commentary>
</example>
tools: Read, Grep, Glob, LS, WebFetch, WebSearch, mcp__context7__get-library-docs
model: sonnet
color: orange
---
You are a security auditor. Find injection, secret leaks and broken access checks.
"""

# The user's file (~/.claude/agents), in YAML-list style with other Claude names.
TEST_RUNNER = """---
name: test-runner
description: "Runs the test suite and fixes what fails. Use proactively after code changes."
tools:
  - Bash
  - Read
  - Edit
  - MultiEdit
  - TodoWrite
  - Task
model: haiku
color: cyan
---
You run the tests, read the failures and fix them with the smallest change.
"""

MUTE = """---
name: thinker
description: Answers from what it is told; touches nothing.
tools: []
model: inherit
---
Think it through and answer.
"""


def setup(llm, tmp_path):
    workspace, home, claude = tmp_path / "repo", tmp_path / "home", tmp_path / "claude"
    (workspace / ".claude" / "agents").mkdir(parents=True)
    (workspace / ".claude" / "agents" / "security-auditor.md").write_text(SECURITY_AUDITOR)
    (workspace / ".claude" / "agents" / "thinker.md").write_text(MUTE)
    (workspace / ".claude" / "agents" / "broken.md").write_text("---\nname: Broken One\n---\n")
    (claude / "agents").mkdir(parents=True)
    (claude / "agents" / "test-runner.md").write_text(TEST_RUNNER)
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text('[subagents]\nworker_model = "worker-model-x"\n')
    env = app_environment(
        CODEWHALE_HOME=str(home),
        CLAUDE_CONFIG_DIR=str(claude),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    return workspace, env


def child_request(llm, task: str):
    return next(r.json for r in llm.requests if for_task(task)(r.json))


def test_claude_code_agents_load_and_run_through_exec(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    for task in ("audit login", "run the tests", "ponder"):
        llm.route(for_task(task), Reply(text=REPORT))
    opens = [
        ToolCallSpec("agent_open", {"prompt": "audit login", "type": "security-auditor"}),
        ToolCallSpec("agent_open", {"prompt": "run the tests", "subagent_type": "test-runner"}),
        ToolCallSpec("agent_open", {"prompt": "ponder", "type": "thinker"}),
        ToolCallSpec("agent_types", {"name": "security-auditor"}),
    ]
    llm.enqueue(Reply(tool_calls=opens))
    llm.respond = lambda body: Reply(text="all three reported")
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "delegate"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr

    parent = llm.requests[0].json
    tools = {tool["function"]["name"]: tool["function"] for tool in parent["tools"]}
    routing = tools["agent_open"]["description"]
    assert "- security-auditor: Use this agent when code touches authentication, secrets or" in (
        routing
    )
    assert "- test-runner: Runs the test suite and fixes what fails." in routing
    assert "<example>" not in routing and "agent_types" in tools
    # The full description, examples and all, is one agent_types call away.
    messages = [m for r in llm.requests for m in r.json["messages"]]
    shown = json.loads(next(m["content"] for m in messages if m.get("tool_call_id") == "call_3"))
    assert "<example>" in shown["description"] and shown["model"] == "worker-model-x"

    auditor = child_request(llm, "audit login")
    assert auditor["model"] == "worker-model-x"  # 'sonnet' means the configured model
    assert {t["function"]["name"] for t in auditor["tools"]} == {
        "read_file",
        "grep_files",
        "file_search",
        "list_dir",
        "fetch_url",
    }
    assert "You are a security auditor." in auditor["messages"][0]["content"]

    runner = child_request(llm, "run the tests")
    assert runner["model"] == "worker-model-x"
    # Task maps to the agent tools, which a leaf child (max_depth 0) does not have.
    assert {t["function"]["name"] for t in runner["tools"]} == {
        "exec_shell",
        "read_file",
        "edit_file",
        "checklist_write",
    }

    thinker = child_request(llm, "ponder")
    assert "tools" not in thinker or thinker["tools"] == []

    # One summary line; each problem is listed by `codewhale agents types` (next test).
    warnings = [line for line in result.stderr.splitlines() if "agent definition" in line]
    assert len(warnings) == 1 and "1 failed to load" in warnings[0]
    assert warnings[0].endswith("see `codewhale agents types`")


def test_agents_types_lists_every_type_with_what_it_resolves_to(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    listed = subprocess.run(
        [sys.executable, "-m", "codewhale", "agents", "types", "-C", str(workspace), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert listed.returncode == 0, listed.stderr
    types = {entry["name"]: entry for entry in json.loads(listed.stdout)["types"]}
    auditor = types["security-auditor"]
    assert auditor["source"] == str(workspace / ".claude" / "agents" / "security-auditor.md")
    assert auditor["base_role"] == "general" and auditor["model"] == "worker-model-x"
    # In the order the tools are offered.
    assert auditor["tools"] == ["read_file", "list_dir", "file_search", "grep_files", "fetch_url"]
    assert auditor["color"] == "dark_orange" and auditor["error"] is None
    assert any(
        "dropped: WebSearch, mcp__context7__get-library-docs" in warning
        for warning in auditor["warnings"]
    )
    assert types["test-runner"]["source"].endswith("claude/agents/test-runner.md")
    assert types["thinker"]["tools"] == []
    assert types["code-reviewer"]["source"] == "built-in"
    assert types["general"]["model"] == "worker-model-x" and types["explore"]["model"] is None
    assert (
        types["broken"]["error"]
        == "line 2: 'name' is required: lower-case letters, digits, '-', '.' or '_'"
    )
    for entry in types.values():
        assert set(entry) >= {"name", "source", "base_role", "model", "tools", "warnings", "error"}

    text = subprocess.run(
        [sys.executable, "-m", "codewhale", "agents", "types", "-C", str(workspace)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert text.returncode == 0
    assert "security-auditor  (" in text.stdout
    assert "  base role: general · model: worker-model-x · tools: read_file" in text.stdout
