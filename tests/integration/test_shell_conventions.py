"""Terminal conventions (issue 29): a dumb terminal gets `exec` instead of a broken
full screen, and the shells get completion scripts that really complete."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests.support.settings import TEST_KEY, app_environment


def test_a_dumb_terminal_is_pointed_to_exec_not_given_a_full_screen(tmp_path):
    env = app_environment(CODEWHALE_HOME=str(tmp_path / "home"), DEEPSEEK_API_KEY=TEST_KEY)
    env["TERM"] = "dumb"
    # A real terminal on every stream: only TERM says the app cannot draw there.
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "codewhale", "-C", str(tmp_path)],
            stdin=follower,
            stdout=follower,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
            text=True,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert result.returncode == 2
    assert "TERM=dumb" in result.stderr and "codewhale exec" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_each_shell(shell):
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "completion", shell],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "codewhale" in result.stdout and "_ARGCOMPLETE" in result.stdout


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("codewhale ex", {"exec"}),
        ("codewhale config ", {"show", "path", "init", "example"}),
        ("codewhale exec --appr", {"--approve"}),
    ],
)
def test_the_completion_protocol_answers_as_the_scripts_ask_it(tmp_path, line, expected):
    """What the shell scripts run on Tab: the program itself, told the line so far."""
    answer = tmp_path / "answer"
    env = {
        **os.environ,
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
    }
    result = subprocess.run(
        [sys.executable, "-m", "codewhale"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    offered = {word.strip() for word in answer.read_text().splitlines() if word.strip()}
    assert expected <= offered, offered
