"""A disk that refuses a child's files fails the child with the reason, never "cancelled".

Real faults on a real `codewhale exec`, not mocks: a file-size limit (RLIMIT_FSIZE,
so writes past it fail with EFBIG), and a tmpfs holding the state that fills up
mid-run (in a mount namespace of its own; skipped where one cannot be made).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.store import SubagentStore
from tests.support.llm_server import Fault, LoopbackLLM, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment

CHILDREN = 3
# A child's answer: far more than the limits below leave room for.
LONG_ANSWER = "SUMMARY: " + "findings " * 40_000
FILE_SIZE_LIMIT = 200 * 1024


def is_child(body) -> bool:
    return any("Task:\n" in str(m.get("content")) for m in body["messages"])


def completions(body) -> list[str]:
    return [
        str(m.get("content"))
        for m in body["messages"]
        if "subagent_completion" in str(m.get("content"))
    ]


class FanOut:
    """The parent opens CHILDREN children, waits for them, then answers; each child
    looks around (a cheap tool step) until `ready()`, then writes a long answer."""

    def __init__(self, on_opened=lambda: None, on_told=lambda: None) -> None:
        self.ready = False
        self.told: list[str] = []
        self.on_opened = on_opened
        self.on_told = on_told

    def parent(self, body) -> Reply:
        if not any(m.get("role") == "tool" for m in body["messages"]):
            calls = [ToolCallSpec("agent_open", {"prompt": f"job {n}"}) for n in range(CHILDREN)]
            return Reply(tool_calls=calls)
        if not self.ready:
            # Every child's record is on disk now: the fault may come.
            self.on_opened()
            self.ready = True
        if len(completions(body)) < CHILDREN:
            return Reply(text="waiting for my sub-agents")
        self.told = completions(body)
        self.on_told()
        return Reply(text="the children reported")

    def child(self, body) -> Reply:
        if not self.ready:
            return Reply(tool_calls=[ToolCallSpec("list_dir", {"path": "."})])
        return Reply(text=LONG_ANSWER)


def final_records(state_dir: Path) -> list[dict]:
    return json.loads((state_dir / "subagents.v1.json").read_text())["agents"]


def assert_failed_with(records: list[dict], told: list[str], reason: str) -> None:
    assert len(records) == CHILDREN
    for record in records:
        assert record["status"] == "failed", record["error"]
        assert record["error"].startswith("could not write ") and reason in record["error"]
    assert len(told) == CHILDREN
    assert all("failed: could not write" in text and reason in text for text in told)


RUN_WITH_A_FILE_SIZE_LIMIT = (
    "import resource, runpy, sys\n"
    f"resource.setrlimit(resource.RLIMIT_FSIZE, ({FILE_SIZE_LIMIT}, {FILE_SIZE_LIMIT}))\n"
    "sys.argv = ['codewhale', 'exec', '--json', '-C', sys.argv[1], 'fan out']\n"
    "runpy.run_module('codewhale', run_name='__main__')\n"
)


def exec_with_a_file_size_limit(workspace: Path, home: Path, llm: LoopbackLLM):
    """`codewhale exec --json` that may write no file past FILE_SIZE_LIMIT; its events."""
    ran = subprocess.run(
        [sys.executable, "-c", RUN_WITH_A_FILE_SIZE_LIMIT, str(workspace)],
        capture_output=True,
        text=True,
        timeout=120,
        env=app_environment(
            CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url, DEEPSEEK_API_KEY=TEST_KEY
        ),
    )
    assert "Traceback" not in ran.stderr
    return [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]


def write_failures(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line.get("type") == "subagent_state_write_failed"]


def test_children_past_a_file_size_limit_fail_with_file_too_large(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    fan_out = FanOut()
    with LoopbackLLM() as llm:
        llm.route(is_child, respond=fan_out.child)
        llm.respond = fan_out.parent
        lines = exec_with_a_file_size_limit(workspace, tmp_path / "home", llm)
    assert "the children reported" in json.dumps(lines[-1]) + json.dumps(lines[-2])
    records = final_records(SubagentStore(workspace).state_file.parent)
    assert_failed_with(records, fan_out.told, "File too large")
    # The front end hears of it once, as a typed event it can end the run on.
    (failure,) = write_failures(lines)
    assert failure["reason"] == "File too large"
    assert failure["message"] == f"could not write {failure['path']}: File too large"
    assert failure["path"].endswith(".jsonl")


def test_a_child_whose_record_cannot_be_written_is_not_opened(tmp_path):
    workspace = tmp_path / "repo"
    store = SubagentStore(workspace)
    store.state_file.parent.mkdir(parents=True)
    # An earlier record alone is past the limit: no snapshot of the state can be written.
    earlier = WorkerRecord(**{**SEED, "result": "x" * FILE_SIZE_LIMIT}).to_json()
    store.state_file.write_text(json.dumps({"schema_version": 1, "agents": [earlier]}))
    with LoopbackLLM() as llm:
        llm.route(is_child, respond=lambda body: Reply(fault=Fault.stall(seconds=30)))
        llm.respond = lambda body: (
            Reply(text="nothing opened")
            if any(m.get("role") == "tool" for m in body["messages"])
            else Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "job"})])
        )
        lines = exec_with_a_file_size_limit(workspace, tmp_path / "home", llm)
        (result,) = [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    # The model hears that the child is not running, and why.
    assert result.startswith(f"Error: could not write {store.state_file}: File too large")
    assert "was stopped" in result
    (failure,) = write_failures(lines)
    assert failure["path"] == str(store.state_file)
    finished = [line["envelope"] for line in lines if line.get("type") == "agent_event"]
    assert [e["kind"] for e in finished if e["kind"] in ("failed", "cancelled")] == ["failed"]
    # The file the disk could not take more of is as it was.
    assert [r.agent_id for r in store.load()] == [earlier["agent_id"]]


SEED = {
    "run_id": "run_earlier",
    "agent_id": "agent_0000e001",
    "name": "agent_0000e001",
    "nickname": "Moby",
    "objective": "an earlier survey",
    "description": "earlier",
    "type": "explore",
    "role": "explore",
    "model": "deepseek-v4-flash",
    "workspace": "/w",
    "git_branch": None,
    "session_boot_id": "boot_earlier",
    "status": "completed",
    "worker_status": "completed",
}


FULL_DISK_RUN = """
mount -t tmpfs -o size=1m,mode=0700 tmpfs "$STATE" || exit 99
"$PYTHON" -m codewhale exec -C "$WORKSPACE" "fan out"
status=$?
cp -r "$STATE"/. "$SAVED"/
exit $status
"""


def private_mounts() -> list[str] | None:
    """The `unshare` that gives a process mounts of its own, where one works here."""
    if shutil.which("unshare") is None:
        return None
    for command in (["unshare", "-m"], ["unshare", "-rm"]):
        probe = subprocess.run(
            [*command, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp"],
            capture_output=True,
        )
        if probe.returncode == 0:
            return command
    return None


def fill(folder: Path) -> None:
    """Write to `folder` until its filesystem has no room left."""
    with (folder / "filler").open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass


def test_children_on_a_disk_that_fills_up_mid_run_fail_with_no_space(tmp_path):
    unshare = private_mounts()
    if unshare is None:
        pytest.skip("no mount namespace here (unshare/mount not permitted)")
    workspace, saved = tmp_path / "repo", tmp_path / "saved"
    state = SubagentStore(workspace).state_file.parent
    for folder in (state, saved):
        folder.mkdir(parents=True)
    run: subprocess.Popen[str] | None = None

    def seen_from_outside() -> Path:
        """The run's state folder (its tmpfs), seen from outside its mount namespace."""
        assert run is not None
        return Path(f"/proc/{run.pid}/root{state}")

    fan_out = FanOut(
        on_opened=lambda: fill(seen_from_outside()),
        # Room again, so the state can be written as the run ends (and copied out).
        on_told=lambda: (seen_from_outside() / "filler").unlink(),
    )
    with LoopbackLLM() as llm:
        llm.route(is_child, respond=fan_out.child)
        llm.respond = fan_out.parent
        run = subprocess.Popen(
            [*unshare, "sh", "-c", FULL_DISK_RUN],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=app_environment(
                CODEWHALE_HOME=str(tmp_path / "home"),
                CODEWHALE_BASE_URL=llm.base_url,
                DEEPSEEK_API_KEY=TEST_KEY,
                PYTHON=sys.executable,
                STATE=str(state),
                WORKSPACE=str(workspace),
                SAVED=str(saved),
            ),
        )
        out, err = run.communicate(timeout=120)
    assert run.returncode != 99, err
    assert "Traceback" not in err
    assert "the children reported" in out
    assert_failed_with(final_records(saved), fan_out.told, "No space left on device")
