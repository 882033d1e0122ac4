"""Files the disk stops taking: the app says so and goes on.

The fault is real: this process's file size limit (RLIMIT_FSIZE) is set below what the
next write of the file needs, so it fails with EFBIG; Python ignores SIGXFSZ, which
would otherwise end the process. The limit is restored afterwards.
"""

from __future__ import annotations

import pytest

from codewhale.config import load_config
from codewhale.sessions.store import SessionStore
from codewhale.tui.answer import AssistantMessage
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.onboarding import OnboardingScreen
from tests.support.llm_server import Reply
from tests.tui.conftest import type_and_send, wait_for

resource = pytest.importorskip("resource")  # POSIX: RLIMIT_FSIZE

# A resumed session's own lines are large (a long system prompt is never rebuilt on
# screen), so the files the test process writes meanwhile stay far below the limit.
SYSTEM = "You are CodeWhale.\n" + "context " * 12_000


@pytest.fixture
def file_size_limit():
    """Sets this process's file size limit (None: the one it had), which comes back after
    the test in any case."""
    before = resource.getrlimit(resource.RLIMIT_FSIZE)

    def limit(size: int | None) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, before if size is None else (size, before[1]))

    yield limit
    resource.setrlimit(resource.RLIMIT_FSIZE, before)


async def test_a_failed_save_is_said_until_the_app_closes_and_it_keeps_answering(
    llm, make_app, workspace, isolated_home, file_size_limit
):
    store = SessionStore(isolated_home / "data")
    info, writer = store.create(workspace, "deepseek-v4-flash")
    writer.record_messages([{"role": "system", "content": SYSTEM}])
    writer.close()
    llm.enqueue(Reply(text="first answer " * 40), Reply(text="second answer"))
    # make_app has pointed the environment at the loopback model; this app resumes.
    app = CodeWhaleApp(load_config(workspace=workspace), workspace, continue_latest=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        # The prompt's lines fit; the answer's do not.
        file_size_limit(info.path.stat().st_size + 300)
        await type_and_send(pilot, "first")
        await wait_for(pilot, lambda: bool(app.query("#storage-problem")))
        notice = str(app.query_one("#storage-problem").content)
        assert notice.startswith(f"Not saved: could not save the session to {info.path}: ")
        assert "File too large" in notice and "goes on in memory" in notice
        await wait_for(pilot, lambda: not app.turn_running)

        await type_and_send(pilot, "second")
        await wait_for(pilot, lambda: not app.turn_running and len(llm.requests) == 2)
        await wait_for(pilot, lambda: "second answer" in app.query(AssistantMessage).last().answer)
        # In memory, the whole conversation went to the model.
        sent = [m["content"] for m in llm.requests[1].json["messages"][1:]]
        assert sent == ["first", "first answer " * 40, "second"]
        assert len(app.query("#storage-problem")) == 1  # still there, said once
        await app.action_quit()
    # What was written before the failure loads as it was.
    loaded = store.load(info.id)
    assert loaded.warnings == []
    assert [m["content"] for m in loaded.messages[1:]] == ["first"]


async def test_a_key_the_disk_refuses_is_said_and_the_dialog_stays(
    llm, monkeypatch, workspace, isolated_home, file_size_limit
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardingScreen))
        await pilot.click("#key")
        await pilot.press(*"sk-typed-key-123456")
        file_size_limit(16)  # the config file's line is longer: EFBIG
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(n.severity == "error" for n in app._notifications))
        file_size_limit(None)
        assert isinstance(app.screen, OnboardingScreen)
        (note,) = [n.message for n in app._notifications if n.severity == "error"]
        path = isolated_home / "config" / "config.toml"
        assert note.startswith(f"Could not save to {path}: File too large. ")
        assert "press Esc" in note and not path.exists()
        await pilot.press("escape")  # on without a key: the app still runs
        await wait_for(pilot, lambda: not isinstance(app.screen, OnboardingScreen))
        await app.action_quit()
