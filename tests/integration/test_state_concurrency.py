"""Two `codewhale exec` on one workspace at once keep every sub-agent record.

Each process opens children in rounds, so snapshots, journals and compactions of the
two interleave on the one state file; every record of both must end as written.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.llm_server import LoopbackLLM, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT

PROCESSES = 2
CHILDREN = 5
ROUNDS = 3


def is_child(body) -> bool:
    return any("Task:\n" in str(m.get("content")) for m in body["messages"])


def parent_reply(body) -> Reply:
    """Open a round of children once the last round has ended; then answer."""
    messages = body["messages"]
    opened = sum(
        1
        for m in messages
        for call in m.get("tool_calls") or ()
        if call["function"]["name"] == "agent_open"
    )
    ended = sum(str(m.get("content")).count("subagent_completion") for m in messages)
    if ended < opened:
        return Reply(text="waiting for my sub-agents")
    if opened < CHILDREN * ROUNDS:
        round_ = opened // CHILDREN
        calls = [
            ToolCallSpec("agent_open", {"prompt": f"round {round_} job {n}"})
            for n in range(CHILDREN)
        ]
        return Reply(tool_calls=calls)
    return Reply(text="all rounds done")


def state_records(workspace) -> list[dict]:
    """What `codewhale agents list --all --json` reports in another process."""
    listed = subprocess.run(
        [sys.executable, "-m", "codewhale", "agents", "list", "--all", "--json"],
        cwd=workspace,
        capture_output=True,
        text=True,
        env=app_environment(CODEWHALE_HOME=str(workspace.parent / "home-list")),
        check=True,
    )
    return json.loads(listed.stdout)["agents"]


@pytest.mark.slow
def test_two_runs_at_once_keep_all_thirty_records(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    with LoopbackLLM() as llm:
        llm.route(is_child, respond=lambda body: Reply(text=REPORT, request_delay=0.05))
        llm.respond = parent_reply
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), f"run {n}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=app_environment(
                    CODEWHALE_HOME=str(tmp_path / f"home{n}"),
                    CODEWHALE_BASE_URL=llm.base_url,
                    DEEPSEEK_API_KEY=TEST_KEY,
                ),
            )
            for n in range(PROCESSES)
        ]
        outputs = [run.communicate(timeout=240) for run in runs]
    for run, (out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err
        assert "all rounds done" in out
        assert "Traceback" not in err
    records = state_records(workspace)
    assert len(records) == PROCESSES * CHILDREN * ROUNDS
    assert {r["status"] for r in records} == {"completed"}
    assert len({r["owner_pid"] for r in records}) == PROCESSES
