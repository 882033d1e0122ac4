"""A disk that refuses the session file costs the answer nothing (issue 27, item 4).

Real `codewhale exec` processes whose data folder is a full tmpfs (ENOSPC), a read-only
bind (EROFS) or past a file size limit (EFBIG), against the loopback model streaming a
400 KB answer: the whole answer is printed, then one line naming the file and the
error, the exit status is 1, and no traceback. What was written stays loadable.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from codewhale.sessions.store import SessionStore
from tests.support.disk_faults import can_mount, full_disk, in_namespace, read_only, size_limited
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task

# 400 KB in 400 lines, streamed in 4 KB chunks.
ANSWER = "".join(f"{n:04d} " + "0123456789abcdef" * 64 + "\n" for n in range(400)).rstrip()
needs_mounts = pytest.mark.skipif(not can_mount(), reason="cannot mount in a user namespace")
# A ceiling for a hung run, not a measure: a run takes seconds, longer on a loaded machine.
RUN_CEILING_SECS = 600


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True, mode=0o700)
    return home


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.fixture
def run(llm, home, workspace):
    env = app_environment(
        CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url, DEEPSEEK_API_KEY=TEST_KEY
    )

    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=RUN_CEILING_SECS
        )

    return run


def codewhale(workspace: Path, *arguments: str) -> list[str]:
    return ["-m", "codewhale", "exec", "-C", str(workspace), *arguments]


def assert_answer_then_one_error(done: subprocess.CompletedProcess[str], reason: str) -> str:
    """The whole answer on stdout, one `codewhale:` line naming the session file and
    `reason` on stderr, exit 1, no traceback; returns the file's path."""
    assert done.stdout.rstrip("\n") == ANSWER
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("codewhale:")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith("codewhale: could not save the session to ")
    assert errors[0].endswith(f": {reason}")
    assert done.returncode == 1
    return errors[0].removeprefix("codewhale: could not save the session to ").rsplit(": ", 1)[0]


def assert_loadable(sessions: Path, session_file: str) -> None:
    """The file cut back to its last whole line: it loads with no warning."""
    loaded = SessionStore(sessions.parent).load(Path(session_file).stem)
    assert loaded.warnings == []
    assert [m["role"] for m in loaded.messages] == ["system", "user"]
    assert loaded.messages[1]["content"] == "say it"


@needs_mounts
def test_a_full_disk_prints_the_whole_answer_and_one_line(llm, run, home, workspace, tmp_path):
    llm.enqueue(Reply(text=ANSWER, chunk_size=4096))
    sessions, kept = home / "data" / "sessions", tmp_path / "kept" / "sessions"
    kept.parent.mkdir()
    # The tmpfs goes with the namespace: what it held is copied out first.
    command = in_namespace(
        [sys.executable, *codewhale(workspace, "say it")],
        setup=full_disk(sessions.parent),
        after=f"cp -a {shlex.quote(str(sessions))} {shlex.quote(str(kept))}",
    )
    done = run(command)
    session_file = assert_answer_then_one_error(done, "No space left on device")
    assert_loadable(kept, session_file)


@needs_mounts
def test_a_read_only_disk_prints_the_whole_answer_and_one_line(llm, run, home, workspace):
    llm.enqueue(Reply(text=ANSWER, chunk_size=4096))
    command = in_namespace(
        [sys.executable, *codewhale(workspace, "say it")], setup=read_only(home / "data")
    )
    assert_answer_then_one_error(run(command), "Read-only file system")


def test_a_file_size_limit_prints_the_whole_answer_and_one_line(llm, run, home, workspace):
    llm.enqueue(Reply(text=ANSWER, chunk_size=4096))
    done = run(size_limited(200_000, codewhale(workspace, "say it")))
    session_file = assert_answer_then_one_error(done, "File too large")
    assert_loadable(home / "data" / "sessions", session_file)


@needs_mounts
def test_json_gets_a_storage_error_record_before_the_result(llm, run, home, workspace):
    llm.enqueue(Reply(text=ANSWER, chunk_size=4096))
    command = in_namespace(
        [sys.executable, *codewhale(workspace, "--json", "say it")],
        setup=read_only(home / "data"),
    )
    done = run(command)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert records[0]["type"] == "session" and records[-1]["type"] == "result"
    assert records[-1]["final_text"] == ANSWER
    (error,) = [r for r in records if r["type"] == "storage_error"]
    assert error["reason"] == "Read-only file system"
    assert error["path"].startswith(str(home / "data" / "sessions"))
    assert error["message"] == f"could not save the session to {error['path']}: {error['reason']}"


@needs_mounts
def test_a_read_only_disk_under_a_resumed_session_keeps_it_as_it_was(llm, run, home, workspace):
    llm.enqueue(Reply(text="first answer"), Reply(text=ANSWER, chunk_size=4096))
    first = run([sys.executable, *codewhale(workspace, "say it")])
    assert first.returncode == 0, first.stderr
    (path,) = (home / "data" / "sessions").glob("sess_*.jsonl")
    before = path.read_bytes()
    command = in_namespace(
        [sys.executable, *codewhale(workspace, "--continue", "go on")],
        setup=read_only(home / "data"),
    )
    done = run(command)
    assert assert_answer_then_one_error(done, "Read-only file system") == str(path)
    assert path.read_bytes() == before
    assert llm.requests[-1].json["messages"][-2]["content"] == "first answer"


@needs_mounts
def test_a_read_only_sub_agent_state_is_said_the_same_way(llm, run, workspace):
    """The workspace's sub-agent state refuses the child's files: the child fails with
    the reason, the parent's answer is printed, and the same one line is said."""
    state = workspace / ".codewhale" / "state"
    state.mkdir(parents=True)
    llm.route(for_task("look"), Reply(text=REPORT))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "look", "type": "explore"})])
    )
    # However the child's failure and the parent's answer interleave, the parent answers.
    llm.respond = lambda body: Reply(text="the parent's answer")
    command = in_namespace([sys.executable, *codewhale(workspace, "delegate")], read_only(state))
    done = run(command)
    assert done.stdout.strip() == "the parent's answer"
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("codewhale:")]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"codewhale: could not write {state}/")
    assert errors[0].endswith(": Read-only file system")
    assert done.returncode == 1
