"""Sub-agent test helpers: a runtime factory against the loopback LLM, and ways to wait."""

from __future__ import annotations

import pytest

from codewhale.permissions import Mode
from codewhale.runtime import events, open_runtime
from tests.support.settings import TEST_KEY

REPORT = (
    "Done.\n\nSUMMARY: did the task\nCHANGES: None.\nEVIDENCE:\n- a.py:1 ok\n"
    "RISKS: none\nBLOCKERS: None."
)


def for_task(word: str):
    """Route requests of the child whose assignment mentions `word`."""
    return lambda body: any(
        f"Task:\n{word}" in str(message.get("content")) for message in body["messages"]
    )


def last_tool_results(llm, word):
    """The tool results the child working on `word` saw in its latest request."""
    requests = [r for r in llm.requests if for_task(word)(r.json)]
    return [m["content"] for m in requests[-1].json["messages"] if m["role"] == "tool"]


@pytest.fixture
async def make_session(llm, tmp_path, monkeypatch, isolated_home):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "a.py").write_text("print('a')\n")
    sessions = []

    def make(mode: Mode = Mode.YOLO, config: str = "", approve: bool | str = False):
        """A runtime; `approve` answers every approval request ("approve_always" if True)."""
        if config:
            path = isolated_home / "config" / "config.toml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(config)
        seen: list[events.Event] = []

        def emit(event: events.Event) -> None:
            seen.append(event)
            if approve and isinstance(event, events.ApprovalRequested):
                event.resolve(approve if isinstance(approve, str) else "approve_always")

        session = open_runtime(
            workspace=workspace, mode=mode, emit=emit, retry_base_delay_secs=0.01
        )
        session.seen = seen
        sessions.append(session)
        return session

    yield make
    for session in sessions:
        await session.manager.flush()  # a coalesced write may still be waiting
        session.writer.close()


def envelopes(session, kind=None):
    found = [e.envelope() for e in session.seen if isinstance(e, events.AgentEvent)]
    return [e for e in found if kind is None or e["kind"] == kind]


async def wait_done(session, agent_id, timeout_ms=120_000):
    """The child's result once it ends; the default is a ceiling for a hang, generous so
    that a loaded machine does not turn a slow child into a failure."""
    return await session.manager.evaluate(
        {"agent_id": agent_id, "block": True, "timeout_ms": timeout_ms}
    )
