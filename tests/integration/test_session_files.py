"""Session files as real `codewhale exec` processes leave and read them (issue 27).

Each kind of damage (wrong-typed records, a byte that is not UTF-8, a torn last line, a
damaged header) still lets `sessions list` and `--continue` work: the damaged file is
copied aside, rewritten without its damaged lines, and nothing wrong-typed reaches the
model. Two processes on one session never interleave: the second goes on in a fork.
A 20 MB tool argument is stored once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from codewhale.sessions.store import SessionStore
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment

ROLES = {"system", "user", "assistant", "tool"}


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def codewhale(llm, home, workspace) -> Callable[..., subprocess.CompletedProcess[str]]:
    env = app_environment(
        CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url, DEEPSEEK_API_KEY=TEST_KEY
    )

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "codewhale", "-C", str(workspace), *arguments]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)

    run.env = env  # type: ignore[attr-defined]
    return run


def one_session(home: Path) -> Path:
    (path,) = (home / "data" / "sessions").glob("sess_*.jsonl")
    return path


def assert_well_formed(messages: list) -> None:
    """What the provider was sent: only messages of the shapes the engine writes."""
    for message in messages:
        assert isinstance(message, dict) and message["role"] in ROLES, message
        content = message.get("content")
        assert isinstance(content, str) or (message["role"] == "assistant" and content is None)


# -- damage ------------------------------------------------------------------------------


def wrong_types(lines: list[bytes]) -> list[bytes]:
    return [
        *lines,
        b'{"kind": "message", "message": 5}',
        b'{"kind": "message", "message": {"role": 7}}',
        b'{"kind": "message", "message": {"role": "user", "content": 5}}',
        b"5",
        b"null",
    ]


def binary_byte(lines: list[bytes]) -> list[bytes]:
    # One byte flipped inside a prompt, one in the middle of a record's syntax.
    user = next(i for i, line in enumerate(lines) if b'"role": "user"' in line)
    lines[user] = lines[user].replace(b"first prompt", b"first \xffprompt")
    return [*lines, b'{"kind": "me\x00\xfessage"}']


def torn_last_line(lines: list[bytes]) -> list[bytes]:
    return [*lines, b'{"kind": "message", "message": {"role": "assis']


def damaged_header(lines: list[bytes]) -> list[bytes]:
    return [lines[0][:25], *lines[1:]]


@pytest.mark.parametrize("damage", [wrong_types, binary_byte, torn_last_line, damaged_header])
def test_a_damaged_session_is_listed_continued_and_set_aside(llm, codewhale, home, damage):
    llm.enqueue(Reply(text="first answer"), Reply(text="second answer"))
    assert codewhale("exec", "first prompt").returncode == 0
    path = one_session(home)
    lines = path.read_bytes().rstrip(b"\n").split(b"\n")
    damaged = b"\n".join(damage(lines))  # a torn line has no newline after it
    path.write_bytes(damaged)

    listed = codewhale("sessions", "list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert path.stem in listed.stdout and "first" in listed.stdout

    done = codewhale("exec", "--continue", "second prompt")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "second answer"
    assert "damaged lines skipped" in done.stderr and "Traceback" not in done.stderr
    sent = llm.requests[-1].json["messages"]
    assert_well_formed(sent)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"].startswith("first ") and sent[2]["content"] == "first answer"

    (aside,) = path.parent.glob(f"{path.name}.damaged-*")
    assert aside.read_bytes() == damaged
    assert aside.stat().st_mode & 0o777 == 0o600
    # Rewritten: it loads without a warning, with the whole conversation.
    loaded = SessionStore(home / "data").load(path.stem)
    assert loaded.warnings == [] and not loaded.info.recovered
    assert [m.get("content") for m in loaded.messages[2:]] == [
        "first answer",
        "second prompt",
        "second answer",
    ]
    assert "header damaged" not in codewhale("sessions", "list").stdout


def test_a_damaged_header_is_listed_with_how_to_repair_it(llm, codewhale, home, workspace):
    llm.enqueue(Reply(text="first answer"))
    assert codewhale("exec", "first prompt").returncode == 0
    path = one_session(home)
    path.write_bytes(b"\x00garbage\n" + path.read_bytes().split(b"\n", 1)[1])
    listed = codewhale("sessions", "list").stdout
    assert f"{path.stem}" in listed
    assert f"[header damaged: `codewhale --resume {path.stem}` repairs it]" in listed
    assert "first prompt" in listed


# -- one writer per session --------------------------------------------------------------


def test_a_second_process_on_a_session_in_use_goes_on_in_a_fork(llm, codewhale, home, workspace):
    llm.enqueue(Reply(text="first answer"))
    assert codewhale("exec", "first prompt").returncode == 0
    original = one_session(home)
    # The first process holds the session while its shell command waits on a FIFO.
    fifo = workspace / "go"
    os.mkfifo(fifo)
    llm.route(
        lambda body: body["messages"][-1].get("content") == "held prompt",
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "cat go"})]),
    )
    llm.route(lambda body: body["messages"][-1]["role"] == "tool", Reply(text="held answer"))
    llm.route(
        lambda body: body["messages"][-1]["content"] == "forked prompt",
        Reply(text="forked answer"),
    )
    command = [sys.executable, "-m", "codewhale", "-C", str(workspace), "exec"]
    first = subprocess.Popen(
        [*command, "--approve", "auto", "--continue", "held prompt"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=codewhale.env,
    )
    try:
        go = writer_of(fifo, first)  # the first process is inside its command
        second = codewhale("exec", "--continue", "--json", "forked prompt")
        os.write(go, b"done\n")
        os.close(go)
        out, err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 0, err
    assert out.strip() == "held answer"

    assert second.returncode == 0, second.stderr
    assert f"session {original.stem} is open in another CodeWhale process" in second.stderr
    session = json.loads(second.stdout.splitlines()[0])
    fork = session["session_id"]
    assert fork != original.stem
    forked_request = next(
        r for r in llm.requests if r.json["messages"][-1]["content"] == "forked prompt"
    )
    # A copy of the conversation as the first process had saved it: its prompt, so far.
    assert [m["content"] for m in forked_request.json["messages"][1:]] == [
        "first prompt",
        "first answer",
        "held prompt",
        "forked prompt",
    ]
    # Both files whole, each with its own continuation.
    store = SessionStore(home / "data")
    kept, forked = store.load(original.stem), store.load(fork)
    assert kept.warnings == forked.warnings == []
    assert [m["role"] for m in kept.messages[3:]] == ["user", "assistant", "tool", "assistant"]
    assert kept.messages[3]["content"] == "held prompt"
    assert kept.messages[5]["content"].endswith("done")  # what `cat go` read
    assert kept.messages[6]["content"] == "held answer"
    assert [m["content"] for m in forked.messages[1:]] == [
        "first prompt",
        "first answer",
        "held prompt",
        "forked prompt",
        "forked answer",
    ]
    header = json.loads(Path(forked.info.path).read_text().split("\n", 1)[0])
    assert header["forked_from"] == original.stem


def writer_of(fifo: Path, reader: subprocess.Popen[str], timeout: float = 60) -> int:
    """The FIFO opened for writing once `reader` (a process) has opened it to read."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader yet
            assert reader.poll() is None, reader.communicate()
            assert time.monotonic() < deadline, "the reader never opened the FIFO"
            time.sleep(0.05)


# -- each payload once -------------------------------------------------------------------


def test_a_20_mb_tool_argument_is_stored_once(llm, codewhale, home, workspace):
    payload = "x" * (20 * 1024 * 1024)
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "big.txt", "content": payload})]),
        Reply(text="written"),
    )
    done = codewhale("exec", "--approve", "auto", "write it")
    assert done.returncode == 0, done.stderr
    assert (workspace / "big.txt").stat().st_size == len(payload)
    size = os.path.getsize(one_session(home))
    assert size < 1.2 * len(payload), size / len(payload)
