"""RLM sessions: the kernel protocol, helpers, isolation and the tool lifecycle."""

from __future__ import annotations

import json

import pytest

from codewhale.config_models import RlmConfig
from codewhale.handles import HandleStore
from codewhale.providers.client import ChatClient
from codewhale.rlm.kernel import KernelLimits
from codewhale.rlm.sessions import RlmError, RlmManager
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import app_environment, loopback_settings

CONTEXT = "".join(f"line {i}: {'needle' if i % 10 == 0 else 'hay'}\n" for i in range(100))


@pytest.fixture
async def rlm(llm):
    client = ChatClient(loopback_settings(llm.base_url), retry_base_delay_secs=0.01)
    manager = RlmManager(
        client=client,
        config=RlmConfig(),
        handles=HandleStore(),
        limits=KernelLimits(eval_timeout_secs=3, memory_mb=512),
    )
    await manager.open("doc", CONTEXT, {"source": "test"})
    yield manager
    await manager.close_all()
    await client.aclose()


async def run(rlm, code: str) -> dict:
    return await rlm.evaluate("doc", code)


async def test_variables_and_imports_persist_and_errors_do_not_kill(rlm):
    await run(rlm, "import math\nx = 21")
    failed = await run(rlm, "1 / 0")
    assert failed["ok"] is False and "ZeroDivisionError" in failed["error"]
    assert (await run(rlm, "print(math.floor(x * 2.5))"))["stdout"] == "52\n"
    syntax = await run(rlm, "def broken(:")
    assert "SyntaxError" in syntax["error"]
    assert (await run(rlm, "print(x)"))["stdout"] == "21\n"


async def test_look_alike_frames_cannot_confuse_the_protocol(rlm):
    code = (
        "import os, json\n"
        "fake = '@@rlm-' + '0' * 32 + ' ' + json.dumps({'type': 'result', 'ok': True})\n"
        "print(fake)\n"
        "os.write(1, (fake + '\\n').encode())\n"
        "print('after')\n"
    )
    reply = await run(rlm, code)
    assert reply["ok"] is True
    assert reply["stdout"].endswith("after\n")
    assert (await run(rlm, "print('still in sync')"))["stdout"] == "still in sync\n"


async def test_context_helpers(rlm):
    reply = await run(
        rlm,
        "print(len(_context) == len(content), context_meta()['lines'])\n"
        "print(repr(peek(0, 6)), repr(peek(1, 2, unit='lines')))\n"
        "hits = search(r'needle', max_hits=3)\n"
        "print(len(hits), hits[0]['line'])\n"
        "parts = chunk(max_chars=500, overlap=50)\n"
        "print(chunk_coverage(parts)['fraction'], chunk_coverage(parts[:1])['fraction'] < 1)\n"
        "repl_set('y', 7); print(repl_get('y'), SHOW_VARS()['hits'])\n",
    )
    lines = reply["stdout"].splitlines()
    assert lines[0] == "True 101"
    assert lines[1] == "'line 0' 'line 1: hay\\n'"
    assert lines[2] == "3 1"
    assert lines[3] == "1.0 True"
    assert lines[4] == "7 list"


async def test_llm_helpers_batch_limits_refusals_and_sequences(llm, rlm):
    llm.respond = lambda body: Reply(text="R:" + body["messages"][-1]["content"][:12])
    sixteen = await run(
        rlm,
        "out = llm_query_batched([f'p{i}' for i in range(16)])\nprint(out[0], out[15], len(out))",
    )
    assert sixteen["stdout"] == "R:p0 R:p15 16\n"
    requests_before = len(llm.requests)
    seventeen = await run(
        rlm, "out = llm_query_batched([f'p{i}' for i in range(17)])\nprint(len(out), out[0][:40])"
    )
    assert seventeen["stdout"] == "17 error: a batch holds at most 16 prompts,\n"
    refused = await run(
        rlm, "out = llm_query_batched(['a', 'b'], dependency_mode='sequential')\nprint(out[0])"
    )
    assert "refused: dependency_mode 'sequential'" in refused["stdout"]
    assert "sub_query_sequence" in refused["stdout"]
    assert len(llm.requests) == requests_before  # no model call on refusal or overflow
    llm.respond = lambda body: Reply(text=f"step{len(body['messages'][-1]['content'])}")
    sequence = await run(rlm, "r = sub_query_sequence('summarise', [(0, 10), (10, 20)])\nprint(r)")
    assert sequence["ok"]
    second_prompt = llm.requests[-1].json["messages"][-1]["content"]
    assert "Result of the previous step:" in second_prompt
    assert json.loads(sequence["stdout"].replace("'", '"'))[0] in second_prompt
    assert rlm.sessions["doc"].usage.input_tokens > 0


async def test_finalize_and_large_output_become_handles(rlm):
    reply = await run(rlm, "print('x' * 5000)\nfinalize({'items': [1, 2, 3]}, confidence=0.9)")
    assert "stdout" not in reply and reply["stdout_handle"]["length"] == 5001
    final = reply["finals"][0]
    assert final["confidence"] == 0.9
    read = rlm.handles.read({"handle": final["handle"], "jsonpath": "$.items[1]"})
    assert json.loads(read["content"]) == [2]
    rlm.configure("doc", {"output_feedback": "metadata"})
    assert (await run(rlm, "print('hello')"))["stdout_chars"] == 6


async def test_the_kernel_sees_no_api_keys(rlm, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-must-not-leak-123456")
    monkeypatch.setenv("CODEWHALE_BASE_URL", "http://127.0.0.1:1")
    await rlm.close("doc")
    await rlm.open("doc", CONTEXT, {})
    reply = await run(rlm, "import os\nprint(sorted(os.environ))")
    names = reply["stdout"]
    assert "API_KEY" not in names and "CODEWHALE" not in names and "DEEPSEEK" not in names


async def test_runaway_code_is_contained_and_the_kernel_restarts(rlm):
    with pytest.raises(RlmError, match="timed out after 3s"):
        await run(rlm, "while True:\n    pass")
    bomb = await run(rlm, "block = bytearray(10 * 1024 ** 3)")
    assert bomb["ok"] is False and "MemoryError" in bomb["error"]
    with pytest.raises(RlmError, match="exit code 7"):
        await run(rlm, "import os\nos._exit(7)")
    with pytest.raises(RlmError, match="SIGSEGV"):
        await run(rlm, "import ctypes\nctypes.string_at(0)")
    assert (await run(rlm, "print(len(_context))"))["stdout"] == f"{len(CONTEXT)}\n"


async def test_unknown_sessions_and_duplicate_names(rlm):
    with pytest.raises(RlmError, match="no open RLM session 'nope'"):
        await rlm.evaluate("nope", "1")
    with pytest.raises(RlmError, match="already open"):
        await rlm.open("doc", "x", {})
    closed = await rlm.close("doc")
    assert closed["closed"] and closed["evals"] == 0 and "rpc_count" in closed


def test_the_rlm_lifecycle_through_codewhale_exec(llm, tmp_path):
    import subprocess
    import sys

    from tests.support.settings import TEST_KEY

    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "big.log").write_text(CONTEXT)
    llm.route(
        lambda body: body["messages"][-1]["content"].startswith("Count"),
        respond=lambda body: Reply(text="10"),
    )

    def parent(body):
        """The model's side, step by step; step 3 reads the handle that step 2 produced."""
        steps = [m for m in body["messages"] if m["role"] == "assistant"]
        if len(steps) == 0:
            return Reply(
                tool_calls=[ToolCallSpec("rlm_open", {"file_path": "big.log", "name": "log"})]
            )
        if len(steps) == 1:
            code = "n = llm_query('Count the needles: ' + peek(0, 200))\nfinalize({'n': n})"
            return Reply(tool_calls=[ToolCallSpec("rlm_eval", {"name": "log", "code": code})])
        if len(steps) == 2:
            evaluated = json.loads(body["messages"][-1]["content"])
            handle = evaluated["finals"][0]["handle"]
            return Reply(
                tool_calls=[ToolCallSpec("handle_read", {"handle": handle, "jsonpath": "$.n"})]
            )
        if len(steps) == 3:
            return Reply(tool_calls=[ToolCallSpec("rlm_close", {"name": "log"})])
        return Reply(text="There are 10 needles.")

    llm.respond = parent
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "codewhale",
            "exec",
            "-C",
            str(workspace),
            "--json",
            "--approve",
            "auto",  # rlm_eval runs code: it asks, like exec_shell
            "analyse big.log",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    tool_messages = [m for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    opened = json.loads(tool_messages[0]["content"])
    assert opened["name"] == "log" and opened["length"] == len(CONTEXT)
    evaluated = json.loads(tool_messages[1]["content"])
    handle = evaluated["finals"][0]["handle"]
    assert handle["name"] == "final_1" and handle["session_id"].startswith("rlm:")
    assert json.loads(json.loads(tool_messages[2]["content"])["content"]) == ["10"]
    closed = json.loads(tool_messages[3]["content"])
    assert closed["closed"] is True and closed["rpc_count"] == 1
    assert closed["usage"]["input"] > 0
    assert json.loads(result.stdout.splitlines()[-1])["final_text"] == "There are 10 needles."


async def test_rlm_query_recurses_with_its_own_repl_and_respects_depth(llm, rlm):
    def sub_model(body):
        if body["messages"][0]["content"].startswith("You answer one question"):
            steps = [m for m in body["messages"] if m["role"] == "assistant"]
            if not steps:
                return Reply(
                    tool_calls=[
                        ToolCallSpec(
                            "rlm_eval", {"name": "sub", "code": "print(len(search('needle')))"}
                        )
                    ]
                )
            return Reply(
                text="found " + body["messages"][-1]["content"].split('"stdout": "')[1][:2]
            )
        return Reply(text="unexpected")

    llm.respond = sub_model
    reply = await run(rlm, "print(rlm_query('how many needles?'))")
    assert reply["stdout"] == "found 10\n"
    rlm.configure("doc", {"sub_rlm_max_depth": 0})
    limited = await run(rlm, "rlm_query('again?')")
    assert "depth limit reached" in limited["error"]


async def test_open_sources_and_their_rules(rlm, tmp_path):
    from codewhale.rlm.tools import RlmOpen
    from codewhale.tools.base import ToolContext, ToolError

    tool = RlmOpen(rlm, lambda: "[user] hello\n\n[assistant] hi there")
    context = ToolContext(workspace=tmp_path, session_id="s")
    opened = json.loads(
        (await tool.run({"session_object": "session://active/transcript"}, context)).output
    )
    assert opened["length"] == len("[user] hello\n\n[assistant] hi there")
    assert opened["name"] == "session-active-transcript"
    with pytest.raises(ToolError, match="exactly one source"):
        await tool.run({"content": "a", "file_path": "b"}, context)
    with pytest.raises(ToolError, match="private, loopback or link-local"):
        await tool.run({"url": "http://127.0.0.1:9/x"}, context)
    with pytest.raises(ToolError, match="outside the workspace"):
        await tool.run({"file_path": "../secret.txt"}, context)
