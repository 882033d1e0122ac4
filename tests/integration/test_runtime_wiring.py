"""open_runtime and Runtime without the TUI: flags reach requests, /clear reaches the file."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from codewhale.runtime import RuntimeRequestError, RuntimeSetupError, open_runtime
from tests.support.llm_server import Reply
from tests.support.settings import TEST_KEY


@pytest.fixture
def workspace(tmp_path, llm, monkeypatch):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    root = tmp_path / "repo"
    root.mkdir()
    return root


def conversation(runtime) -> list[tuple[str, str]]:
    """(role, content) of every message after the system prompt."""
    assert runtime.messages[0]["role"] == "system"
    return [(m["role"], m.get("content")) for m in runtime.messages[1:]]


def records(runtime) -> list[dict]:
    return [json.loads(line) for line in runtime.info.path.read_text().splitlines() if line]


async def test_clear_is_recorded_so_continue_resumes_the_cleared_conversation(llm, workspace):
    llm.enqueue(Reply(text="first answer"), Reply(text="second answer"), Reply(text="third"))
    runtime = open_runtime(workspace=workspace)
    await runtime.submit("first prompt")
    runtime.clear()
    assert conversation(runtime) == []
    await runtime.submit("second prompt")
    session_id = runtime.info.id
    await runtime.close()
    kinds = [r["kind"] for r in records(runtime)]
    assert kinds.count("clear") == 1
    assert kinds.index("clear") > kinds.index("message")

    again = open_runtime(workspace=workspace, continue_latest=True)
    try:
        assert again.info.id == session_id
        assert again.info.title == "second prompt"  # the picker names it by what is left
        assert conversation(again) == [("user", "second prompt"), ("assistant", "second answer")]
        await again.submit("third prompt")
    finally:
        await again.close()
    sent = [(m["role"], m["content"]) for m in llm.requests[-1].json["messages"][1:]]
    assert sent == [
        ("user", "second prompt"),
        ("assistant", "second answer"),
        ("user", "third prompt"),
    ]
    # Resuming once more still starts after the clear, with the third turn appended once.
    last = open_runtime(workspace=workspace, resume=session_id)
    try:
        assert [content for _, content in conversation(last)] == [
            "second prompt",
            "second answer",
            "third prompt",
            "third",
        ]
    finally:
        await last.close()


async def test_clear_right_after_resuming_drops_the_loaded_history(llm, workspace):
    llm.enqueue(Reply(text="old answer"), Reply(text="new answer"))
    runtime = open_runtime(workspace=workspace)
    await runtime.submit("old prompt")
    await runtime.close()
    resumed = open_runtime(workspace=workspace, continue_latest=True)
    resumed.clear()
    await resumed.submit("new prompt")
    await resumed.close()
    again = open_runtime(workspace=workspace, continue_latest=True)
    try:
        assert conversation(again) == [("user", "new prompt"), ("assistant", "new answer")]
    finally:
        await again.close()


async def test_clear_is_refused_while_a_turn_runs_and_nothing_is_recorded(llm, workspace):
    llm.enqueue(Reply(text=["slow ", "answer"], chunk_delay=0.3))
    runtime = open_runtime(workspace=workspace)
    turn = asyncio.create_task(runtime.submit("long one"))
    try:
        while not runtime.turn_running:
            await asyncio.sleep(0.01)
        with pytest.raises(RuntimeRequestError, match="Esc"):
            runtime.clear()
        await turn
    finally:
        await runtime.close()
    assert "clear" not in [r["kind"] for r in records(runtime)]
    assert conversation(runtime) == [("user", "long one"), ("assistant", "slow answer")]


async def test_overrides_reach_the_request_and_the_session_header(llm, workspace, isolated_home):
    config = isolated_home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('model = "deepseek-v4-pro"\n')
    llm.enqueue(Reply(text="ok"))
    runtime = open_runtime(workspace=workspace, overrides={"model": "deepseek-v4-flash"})
    try:
        assert runtime.model == "deepseek-v4-flash"
        await runtime.submit("hi")
    finally:
        await runtime.close()
    assert llm.requests[0].json["model"] == "deepseek-v4-flash"
    assert records(runtime)[0]["model"] == "deepseek-v4-flash"


async def test_resuming_an_unknown_session_is_a_setup_error(workspace):
    with pytest.raises(RuntimeSetupError, match="sess_nope"):
        open_runtime(workspace=workspace, resume="sess_nope")


async def test_continuing_where_no_session_ran_starts_a_new_one_and_says_so(llm, workspace):
    llm.enqueue(Reply(text="fresh"))
    runtime = open_runtime(workspace=workspace, continue_latest=True)
    try:
        assert "no earlier session here: started a new one" in runtime.warnings
        assert (await runtime.submit("hi")).status == "completed"
    finally:
        await runtime.close()
    again = open_runtime(workspace=workspace, continue_latest=True)
    try:  # the new session is the one the next --continue finds
        assert again.info.id == runtime.info.id
        assert "no earlier session here: started a new one" not in again.warnings
    finally:
        await again.close()


async def test_a_resumed_session_counts_on_from_its_totals(llm, workspace):
    usage = {"prompt_tokens": 1200, "completion_tokens": 300, "prompt_cache_hit_tokens": 1000}
    llm.enqueue(Reply(text="one", usage=usage), Reply(text="two", usage=usage))
    first = open_runtime(workspace=workspace)
    await first.submit("first prompt")
    spent = (first.usage.input_tokens, first.usage.output_tokens, first.cost_usd)
    await first.close()
    assert spent[:2] == (1200, 300) and spent[2] is not None and spent[2] > 0

    resumed = open_runtime(workspace=workspace, continue_latest=True)
    assert (resumed.usage.input_tokens, resumed.usage.output_tokens, resumed.cost_usd) == spent
    assert resumed.usage.cache_hit_tokens == 1000
    await resumed.submit("second prompt")
    assert resumed.usage.input_tokens == 2400 and resumed.cost_usd == pytest.approx(2 * spent[2])
    await resumed.close()
    # A file whose totals record is damaged resumes from zero rather than failing.
    lines = resumed.info.path.read_text().splitlines()
    damaged = [line.replace('"input_tokens": 2400', '"input_tokens": "x"') for line in lines]
    resumed.info.path.write_text("\n".join(damaged) + "\n")
    again = open_runtime(workspace=workspace, continue_latest=True)
    assert again.usage.input_tokens == 0 and again.usage.output_tokens == 600
    await again.close()


async def test_the_branch_is_looked_up_once_for_the_prompt_and_the_children(llm, workspace):
    git = ["git", "-C", str(workspace), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "topic", str(workspace)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    runtime = open_runtime(workspace=workspace)
    try:
        assert "- Git branch: topic" in runtime.messages[0]["content"]
        assert runtime.manager.builder.branch == "topic"
    finally:
        await runtime.close()
