"""A damaged sub-agent state file never stops a command: real `codewhale` processes.

Each kind of damage goes into a state file holding a good record and a victim; then
`agents list`, `agents show` and `exec` (which opens a child, so the state is
written again) each run to the end, say one warning naming the file, keep the good
record, and leave the damaged original beside it as `<name>.damaged-<time>`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codewhale.subagents.store import SubagentStore
from tests.support.damaged_state import GOOD, KINDS, damage, set_aside
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task


def codewhale(workspace: Path, *args: str, env: dict | None = None):
    return subprocess.run(
        [sys.executable, "-m", "codewhale", *args, "-C", str(workspace)],
        capture_output=True,
        text=True,
        env=env or app_environment(CODEWHALE_HOME=str(workspace.parent / "home")),
        timeout=120,
    )


def assert_warned_once(stderr: str, damaged: Path) -> None:
    assert "Traceback" not in stderr
    warnings = [line for line in stderr.splitlines() if "sub-agent state" in line]
    assert len(warnings) == 1, stderr
    assert warnings[0].startswith("warning: ")
    assert str(damaged) in warnings[0] and ".damaged-" in warnings[0]


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.mark.parametrize("kind", KINDS)
def test_agents_list_and_show_read_around_the_damage_and_set_it_aside(workspace, kind):
    damaged = damage(workspace, kind)
    original = damaged.read_bytes()
    listed = codewhale(workspace, "agents", "list", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    assert_warned_once(listed.stderr, damaged)
    agents = {a["agent_id"]: a for a in json.loads(listed.stdout)["agents"]}
    assert agents[GOOD]["status"] == "completed"
    if kind == "huge garbage journal line":
        assert agents[GOOD]["activity"] == "replayed"
    (copy,) = set_aside(damaged)
    assert copy.read_bytes() == original
    # The file was rewritten from what could be read: the next command reads it cleanly.
    shown = codewhale(workspace, "agents", "show", GOOD)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr
    assert "sub-agent state" not in shown.stderr
    assert shown.stdout.startswith(f"{GOOD} (Moby, explore) — completed")
    assert set_aside(damaged) == [copy]


@pytest.mark.parametrize("kind", KINDS)
def test_exec_runs_a_child_beside_the_damage(llm, workspace, kind):
    damaged = damage(workspace, kind)
    original = damaged.read_bytes()
    llm.route(for_task("survey"), Reply(text=REPORT))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "survey"})]),
        Reply(text="waiting for the survey"),
        Reply(text="the survey is done"),
    )
    env = app_environment(
        CODEWHALE_HOME=str(workspace.parent / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    ran = codewhale(workspace, "exec", "go", env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith("the survey is done")
    assert_warned_once(ran.stderr, damaged)
    (copy,) = set_aside(damaged)
    assert copy.read_bytes() == original
    statuses = {r.objective: r.status for r in SubagentStore(workspace).load()}
    assert statuses["the good one"] == "completed" and statuses["survey"] == "completed"


def test_a_newer_schema_is_left_untouched_and_said_once(workspace):
    store = SubagentStore(workspace)
    store.state_file.parent.mkdir(parents=True)
    original = json.dumps({"schema_version": 2, "agents": [None]})
    store.state_file.write_text(original)
    listed = codewhale(workspace, "agents", "list")
    assert listed.returncode == 2 and "Traceback" not in listed.stderr
    assert "schema_version 2 is not supported" in listed.stderr
    assert store.state_file.read_text() == original and not set_aside(store.state_file)
