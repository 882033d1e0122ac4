"""Per-child budgets through a real `codewhale exec` (issue 30, item 5): a child past its
max_runtime_secs or max_tokens ends `failed` with the budget as its reason."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task


def run_exec(llm, tmp_path, config: str = "") -> tuple[subprocess.CompletedProcess[str], list]:
    (tmp_path / "repo").mkdir()
    return run_exec_in(llm, tmp_path, config)


def run_exec_in(llm, tmp_path, config: str = "") -> tuple[subprocess.CompletedProcess[str], list]:
    """`codewhale exec` in `tmp_path/repo` (made already), and the agents it recorded."""
    workspace = tmp_path / "repo"
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(config)
    env = app_environment(
        CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url, DEEPSEEK_API_KEY=TEST_KEY
    )
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "--json", "go"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    listing = subprocess.run(
        [sys.executable, "-m", "codewhale", "agents", "list", "--json", "-C", str(workspace)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return result, json.loads(listing.stdout)["agents"]


def open_child(**budget) -> Reply:
    return Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "slow job", **budget})])


def test_a_child_past_its_runtime_ends_failed_with_the_budget(llm, tmp_path):
    llm.route(for_task("slow job"), Reply(fault=Fault.stall(seconds=60)))
    llm.enqueue(open_child(max_runtime_secs=1), Reply(text="waiting"))
    llm.respond = lambda body: Reply(text="done")
    result, agents = run_exec(llm, tmp_path)
    assert result.returncode == 0, result.stderr
    (child,) = agents
    assert child["status"] == "failed"
    assert "budget: ran past max_runtime_secs=1" in json.dumps(child)


def test_a_child_past_its_tokens_ends_failed_and_the_default_comes_from_config(llm, tmp_path):
    heavy = {"prompt_tokens": 6000, "completion_tokens": 50, "total_tokens": 6050}
    llm.route(
        for_task("slow job"),
        Reply(tool_calls=[ToolCallSpec("list_dir", {"path": "."})], usage=heavy),
        Reply(text=REPORT, usage=heavy),
    )
    llm.enqueue(open_child(), Reply(text="waiting"))
    llm.respond = lambda body: Reply(text="done")
    result, agents = run_exec(llm, tmp_path, "[subagents]\nmax_tokens = 5000\n")
    assert result.returncode == 0, result.stderr
    (child,) = agents
    assert child["status"] == "failed"
    assert "budget: 6,050 tokens used, over max_tokens=5,000" in json.dumps(child)


def test_a_budget_that_is_not_a_positive_number_is_refused(llm, tmp_path):
    llm.enqueue(open_child(max_cost_usd=-1), Reply(text="ok"))
    result, agents = run_exec(llm, tmp_path)
    assert result.returncode == 0, result.stderr
    assert agents == []
    refused = [m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert "max_cost_usd must be a positive number, got -1" in refused[0]


def test_a_fan_out_past_max_children_per_turn_is_refused_not_queued(llm, tmp_path):
    llm.route(for_task("job"), Reply(text=REPORT))
    opens = [ToolCallSpec("agent_open", {"prompt": f"job {n}"}) for n in range(5)]
    llm.enqueue(Reply(tool_calls=opens), Reply(text="three ran"))
    llm.respond = lambda body: Reply(text="done")
    result, agents = run_exec(llm, tmp_path, "[subagents]\nmax_children_per_turn = 3\n")
    assert result.returncode == 0, result.stderr
    assert len(agents) == 3
    parent = [r.json for r in llm.requests if not for_task("job")(r.json)]
    answers = [m["content"] for m in parent[1]["messages"] if m["role"] == "tool"]
    refused = [a for a in answers if "max_children_per_turn = 3" in a]
    assert len(refused) == 2 and "this turn has opened 3 sub-agents" in refused[0]


SLOW_WORKER = """---
name: slow-worker
description: Works slowly.
max_runtime_secs: 1
max_tokens: 90000
---
You work slowly and report.
"""


def test_a_definitions_runtime_budget_ends_its_child_failed(llm, tmp_path):
    agents = tmp_path / "repo" / ".codewhale" / "agents"
    agents.mkdir(parents=True)
    (agents / "slow-worker.md").write_text(SLOW_WORKER)
    llm.route(for_task("slow job"), Reply(fault=Fault.stall(seconds=60)))
    # agent_open's own max_tokens wins over the definition's; the runtime is the file's.
    opened = ToolCallSpec(
        "agent_open", {"prompt": "slow job", "type": "slow-worker", "max_tokens": 40000}
    )
    llm.enqueue(Reply(tool_calls=[opened]), Reply(text="waiting"))
    llm.respond = lambda body: Reply(text="done")
    result, (child,) = run_exec_in(llm, tmp_path)
    assert result.returncode == 0, result.stderr
    assert child["type"] == "slow-worker" and child["status"] == "failed"
    assert "budget: ran past max_runtime_secs=1" in json.dumps(child)
    parent = [r.json for r in llm.requests if not for_task("slow job")(r.json)]
    projection = json.loads(
        next(m["content"] for m in parent[1]["messages"] if m["role"] == "tool")
    )
    assert projection["budget"] == {"max_runtime_secs": 1, "max_tokens": 40000}
