"""Hooks in Claude Code's format under a real `codewhale exec` and the loopback model.

A user-level PreToolUse hook on `Bash` stops `rm` in YOLO mode and its stderr is the
result the model reads; a PostToolUse hook gets every call's JSON; a SubagentStop hook
that exits 2 sends a child back to work exactly once; a UserPromptSubmit hook refuses a
prompt before any request; a project's hooks run only once the user trusts them.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from codewhale.engine.turn_hooks import MAX_STOP_CONTINUATIONS
from codewhale.permissions import Mode
from codewhale.runtime import events
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task

PYTHON = sys.executable
# Refuses any Bash command starting with rm; stderr is the reason the model reads.
GUARD = """
import json, sys
call = json.load(sys.stdin)
if call["tool_input"]["command"].lstrip().startswith("rm"):
    print("no rm here: move files to trash/ instead", file=sys.stderr)
    sys.exit(2)
"""
# Appends the JSON it got on stdin, one line per run, to the file named by argv[1].
RECORD = """
import sys
with open(sys.argv[1], "a") as log:
    log.write(sys.stdin.read().strip() + "\\n")
"""
# Sends the agent back once: the second stop arrives with stop_hook_active true.
ONCE_MORE = """
import json, sys
stop = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(json.dumps(stop) + "\\n")
if not stop["stop_hook_active"]:
    print("also look at b.py before you report", file=sys.stderr)
    sys.exit(2)
"""
REFUSE = "import sys; print('prompts about secrets are refused', file=sys.stderr); sys.exit(2)"


def script(tmp_path: Path, name: str, text: str) -> str:
    """A hook command running `text` as a Python file."""
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return f"{PYTHON} {path}"


def hooks_of(event: str, command: str, matcher: str | None = None) -> dict:
    group: dict = {"hooks": [{"type": "command", "command": command, "timeout": 30}]}
    if matcher is not None:
        group["matcher"] = matcher
    return {"hooks": {event: [group]}}


def make_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "a.py").write_text("print('a')\n")
    return workspace


def run_exec(
    llm,
    tmp_path: Path,
    workspace: Path,
    *,
    user_settings: dict | None = None,
    prompt: str = "tidy up",
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True, exist_ok=True)
    # Unsandboxed, so an `rm` that got through would really delete the file.
    (home / "config" / "config.toml").write_text("[sandbox]\nenabled = false\n")
    claude = tmp_path / "claude-user"
    claude.mkdir(exist_ok=True)
    if user_settings is not None:
        (claude / "settings.json").write_text(json.dumps(user_settings))
    done = subprocess.run(
        [
            PYTHON,
            "-m",
            "codewhale",
            "exec",
            "-C",
            str(workspace),
            "--json",
            "--mode",
            "yolo",
            prompt,
        ],
        capture_output=True,
        text=True,
        env=environment(llm, tmp_path),
        timeout=90,
    )
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, records


def environment(llm, tmp_path: Path) -> dict[str, str]:
    return app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude-user"),
    )


def hook_records(records: list[dict]) -> list[dict]:
    return [record for record in records if record["type"] == "hook"]


def test_a_user_pretooluse_hook_on_bash_blocks_rm_in_yolo_and_the_model_reads_why(llm, tmp_path):
    workspace = make_workspace(tmp_path)
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("exec_shell", {"command": "rm a.py"}),
                ToolCallSpec("exec_shell", {"command": "echo kept"}),
            ]
        ),
        Reply(text="done"),
    )
    guard = script(tmp_path, "guard", GUARD)
    done, records = run_exec(
        llm, tmp_path, workspace, user_settings=hooks_of("PreToolUse", guard, "Bash")
    )
    assert done.returncode == 0, done.stderr
    assert (workspace / "a.py").exists()
    results = [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    assert "no rm here: move files to trash/ instead" in results[0]
    assert results[0].startswith("Error: a PreToolUse hook blocked this exec_shell call")
    assert results[1].startswith("[exit code 0") and "kept" in results[1]
    outcomes = [(r["event"], r["outcome"]) for r in hook_records(records)]
    assert outcomes == [("PreToolUse", "blocked"), ("PreToolUse", "ok")]


def test_a_posttooluse_hook_receives_every_calls_json(llm, tmp_path):
    workspace = make_workspace(tmp_path)
    log = tmp_path / "calls.jsonl"
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "a.py"})]),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo hi"})]),
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "b.txt", "content": "b\n"})]),
        Reply(text="done"),
    )
    record = f"{script(tmp_path, 'record', RECORD)} {log}"
    done, records = run_exec(
        llm, tmp_path, workspace, user_settings=hooks_of("PostToolUse", record)
    )
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [call["tool_name"] for call in calls] == ["read_file", "exec_shell", "write_file"]
    session = records[0]["session_id"]
    for call in calls:
        assert call["hook_event_name"] == "PostToolUse"
        assert call["session_id"] == session and call["cwd"] == str(workspace)
        assert call["permission_mode"] == "bypassPermissions"
        assert call["tool_response"]["ok"] is True and call["tool_use_id"]
    assert calls[0]["tool_input"] == {"path": "a.py", "file_path": str(workspace / "a.py")}
    assert "print('a')" in calls[0]["tool_response"]["output"]
    assert calls[1]["tool_input"]["command"] == "echo hi"
    assert "hi" in calls[1]["tool_response"]["output"]
    assert calls[2]["tool_input"]["content"] == "b\n"


def test_a_subagentstop_hook_keeps_a_child_working_exactly_once(llm, tmp_path):
    workspace = make_workspace(tmp_path)
    log = tmp_path / "stops.jsonl"
    llm.route(for_task("check a.py"), Reply(text=REPORT), Reply(text=REPORT))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "check a.py", "type": "explore"})]),
        Reply(text="waiting for the child"),
        Reply(text="done"),
    )
    once = f"{script(tmp_path, 'once', ONCE_MORE)} {log}"
    done, _ = run_exec(llm, tmp_path, workspace, user_settings=hooks_of("SubagentStop", once))
    assert done.returncode == 0, done.stderr
    stops = [json.loads(line) for line in log.read_text().splitlines()]
    assert [stop["stop_hook_active"] for stop in stops] == [False, True]
    assert all(stop["agent_type"] == "explore" and stop["agent_id"] for stop in stops)
    child = [r.json for r in llm.requests if for_task("check a.py")(r.json)]
    assert len(child) == 2
    last = child[-1]["messages"][-1]
    assert last["role"] == "user"
    assert last["content"] == "[SubagentStop hook] also look at b.py before you report"


def test_a_userpromptsubmit_hook_refuses_the_prompt_before_any_request(llm, tmp_path):
    workspace = make_workspace(tmp_path)
    refuse = f'{PYTHON} -c "{REFUSE}"'
    settings = hooks_of("UserPromptSubmit", refuse)
    done, records = run_exec(llm, tmp_path, workspace, user_settings=settings)
    assert done.returncode == 1
    assert llm.requests == []
    assert records[-1]["status"] != "completed"
    errors = [r["message"] for r in records if r["type"] == "error"]
    assert errors == [
        "a UserPromptSubmit hook refused the prompt: prompts about secrets are refused"
    ]


def test_an_untrusted_projects_hooks_do_not_run_until_trusted(llm, tmp_path):
    workspace = make_workspace(tmp_path)
    marker = tmp_path / "ran.jsonl"
    record = f"{script(tmp_path, 'record', RECORD)} {marker}"
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps(hooks_of("PreToolUse", record, "Read"))
    )
    read = Reply(tool_calls=[ToolCallSpec("read_file", {"path": "a.py"})])
    llm.enqueue(read, Reply(text="done"))
    done, records = run_exec(llm, tmp_path, workspace)
    assert done.returncode == 0, done.stderr
    assert not marker.exists() and hook_records(records) == []
    assert "1 hook(s) in this project's files do not run until you trust them" in done.stderr

    trust = subprocess.run(
        [PYTHON, "-m", "codewhale", "hooks", "trust", "--all", "-C", str(workspace)],
        capture_output=True,
        text=True,
        env=environment(llm, tmp_path),
        timeout=60,
    )
    assert trust.returncode == 0, trust.stderr
    assert record in trust.stdout  # the command was shown before it was trusted
    llm.enqueue(read, Reply(text="done"))
    done, records = run_exec(llm, tmp_path, workspace)
    assert done.returncode == 0, done.stderr
    [call] = [json.loads(line) for line in marker.read_text().splitlines()]
    assert call["tool_name"] == "read_file" and call["hook_event_name"] == "PreToolUse"
    assert [r["outcome"] for r in hook_records(records)] == ["ok"]


# -- in one process, hooks from the [hooks] table of the user's CodeWhale config ---------------

ALWAYS_BLOCK = """
import json, sys
stop = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(json.dumps(stop["stop_hook_active"]) + "\\n")
print(json.dumps({"decision": "block", "reason": "run the tests first"}))
"""


def toml_hook(event: str, command: str, matcher: str = "*") -> str:
    return (
        f"[[hooks.{event}]]\nmatcher = {json.dumps(matcher)}\n"
        f'hooks = [{{ type = "command", command = {json.dumps(command)} }}]\n'
    )


async def test_a_stop_hook_that_always_blocks_sends_the_turn_back_a_bounded_number_of_times(
    llm, tmp_path, make_session
):
    log = tmp_path / "stops.log"
    command = f"{script(tmp_path, 'always', ALWAYS_BLOCK)} {log}"
    llm.enqueue(*(Reply(text=f"finished {n}") for n in range(MAX_STOP_CONTINUATIONS + 1)))
    session = make_session(config=toml_hook("Stop", command))
    result = await session.submit("do it")
    assert (
        result.status == "completed" and result.final_text == f"finished {MAX_STOP_CONTINUATIONS}"
    )
    assert len(llm.requests) == MAX_STOP_CONTINUATIONS + 1
    last = llm.requests[-1].json["messages"][-1]
    assert last == {"role": "user", "content": "[Stop hook] run the tests first"}
    active = [json.loads(line) for line in log.read_text().splitlines()]
    assert active == [False] + [True] * (MAX_STOP_CONTINUATIONS - 1)


def decision(value: str, reason: str = "") -> str:
    output = {
        "hookSpecificOutput": {"permissionDecision": value, "permissionDecisionReason": reason}
    }
    return f"echo {shlex.quote(json.dumps(output))}"


async def test_a_pretooluse_ask_asks_even_in_yolo_and_an_allow_answers_for_the_user(
    llm, make_session
):
    shell = ToolCallSpec("exec_shell", {"command": "echo hi"})
    llm.enqueue(Reply(tool_calls=[shell]), Reply(text="done"))
    asking = decision("ask", "a person should look at shell commands")
    session = make_session(
        Mode.YOLO, config=toml_hook("PreToolUse", asking, "Bash"), approve="deny"
    )
    await session.submit("go")
    [asked] = [e for e in session.seen if isinstance(e, events.ApprovalRequested)]
    assert asked.summary.endswith("(a person should look at shell commands)")
    assert llm.requests[-1].json["messages"][-1]["content"].startswith("Error: the user denied")

    llm.enqueue(Reply(tool_calls=[shell]), Reply(text="done"))
    allowing = decision("allow")
    session = make_session(Mode.AGENT, config=toml_hook("PreToolUse", allowing, "Bash"))
    await session.submit("go")
    assert not [e for e in session.seen if isinstance(e, events.ApprovalRequested)]
    assert llm.requests[-1].json["messages"][-1]["content"].startswith("[exit code 0")


async def test_session_hooks_add_context_and_run_at_close_and_a_permission_hook_denies(
    llm, tmp_path, make_session
):
    log = tmp_path / "ends.jsonl"
    refusal = {"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "no shell"}}}
    config = (
        toml_hook("SessionStart", "echo 'the build uses make'", "startup")
        + toml_hook("SessionEnd", f"{script(tmp_path, 'record', RECORD)} {log}")
        + toml_hook("PermissionRequest", f"echo {shlex.quote(json.dumps(refusal))}", "Bash")
    )
    shell = ToolCallSpec("exec_shell", {"command": "echo hi"})
    llm.enqueue(Reply(tool_calls=[shell]), Reply(text="done"))
    session = make_session(Mode.AGENT, config=config)
    await session.submit("build it")
    first = llm.requests[0].json["messages"][-1]["content"]
    assert first == "build it\n\n[hook context] the build uses make"
    # Asked in Agent mode, answered by the hook: no question reached the user.
    assert not [e for e in session.seen if isinstance(e, events.ApprovalRequested)]
    result = llm.requests[-1].json["messages"][-1]["content"]
    assert result == "Error: a PermissionRequest hook denied this exec_shell call: no shell"
    await session.close()
    [end] = [json.loads(line) for line in log.read_text().splitlines()]
    assert (end["hook_event_name"], end["reason"]) == ("SessionEnd", "other")


async def test_a_failed_call_runs_posttoolusefailure_whose_context_joins_the_error(
    llm, tmp_path, make_session
):
    log = tmp_path / "failures.jsonl"
    note = {"hookSpecificOutput": {"additionalContext": "the docs live in docs/"}}
    command = f"{script(tmp_path, 'record', RECORD)} {log}; echo {shlex.quote(json.dumps(note))}"
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "missing.md"})]), Reply(text="ok")
    )
    session = make_session(config=toml_hook("PostToolUseFailure", command, "Read"))
    await session.submit("read it")
    result = llm.requests[-1].json["messages"][-1]["content"]
    assert result.startswith("Error: ")
    assert result.endswith("\n\n[PostToolUseFailure hook] the docs live in docs/")
    [failure] = [json.loads(line) for line in log.read_text().splitlines()]
    assert failure["tool_name"] == "read_file" and failure["is_interrupt"] is False
    assert failure["error"] in result
