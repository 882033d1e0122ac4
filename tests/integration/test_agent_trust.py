"""A repository's agent files change nothing built-in until the user trusts them: real
`codewhale exec` and `codewhale agents` processes against the loopback model."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task, last_tool_results
from tests.support.terminal import run_with_typed_answer

# A cloned repository's "explore" that may write and run shell.
WRITER_EXPLORE = """---
name: explore
description: Explores the code base.
tools: Read, Write, Bash
---
You are the project's explorer. Write what you find to files.
"""

SCOUT = """---
name: scout
description: Looks around on a model of its own.
base_role: explore
model: big-model
---
You scout.
"""


def setup(llm, tmp_path):
    workspace, home = tmp_path / "repo", tmp_path / "home"
    agents = workspace / ".codewhale" / "agents"
    agents.mkdir(parents=True)
    (agents / "explore.md").write_text(WRITER_EXPLORE)
    (agents / "scout.md").write_text(SCOUT)
    env = app_environment(
        CODEWHALE_HOME=str(home),
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


def open_child(llm, env, workspace, task: str, type_name: str) -> subprocess.CompletedProcess[str]:
    """One exec run whose parent opens a `type_name` child on `task`; the child tries to
    write `<task>.txt` and then reports."""
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": task, "type": type_name})]))
    # Edits ask in Agent mode: approved, so only the trust decides whether the write happens.
    result = codewhale(env, "exec", "-C", str(workspace), "--approve", "auto", f"delegate {task}")
    assert result.returncode == 0, result.stderr
    return result


def child_requests(llm, task: str):
    return [r.json for r in llm.requests if for_task(task)(r.json)]


def is_child(body) -> bool:
    """A fresh child's second message is its assignment; the parent's is the user's prompt."""
    messages = body["messages"]
    return len(messages) > 1 and str(messages[1].get("content")).startswith("Assignment")


def script_children(llm) -> None:
    """Each child tries one write, then reports whatever came of it."""

    def child(body):
        if body["messages"][-1]["role"] == "tool":
            return Reply(text=REPORT)
        task = body["messages"][-1]["content"].rsplit("Task:\n", 1)[-1]
        return Reply(
            tool_calls=[ToolCallSpec("write_file", {"path": f"{task}.txt", "content": "x"})]
        )

    llm.route(is_child, respond=child)
    llm.respond = lambda body: Reply(text="reported")


def test_a_project_explore_replaces_the_builtin_only_once_trusted(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    script_children(llm)

    before = open_child(llm, env, workspace, "probe-one", "explore")
    assert not (workspace / "probe-one.txt").exists()
    results = last_tool_results(llm, "probe-one")
    assert any("write_file is not available to the explore role (read-only)" in r for r in results)
    first = child_requests(llm, "probe-one")[0]
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert "write_file" not in offered and "exec_shell" in offered  # read-only shell
    assert "You are the project's explorer." not in first["messages"][0]["content"]
    # One warning line per held definition (scout is held for its model).
    held = [line for line in before.stderr.splitlines() if "not trusted" in line]
    assert len(held) == 2 and "agent 'explore'" in held[0] and "agent 'scout'" in held[1]
    assert "it shadows the built-in explore role" in held[0]
    assert "`codewhale agents trust explore`" in held[0]

    trusted = codewhale(env, "agents", "trust", "explore", "-C", str(workspace))
    assert trusted.returncode == 0, trusted.stderr
    assert "Trusted explore" in trusted.stdout

    after = open_child(llm, env, workspace, "probe-two", "explore")
    assert (workspace / "probe-two.txt").read_text() == "x"
    first = child_requests(llm, "probe-two")[0]
    assert "You are the project's explorer." in first["messages"][0]["content"]
    assert {"write_file", "exec_shell"} <= {tool["function"]["name"] for tool in first["tools"]}
    assert not any(
        "'explore'" in line and "not trusted" in line for line in after.stderr.splitlines()
    )


def test_a_project_model_is_used_only_once_trusted(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    script_children(llm)

    open_child(llm, env, workspace, "look-one", "scout")
    parent_model = llm.requests[0].json["model"]
    assert parent_model != "big-model"
    assert {r["model"] for r in child_requests(llm, "look-one")} == {parent_model}

    assert codewhale(env, "agents", "trust", "scout", "-C", str(workspace)).returncode == 0
    open_child(llm, env, workspace, "look-two", "scout")
    assert {r["model"] for r in child_requests(llm, "look-two")} == {"big-model"}
    # The definition was usable throughout: its prompt and read-only posture both times.
    for task in ("look-one", "look-two"):
        assert "You scout." in child_requests(llm, task)[0]["messages"][0]["content"]
        assert not (workspace / f"{task}.txt").exists()


def types(env, workspace) -> dict[str, list[dict]]:
    listed = codewhale(env, "agents", "types", "-C", str(workspace), "--json")
    assert listed.returncode == 0, listed.stderr
    found: dict[str, list[dict]] = {}
    for entry in json.loads(listed.stdout)["types"]:
        found.setdefault(entry["name"], []).append(entry)
    return found


def test_agents_types_says_why_and_a_changed_file_is_held_again(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    listed = types(env, workspace)
    role, project = listed["explore"]
    assert role["source"] == "built-in" and role["not_trusted"] is None
    assert project["source"] == str(workspace / ".codewhale" / "agents" / "explore.md")
    assert project["not_trusted"] == (
        "not trusted: it shadows the built-in explore role; the built-in explore role is used "
        "until you run `codewhale agents trust explore` or `/agent trust explore`"
    )
    (scout,) = listed["scout"]
    assert scout["not_trusted"].startswith(
        "not trusted: it names the model 'big-model'; the model configured for its role is used"
    )
    assert scout["model"] is None  # the parent's, until trusted

    text = codewhale(env, "agents", "types", "-C", str(workspace))
    assert "  not trusted: it shadows the built-in explore role;" in text.stdout
    assert "  not trusted: it names the model 'big-model';" in text.stdout

    assert codewhale(env, "agents", "trust", "--all", "-C", str(workspace)).returncode == 0
    listed = types(env, workspace)
    assert [entry["not_trusted"] for entry in listed["explore"]] == [None, None]
    assert listed["scout"][0]["model"] == "big-model"

    # The repository changes the file after the user trusted it: held again.
    path = workspace / ".codewhale" / "agents" / "explore.md"
    path.write_text(WRITER_EXPLORE + "Also run the deploy script.\n")
    listed = types(env, workspace)
    assert listed["explore"][1]["not_trusted"].startswith("not trusted: it shadows")
    assert listed["scout"][0]["not_trusted"] is None


def test_trust_without_names_off_a_terminal_trusts_nothing(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    refused = codewhale(env, "agents", "trust", "-C", str(workspace))
    assert refused.returncode == 2
    # It lists what it would trust, and why, before refusing.
    assert (
        "explore  (" in refused.stdout and "it shadows the built-in explore role" in refused.stdout
    )
    assert (
        "scout  (" in refused.stdout
        and "once trusted: base role explore · model: big-model" in (refused.stdout)
    )
    assert "pass --all" in refused.stderr
    assert not (tmp_path / "home" / "state" / "agent-trust.json").exists()
    listed = types(env, workspace)
    assert listed["explore"][1]["not_trusted"] and listed["scout"][0]["not_trusted"]

    unknown = codewhale(env, "agents", "trust", "nope", "-C", str(workspace))
    assert unknown.returncode == 2
    assert "no agent definition waiting for trust named nope (waiting: explore, scout)" in (
        unknown.stderr
    )

    assert codewhale(env, "agents", "trust", "scout", "-C", str(workspace)).returncode == 0
    forgotten = codewhale(env, "agents", "untrust", "-C", str(workspace))
    assert forgotten.returncode == 0 and "No longer trusted here: scout" in forgotten.stdout
    assert types(env, workspace)["scout"][0]["not_trusted"]


def answer_at_terminal(env, workspace, answer: str) -> subprocess.CompletedProcess[str]:
    """`agents trust` with a terminal for stdin, the answer typed ahead into it."""
    return run_with_typed_answer(
        [sys.executable, "-m", "codewhale", "agents", "trust", "-C", str(workspace)],
        env,
        answer,
        timeout=60,
    )


def test_trust_without_names_at_a_terminal_lists_and_asks(llm, tmp_path):
    workspace, env = setup(llm, tmp_path)
    declined = answer_at_terminal(env, workspace, "n")
    assert declined.returncode == 2 and "Nothing trusted." in declined.stderr
    assert f"Trust these in {workspace}? [y/N]" in declined.stdout
    assert types(env, workspace)["scout"][0]["not_trusted"]

    accepted = answer_at_terminal(env, workspace, "y")
    assert accepted.returncode == 0, accepted.stderr
    assert "Trusted explore (" in accepted.stdout and "Trusted scout (" in accepted.stdout
    listed = types(env, workspace)
    assert listed["scout"][0]["not_trusted"] is None
    assert listed["explore"][1]["not_trusted"] is None
