"""A child the model was told about survives any crash: SIGKILL the moment the ids arrive."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.support.llm_server import Fault, LoopbackLLM, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment

# 100 kills in all, in batches that xdist can spread over its workers.
BATCHES = 4
KILLS_PER_BATCH = 25
OPENS = 4
# A ceiling for one run to reach its kill, not a measure: a run takes a few seconds, and
# tens of seconds on a loaded machine (the suite under `make test-stress`).
RUN_CEILING_SECS = 300


def is_child(body) -> bool:
    return any("Task:\n" in str(m.get("content")) for m in body["messages"])


def announced_ids(body) -> list[str]:
    """The agent ids the tool results of this request tell the model."""
    found = []
    for message in body["messages"]:
        if message.get("role") == "tool" and '"agent_id"' in str(message.get("content")):
            found.append(json.loads(message["content"])["agent_id"])
    return found


def kill_when_announced(workspace, home) -> tuple[list[str], list[str]]:
    """Run exec, SIGKILL it as the model receives the ids; (announced, on disk)."""
    process: subprocess.Popen[bytes] | None = None
    announced: list[str] = []

    def respond(body) -> Reply:
        ids = announced_ids(body)
        if not ids:
            opens = [ToolCallSpec("agent_open", {"prompt": f"job {n}"}) for n in range(OPENS)]
            return Reply(tool_calls=opens)
        announced.extend(ids)
        assert process is not None
        process.send_signal(signal.SIGKILL)
        return Reply(fault=Fault.stall(seconds=5))

    with LoopbackLLM() as llm:
        llm.route(is_child, respond=lambda body: Reply(fault=Fault.stall(seconds=5)))
        llm.respond = respond
        env = app_environment(
            CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url, DEEPSEEK_API_KEY=TEST_KEY
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "delegate"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            process.wait(timeout=RUN_CEILING_SECS)
        finally:
            if process.poll() is None:
                process.kill()
    state = workspace / ".codewhale" / "state" / "subagents.v1.json"
    saved = [a["agent_id"] for a in json.loads(state.read_text())["agents"]]
    return announced, saved


@pytest.mark.slow
@pytest.mark.parametrize("batch", range(BATCHES))
def test_no_announced_child_is_lost_to_a_sigkill(tmp_path, batch):
    lost = []
    for attempt in range(KILLS_PER_BATCH):
        workspace = tmp_path / f"repo{attempt}"
        workspace.mkdir()
        announced, saved = kill_when_announced(workspace, tmp_path / f"home{attempt}")
        assert len(announced) == OPENS
        lost += [agent_id for agent_id in announced if agent_id not in saved]
    assert lost == []
