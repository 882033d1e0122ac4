"""What local servers do that hosted APIs do not (issue 29): no usage at all, and tools
dropped by a chat template without tool support. Through a real `codewhale exec`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from codewhale.engine.written_tool_calls import writes_a_tool_call
from tests.support.llm_server import Reply
from tests.support.settings import TEST_KEY, app_environment


def run_exec(llm, tmp_path, *flags: str) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_API_KEY=TEST_KEY,
        CODEWHALE_PROVIDER="llamacpp",
        CODEWHALE_BASE_URL=llm.base_url,
    )
    return subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), *flags, "hello"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_a_server_that_sends_no_usage_gets_an_estimate_marked_as_one(llm, tmp_path):
    llm.enqueue(Reply(text="Hello there, " * 40, sends_usage=False))
    result = run_exec(llm, tmp_path, "--json")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    (usage,) = [r for r in records if r["type"] == "usage"]
    assert usage["estimated"] is True
    assert usage["input"] > 100 and 100 < usage["output"] < 300  # 520 bytes of answer
    (done,) = [r for r in records if r["type"] == "result"]
    assert done["usage"]["input"] == usage["input"]


def test_reported_usage_is_not_marked_estimated(llm, tmp_path):
    llm.enqueue(Reply(text="counted"))
    result = run_exec(llm, tmp_path, "--json")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    (usage,) = [r for r in records if r["type"] == "usage"]
    assert usage["estimated"] is False


def test_a_tool_call_written_as_text_is_said_once(llm, tmp_path):
    written = '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>'
    llm.enqueue(Reply(text=written))
    result = run_exec(llm, tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "tool call as text" in line]
    assert len(warnings) == 1 and "ignore the tools" in warnings[0]


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ('{"name": "grep_files", "arguments": {"pattern": "x"}}', True),
        ('I will call {"function": "read_file", "parameters": {}} now', True),
        ("<|tool_call|>read_file", True),
        ('Example config: {"name": "my-app", "arguments": []}', False),  # not a tool of ours
        ("Use read_file to see it.", False),
    ],
)
def test_what_counts_as_a_written_tool_call(text, written):
    assert writes_a_tool_call(text, ["read_file", "grep_files"]) is written
