"""`codewhale` in real processes: what it refuses before the full-screen app, and why.

The checks run in this order: workspace, config, `--resume` id, API key, terminal. A
problem that would stop the app in any terminal names its own fix first, so these run
without a terminal; the terminal check is last.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codewhale.cli import parse_arguments
from tests.support.llm_server import Reply
from tests.support.settings import TEST_KEY, app_environment
from tests.support.terminal import read_until, start_on_terminal

# The offline model made unavailable the way a plain `pip install codewhale` leaves it:
# llama-cpp-python cannot be imported (None in sys.modules makes find_spec answer None).
WITHOUT_OFFLINE_MODEL = (
    "import sys; sys.modules['llama_cpp'] = None; from codewhale.cli import main; sys.exit(main())"
)


def run(args: list[str], env: dict[str, str], *, program: list[str] | None = None):
    """`codewhale ARGS` with stdin from /dev/null and output captured: no terminal at all."""
    return subprocess.run(
        [*(program or [sys.executable, "-m", "codewhale"]), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def keyed(home) -> dict[str, str]:
    return app_environment(CODEWHALE_HOME=str(home), DEEPSEEK_API_KEY=TEST_KEY)


def test_without_a_terminal_it_points_to_exec_in_one_line(keyed, tmp_path):
    result = run(["-C", str(tmp_path), "hello"], keyed)
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "needs a terminal" in line and "codewhale exec" in line
    assert "\x1b[" not in result.stderr  # nothing full-screen was drawn


def test_an_unknown_session_id_is_named_with_how_to_list_sessions(keyed, tmp_path):
    result = run(["-C", str(tmp_path), "--resume", "nope"], keyed)
    assert result.returncode == 2
    assert "'nope'" in result.stderr and "codewhale sessions list" in result.stderr
    assert "needs a terminal" not in result.stderr and "Traceback" not in result.stderr


def test_a_missing_key_with_the_offline_model_turned_off_says_how_to_fix_it(home, tmp_path):
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text("offline_fallback = false\n")
    result = run(["-C", str(tmp_path)], app_environment(CODEWHALE_HOME=str(home)))
    assert result.returncode == 2
    message = result.stderr
    assert message.startswith("codewhale: DeepSeek needs an API key")
    assert "export DEEPSEEK_API_KEY=" in message and "codewhale config init" in message
    assert str(home / "config" / "config.toml") in message
    assert "codewhale --provider local" in message  # installed here, only turned off


def test_a_missing_key_without_the_offline_model_says_how_to_install_it(home, tmp_path):
    env = app_environment(CODEWHALE_HOME=str(home))
    result = run(["-C", str(tmp_path)], env, program=[sys.executable, "-c", WITHOUT_OFFLINE_MODEL])
    assert result.returncode == 2
    assert "DeepSeek needs an API key" in result.stderr
    assert "export DEEPSEEK_API_KEY=" in result.stderr and "make local" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_prompt_and_the_subcommands_share_the_command_line(tmp_path):
    assert parse_arguments(["fix the bug"]).prompt == "fix the bug"
    assert parse_arguments(["--model", "m", "-C", str(tmp_path), "fix it"]).prompt == "fix it"
    launched = parse_arguments(["--", "exec"])
    assert launched.command is None and launched.prompt == "exec"
    executed = parse_arguments(["--model", "m", "exec", "--json", "fix it"])
    assert executed.command == "exec" and executed.prompt == "fix it" and executed.json
    assert parse_arguments(["--continue"]).command is None


def test_unquoted_words_are_refused_with_the_quoted_form(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_arguments(["fix", "the", "bug"])
    assert exit_info.value.code == 2
    assert 'codewhale "fix the bug"' in capsys.readouterr().err


def in_terminal(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """`codewhale ARGS` on a new pseudo-terminal; returns it and the terminal's other end."""
    return start_on_terminal([sys.executable, "-m", "codewhale", *args], env)


@pytest.mark.slow
def test_in_a_terminal_the_prompt_is_the_first_turn_and_ctrl_c_twice_quits(llm, home, tmp_path):
    llm.enqueue(Reply(text="pong-from-loopback"))
    env = app_environment(
        CODEWHALE_HOME=str(home),
        DEEPSEEK_API_KEY=TEST_KEY,
        CODEWHALE_BASE_URL=llm.base_url,
        TERM="xterm-256color",
    )
    process, controller = in_terminal(["-C", str(tmp_path), "ping"], env)
    try:
        screen = read_until(controller, b"pong-from-loopback", timeout=120)
        assert b"pong-from-loopback" in screen, screen[-800:]
        assert [r.json["messages"][-1] for r in llm.requests] == [
            {"role": "user", "content": "ping"}
        ]
        os.write(controller, b"\x03\x03")  # Ctrl+C twice, as the terminal sends it
        assert process.wait(timeout=60) == 0
        assert b"Traceback" not in screen + read_until(controller, b"Traceback", timeout=0.5)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
    # A first launch: the forked checks passed and wrote the receipt the next start uses.
    assert (home / "state" / "launch-checks.json").is_file()


@pytest.mark.slow
def test_in_a_terminal_a_broken_config_is_refused_before_the_app_appears(keyed, home, tmp_path):
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[network]\nmax_retries = 'many'\n")
    process, controller = in_terminal(["-C", str(tmp_path)], {**keyed, "TERM": "xterm-256color"})
    try:
        assert process.wait(timeout=60) == 2
        screen = read_until(controller, b"\n", timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
    # Found by the forked checks, printed as one plain line: no full-screen app came up.
    assert screen.startswith(b"codewhale: config error:"), screen
    assert b"max_retries" in screen
    assert b"\x1b[?1049h" not in screen  # the alternate screen was never entered
    assert not (home / "state" / "launch-checks.json").exists()


@pytest.mark.slow
def test_continue_with_nothing_to_continue_starts_a_session_and_names_it_on_exit(
    llm, home, tmp_path
):
    usage = {"prompt_tokens": 1200, "completion_tokens": 300}
    llm.enqueue(Reply(text="pong-from-loopback", usage=usage))
    env = app_environment(
        CODEWHALE_HOME=str(home),
        DEEPSEEK_API_KEY=TEST_KEY,
        CODEWHALE_BASE_URL=llm.base_url,
        TERM="xterm-256color",
    )
    process, controller = in_terminal(["-C", str(tmp_path), "--continue", "ping"], env)
    try:
        screen = read_until(controller, b"pong-from-loopback", timeout=120)
        assert b"pong-from-loopback" in screen, screen[-800:]
        assert b"no earlier session here: started a new one" in screen
        os.write(controller, b"\x03\x03")  # Ctrl+C twice quits
        after = read_until(controller, b"codewhale --resume", timeout=60)
        assert process.wait(timeout=60) == 0
        after += read_until(controller, b"\n", timeout=0.5)  # the rest of the last line
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)
    (session,) = (home / "data" / "sessions").glob("*.jsonl")
    # Printed once Textual gave the terminal back: the session, its spend, the way back.
    summary = after.decode(errors="replace").split(f"session {session.stem}: ", 1)[1]
    assert summary.startswith("1,200 tokens in, 300 out, $")
    assert f"resume it with: codewhale -C {tmp_path} --resume {session.stem}" in summary
