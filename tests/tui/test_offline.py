"""The app with nothing configured, answering on the real offline model."""

from __future__ import annotations

import pytest

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.onboarding import OnboardingScreen
from codewhale.tui.transcript import AssistantMessage
from tests.tui.conftest import type_and_send, wait_for

pytestmark = [pytest.mark.localmodel, pytest.mark.slow, pytest.mark.xdist_group("localmodel")]


async def test_a_fresh_install_with_no_key_answers_on_the_offline_model(workspace):
    app = CodeWhaleApp(load_config(workspace=workspace), workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardingScreen))
        await pilot.click("#skip")
        await wait_for(pilot, lambda: not isinstance(app.screen, OnboardingScreen))
        assert "offline 135M model" in str(app.query_one("#status").render())
        assert app.runtime.local_server is not None and not app.runtime.local_server.running
        app.runtime.set_mode(Mode.PLAN)  # read-only tools: no approval dialogs to answer
        await type_and_send(pilot, "Say hello.")
        await wait_for(pilot, lambda: app.runtime.local_server.running, timeout=30)
        await wait_for(
            pilot,
            lambda: (
                not app.turn_running and any(m.answer.strip() for m in app.query(AssistantMessage))
            ),
            timeout=300,
        )
        server = app.runtime.local_server
        app.exit()  # not the quit action: closing the session must not depend on it
    assert not server.running
