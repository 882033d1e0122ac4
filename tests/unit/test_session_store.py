"""The session store's rules on real files: what loads, what is set aside, who writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from codewhale.sessions.store import SessionStore

SYSTEM = {"role": "system", "content": "s"}
CALL = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def write_session(store: SessionStore, workspace, messages):
    info, writer = store.create(workspace, "m")
    writer.record_messages(messages)
    writer.close()
    return info


def test_wrong_typed_messages_are_skipped_with_one_warning_naming_each(tmp_path):
    store = SessionStore(tmp_path / "data")
    good = [SYSTEM, {"role": "user", "content": "hi"}]
    info = write_session(store, tmp_path, good)
    with info.path.open("a") as handle:
        for bad in (5, {"role": 7}, {"role": "tool", "content": "no call id"}, {"role": "user"}):
            handle.write(json.dumps({"kind": "message", "message": bad}) + "\n")
        handle.write(json.dumps({"kind": "message", "message": good[1]}) + "\n")
    loaded = store.load(info.id)
    assert loaded.messages == [*good, good[1]]
    (warning,) = loaded.warnings
    assert warning.count("a message of the wrong shape") == 3  # and one more, counted
    assert "line 4: a message of the wrong shape" in warning  # after the header and 2 good
    assert "line 6: a message of the wrong shape (tool.tool_call_id: is missing)" in warning
    assert "and 1 more" in warning


def test_keys_the_engine_does_not_write_are_kept_in_the_file_but_not_sent(tmp_path):
    store = SessionStore(tmp_path / "data")
    call = {"role": "assistant", "content": None, "tool_calls": [CALL], "future_key": [1]}
    info = write_session(store, tmp_path, [SYSTEM, call])
    loaded = store.load(info.id)
    assert loaded.warnings == []
    assert loaded.messages[1] == {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert loaded.sizes[1] is None  # its line's size is not the message's any more
    assert "future_key" in info.path.read_text()


def test_a_session_whose_header_and_workspace_are_lost_is_listed_everywhere_but_not_continued(
    tmp_path,
):
    store = SessionStore(tmp_path / "data")
    workspace = tmp_path / "ws"
    info = write_session(store, workspace, [SYSTEM, {"role": "user", "content": "hi"}])
    lines = info.path.read_text().split("\n")
    info.path.write_text("\n".join(["not json", *lines[1:]]))
    (listed,) = store.list(tmp_path / "elsewhere")
    assert listed.id == info.id and listed.recovered and listed.workspace == ""
    assert listed.title == "hi"
    assert store.latest(workspace) is None
    # Resuming it from a workspace repairs it there.
    resumed = store.resume(info.id, workspace, "m")
    resumed.writer.close()
    assert store.latest(workspace) == store.info(info.id)
    assert not store.info(info.id).recovered


def test_a_file_with_nothing_of_a_session_in_it_is_not_one(tmp_path):
    store = SessionStore(tmp_path / "data")
    store.root.mkdir(parents=True)
    (store.root / "sess_x.jsonl").write_bytes(b"\x00\x01\xff\n{}\n")
    assert store.list() == []


def test_a_session_held_by_another_process_is_forked_with_its_conversation(tmp_path):
    store = SessionStore(tmp_path / "data")
    messages = [SYSTEM, {"role": "user", "content": "hi"}]
    info = write_session(store, tmp_path, messages)
    # Another process takes the session and keeps it until told to let go.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path\n"
            "from codewhale.sessions.store import SessionStore\n"
            "taken = SessionStore(Path(sys.argv[1])).resume(sys.argv[2], Path(sys.argv[3]), 'm')\n"
            "print('taken', flush=True)\n"
            "sys.stdin.readline()\n"
            "taken.writer.close()\n",
            str(tmp_path / "data"),
            info.id,
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "taken\n"
        resumed = store.resume(info.id, tmp_path, "m")
        resumed.writer.close()
    finally:
        holder.communicate("\n", timeout=30)
    fork = resumed.loaded.info
    assert fork.id != info.id and fork.path != info.path
    assert resumed.loaded.messages == messages
    assert "is open in another CodeWhale process" in resumed.loaded.warnings[-1]
    assert store.load(fork.id).messages == messages
    assert os.stat(fork.path).st_mode & 0o777 == 0o600
    # Once the other process let go, the session is taken, not forked.
    again = store.resume(info.id, tmp_path, "m")
    again.writer.close()
    assert again.loaded.info.id == info.id


def test_a_call_whose_result_line_is_lost_is_answered_and_a_result_without_call_dropped(tmp_path):
    """Providers refuse a conversation with an unanswered call or an answer without one."""
    store = SessionStore(tmp_path / "data")
    other = {**CALL, "id": "c2"}
    messages = [
        SYSTEM,
        {"role": "user", "content": "read"},
        {"role": "assistant", "content": None, "tool_calls": [CALL, other]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c2", "content": "b.py"},
        {"role": "assistant", "content": "done"},
    ]
    info = write_session(store, tmp_path, messages)
    lines = info.path.read_text().splitlines()
    torn = [line for line in lines if '"tool_call_id": "c2"' not in line]
    assert len(torn) == len(lines) - 1
    stray = {"kind": "message", "message": {"role": "tool", "tool_call_id": "gone", "content": "x"}}
    info.path.write_text("\n".join([*torn, json.dumps(stray)]) + "\n")
    loaded = store.load(info.id)
    answers = [m for m in loaded.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == ["c1", "c2"]
    assert answers[1]["content"].startswith("[no result: it was lost")
    assert loaded.messages.index(answers[1]) == 4  # right after its sibling, before "done"
    assert len(loaded.sizes) == len(loaded.messages)
