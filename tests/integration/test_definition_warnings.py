"""A real collection's problems, told briefly: real `codewhale exec` and `codewhale agents`
processes against the loopback model, with broken and warned agent files on disk."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment

BROKEN = 30
WARNED = 5


def agent_file(name: str, description: str = "Helps.", color: str = "") -> str:
    fields = [f"name: {name}"]
    fields += [f"description: {description}"] if description else []
    fields += [f"color: {color}"] if color else []
    return "---\n" + "\n".join(fields) + "\n---\nYou help.\n"


def setup(llm, tmp_path):
    workspace = tmp_path / "repo"
    agents = workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    for index in range(BROKEN):  # no description: each fails to parse
        (agents / f"broken-{index}.md").write_text(agent_file(f"broken-{index}", description=""))
    for index in range(WARNED):  # an unknown colour: loaded, with a warning
        (agents / f"helper-{index}.md").write_text(agent_file(f"helper-{index}", color="plaid"))
    (agents / "reviewer-bot.md").write_text(agent_file("reviewer-bot"))
    # An instruction file whose import is missing: its warning takes the same way out.
    (workspace / "AGENTS.md").write_text("Follow @docs/missing.md.\n")
    env = app_environment(
        HOME=str(tmp_path / "home"),
        CODEWHALE_HOME=str(tmp_path / "cw"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    return workspace, env


def codewhale(env, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codewhale", *arguments],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def test_exec_prints_one_summary_line_and_a_broken_type_says_why(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "x", "type": "broken-7"}),
                ToolCallSpec("agent_open", {"prompt": "x", "type": "helper"}),
            ]
        ),
        Reply(text="done"),
    )
    result = codewhale(env, "exec", "-C", str(workspace), "delegate")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: AGENTS.md imports @docs/missing.md, which is not a file; left as written",
        f"warning: {WARNED} agent definitions have warnings and {BROKEN} failed to load: "
        "see `codewhale agents types`",
    ]
    broken, unknown = [
        m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"
    ]
    source = workspace / ".claude" / "agents" / "broken-7.md"
    assert f"Agent type 'broken-7' is defined in {source}, but that file failed to parse" in broken
    assert "'description' is required" in broken
    assert "broken-1" not in broken and "reviewer-bot" not in broken
    close = unknown.split("the closest definitions: ", 1)[1].split(" (", 1)[0]
    assert sorted(close.split(", ")) == [f"helper-{index}" for index in range(WARNED)]
    assert "(10 definitions in all: agent_types lists them)" in unknown
    assert "reviewer-bot" not in unknown and "broken-" not in unknown


def test_agents_types_keeps_the_full_list_and_names_one_type(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    listed = codewhale(env, "agents", "types", "--json", "-C", str(workspace))
    assert listed.returncode == 0, listed.stderr
    types = json.loads(listed.stdout)["types"]
    assert sum(1 for entry in types if entry["error"]) == BROKEN
    assert sum(1 for entry in types if entry["warnings"]) == WARNED

    one = codewhale(env, "agents", "types", "broken-3", "-C", str(workspace))
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith(f"broken-3  ({workspace / '.claude' / 'agents' / 'broken-3.md'})")
    assert "error: line" in one.stdout and "'description' is required" in one.stdout
    assert "broken-4" not in one.stdout

    missing = codewhale(env, "agents", "types", "revewer-bot", "-C", str(workspace))
    assert missing.returncode == 1
    assert "the closest definitions: reviewer-bot" in missing.stderr
