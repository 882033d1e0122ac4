"""What a session file says a resumed session's status line opens with (runtime/
resumed_figures.py) against the session itself, reopened: a real runtime, turns against
the loopback model, a compaction, usage from the server."""

from __future__ import annotations

from pathlib import Path

from codewhale.paths import user_dirs
from codewhale.runtime import open_runtime
from codewhale.runtime.resumed_figures import resumed_figures
from codewhale.sessions.store import SessionStore
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY

USAGE = {"prompt_tokens": 1_234, "completion_tokens": 56, "prompt_cache_hit_tokens": 1_000}


async def test_the_figures_read_from_the_file_are_those_the_reopened_session_shows(
    llm, monkeypatch, tmp_path: Path, isolated_home
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("".join(f"note {i}\n" for i in range(30)))
    first = open_runtime(workspace=workspace)
    for turn in range(4):  # enough older turns for a compaction to fold
        read = ToolCallSpec("read_file", {"path": "notes.txt"})
        llm.enqueue(Reply(tool_calls=[read], usage=USAGE))
        llm.enqueue(Reply(text=f"Read them: **30 notes** ({turn}).", usage=USAGE))
        await first.submit(f"read notes.txt, turn {turn}")
    llm.enqueue(Reply(text="The user had notes.txt read.", usage=USAGE))  # the summary
    await first.compact()
    llm.enqueue(Reply(text="Still 30.", usage=USAGE))
    await first.submit("how many?")
    await first.close()

    store = SessionStore(user_dirs().data_dir)
    latest = store.latest(workspace.resolve())
    assert latest is not None
    figures = resumed_figures(store.load(latest.id))
    reopened = open_runtime(workspace=workspace, continue_latest=True)
    try:
        assert reopened.resumed
        assert figures.usage == reopened.usage and figures.usage.input_tokens > 0
        assert figures.cost == reopened.cost_usd
        tokens, _ = reopened.context_use()
        assert figures.messages_tokens + reopened.tools_context() == tokens
    finally:
        await reopened.close()
