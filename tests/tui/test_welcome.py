"""The start screen: it shows the setup, guides a user with no key, and quits cleanly."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.welcome import describe_setup

SNAPSHOT_WORKSPACE = Path(tempfile.gettempdir()) / "codewhale-snapshot-workspace"


@pytest.fixture
def workspace():
    SNAPSHOT_WORKSPACE.mkdir(exist_ok=True)
    return SNAPSHOT_WORKSPACE


def test_welcome_screen_snapshot(snap_compare, workspace, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-snapshot-000000000000")
    app = CodeWhaleApp(load_config(workspace=workspace))
    assert snap_compare(app, terminal_size=(100, 20))


def test_without_a_key_the_screen_says_how_to_configure_one(tmp_path):
    loaded = load_config(workspace=tmp_path)
    text = describe_setup(loaded).plain
    assert "not configured" in text
    assert "DEEPSEEK_API_KEY" in text
    assert str(loaded.user_file) in text


async def test_ctrl_q_quits(tmp_path):
    app = CodeWhaleApp(load_config(workspace=tmp_path))
    async with app.run_test() as pilot:
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert app.return_code in (0, None)
    assert not app.is_running


def _read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


@pytest.mark.slow
def test_the_real_app_starts_in_a_terminal_and_quits_on_ctrl_q(tmp_path):
    controller, terminal = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    process = subprocess.Popen(
        [sys.executable, "-m", "codewhale", "-C", str(tmp_path)],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=env,
        close_fds=True,
    )
    os.close(terminal)
    try:
        screen = _read_until(controller, b"Ctrl+Q", timeout=20)
        assert b"Ctrl+Q" in screen, screen[-500:]
        os.write(controller, b"\x11")
        assert process.wait(timeout=10) == 0
        rest = _read_until(controller, b"Traceback", timeout=0.5)
        assert b"Traceback" not in screen + rest
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
