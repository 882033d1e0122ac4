"""`codewhale exec` end to end: a real subprocess against the loopback LLM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codewhale.subagents.state.reading import read_state
from codewhale.subagents.store import SubagentStore
from tests.support.git_repo import git, make_repo
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT

CALC = "def add(a, b):\n    return a - b\n"
CHECK = "from calc import add\nassert add(2, 3) == 5, add(2, 3)\nprint('ok')\n"
# A ceiling for a hang, not a measure: on a loaded machine a run's start alone takes seconds.
CEILING_SECS = 120


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "check_calc.py").write_text(CHECK)
    return root


@pytest.fixture
def run_exec(llm, workspace, tmp_path):
    home = tmp_path / "home"
    env = app_environment(
        CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url, DEEPSEEK_API_KEY=TEST_KEY
    )

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), *args],
            capture_output=True,
            text=True,
            env=env,
            input=stdin,
            timeout=60,
        )

    run.home = home
    run.env = env
    return run


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "tool"]


def test_multi_step_turn_edits_a_file_and_runs_a_check(llm, run_exec, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "calc.py"})]),
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "edit_file",
                    {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"},
                )
            ]
        ),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "python3 check_calc.py"})]),
        Reply(text="Fixed add() and the check passes."),
    )
    result = run_exec("--approve", "auto", "fix the failing check")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Fixed add() and the check passes."
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    shell_result = tool_results(llm.requests[3])[-1]
    assert shell_result.startswith("[exit code 0") and "ok" in shell_result
    assert "1\tdef add(a, b):" in tool_results(llm.requests[1])[0]


def test_parallel_tool_calls_all_answer_in_order(llm, run_exec):
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("read_file", {"path": "calc.py"}, id="c1"),
                ToolCallSpec("grep_files", {"pattern": "assert"}, id="c2"),
                ToolCallSpec("list_dir", {}, id="c3"),
            ]
        ),
        Reply(text="seen"),
    )
    assert run_exec("look").returncode == 0
    messages = llm.requests[1].json["messages"]
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2", "c3"]
    assert "check_calc.py:2:" in tool_messages[1]["content"]


def test_plan_mode_refuses_a_write_and_the_model_is_told(llm, run_exec, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "new.py", "content": "x"})]),
        Reply(text="I will describe the change instead."),
    )
    result = run_exec("--mode", "plan", "add new.py")
    assert result.returncode == 0
    assert not (workspace / "new.py").exists()
    assert "Plan mode is read-only" in tool_results(llm.requests[1])[0]


def test_shell_is_denied_by_default_headless(llm, run_exec, workspace):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "touch made.txt"})]),
        Reply(text="ok"),
    )
    assert run_exec("make a file").returncode == 0
    assert not (workspace / "made.txt").exists()
    assert "the user denied this exec_shell call" in tool_results(llm.requests[1])[0]


def test_path_escapes_are_refused(llm, run_exec, workspace, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    (workspace / "link").symlink_to(secret)
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("read_file", {"path": "../secret.txt"}),
                ToolCallSpec("read_file", {"path": str(secret)}),
                ToolCallSpec("read_file", {"path": "link"}),
            ]
        ),
        Reply(text="blocked"),
    )
    assert run_exec("read secrets", "--mode", "yolo").returncode == 0
    results = tool_results(llm.requests[1])
    assert len(results) == 3
    for text in results:
        assert "outside the workspace" in text
        assert "TOP SECRET" not in text


def test_bad_model_output_becomes_correctable_errors(llm, run_exec):
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("read_file", '{"path": "calc.py"', id="broken"),
                ToolCallSpec("red_file", {"path": "calc.py"}, id="unknown"),
                ToolCallSpec("read_file", {"start_line": 1}, id="missing"),
            ]
        ),
        Reply(text="corrected"),
    )
    assert run_exec("go").returncode == 0
    broken, unknown, missing = tool_results(llm.requests[1])
    assert "not valid JSON" in broken
    assert "Unknown tool 'red_file'" in unknown and "read_file" in unknown
    assert "missing required field(s): path" in missing


def test_json_output_is_one_event_per_line(llm, run_exec):
    llm.enqueue(Reply(text=["Hel", "lo"]))
    result = run_exec("--json", "hi")
    assert result.returncode == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    types = [event["type"] for event in lines]
    assert types[:2] == ["session", "turn_started"] and types[-2:] == ["turn_complete", "result"]
    assert types.count("assistant_delta") == 2
    assert all("ts" in event for event in lines)


def test_prompt_from_stdin(llm, run_exec):
    llm.enqueue(Reply(text="read it"))
    assert run_exec("-", stdin="prompt via stdin\n").returncode == 0
    assert llm.requests[0].json["messages"][-1]["content"] == "prompt via stdin\n"


def test_provider_failure_exits_1_with_a_clear_message(llm, run_exec):
    llm.enqueue(Reply(fault=Fault.status(401)))
    result = run_exec("hi")
    assert result.returncode == 1
    assert "rejected the API key" in result.stderr
    assert "Traceback" not in result.stderr


def test_usage_errors_exit_2(run_exec, tmp_path):
    assert run_exec("").returncode == 2
    assert run_exec("x", "--max-steps", "0").returncode == 2
    result = run_exec("--base-url", "http://example.com/v1", "hi")
    assert result.returncode == 2
    assert "Refusing plain http://" in result.stderr


def test_a_missing_key_exits_2_with_the_fix_before_any_request(llm, run_exec, workspace):
    env = {key: value for key, value in run_exec.env.items() if key != "DEEPSEEK_API_KEY"}
    command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace)]
    result = subprocess.run(
        [*command, "--provider", "deepseek", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "DeepSeek needs an API key" in result.stderr and "DEEPSEEK_API_KEY" in result.stderr
    assert llm.requests == []


def test_resume_after_a_crash_mid_write_and_no_key_in_session_files(llm, run_exec):
    llm.enqueue(Reply(text="first answer"))
    assert run_exec("remember the number 42").returncode == 0
    sessions = list((run_exec.home / "data" / "sessions").glob("*.jsonl"))
    assert len(sessions) == 1
    with sessions[0].open("a") as handle:
        handle.write('{"kind": "message", "message": {"role": "assis')  # torn by a crash
    llm.enqueue(Reply(text="second answer"))
    result = run_exec("--continue", "what was the number?")
    assert result.returncode == 0, result.stderr
    assert "unreadable record skipped" in result.stderr
    contents = [m["content"] for m in llm.requests[-1].json["messages"]]
    assert "remember the number 42" in contents and "first answer" in contents
    assert contents[-1] == "what was the number?"
    for path in (run_exec.home).rglob("*"):
        if path.is_file():
            assert TEST_KEY not in path.read_text(errors="replace"), path


def test_sigint_interrupts_the_turn_and_exits_130(llm, run_exec, workspace, tmp_path):
    import signal

    llm.enqueue(Reply(text=[f"w{i} " for i in range(400)], chunk_delay=0.05))
    env = run_exec.env
    process = subprocess.Popen(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "--json", "talk"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if json.loads(line)["type"] == "assistant_delta":
                break
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=CEILING_SECS)
    finally:
        if process.poll() is None:
            process.kill()
    # The answer streams for 20 s: interrupted (not completed) is what says it stopped.
    assert process.returncode == 130
    *_, last, result = [json.loads(line) for line in rest.strip().splitlines()]
    assert last["type"] == "turn_complete" and last["status"] == "interrupted"
    assert result["type"] == "result" and result["status"] == "interrupted"


def test_resume_by_id(llm, run_exec):
    llm.enqueue(Reply(text="one"), Reply(text="two"))
    assert run_exec("first").returncode == 0
    (session_file,) = (run_exec.home / "data" / "sessions").glob("*.jsonl")
    assert run_exec("--resume", session_file.stem, "second").returncode == 0
    contents = [m["content"] for m in llm.requests[-1].json["messages"]]
    assert contents[-3:] == ["first", "one", "second"]
    missing = run_exec("--resume", "sess_nope", "x")
    assert missing.returncode == 2 and "no session 'sess_nope'" in missing.stderr


def test_sigkill_while_children_run_leaves_valid_records_and_transcripts(llm, run_exec, workspace):
    import signal
    import time

    def is_child(body):
        return any("Task:\n" in str(m.get("content")) for m in body["messages"])

    llm.route(is_child, respond=lambda body: Reply(fault=Fault.stall(seconds=30)))
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "first child"}),
                ToolCallSpec("agent_open", {"prompt": "second child", "type": "explore"}),
            ]
        ),
        Reply(text="waiting for children"),
    )
    env = run_exec.env
    process = subprocess.Popen(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "delegate"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    state = workspace / ".codewhale" / "state" / "subagents.v1.json"
    try:
        deadline = time.monotonic() + CEILING_SECS
        while time.monotonic() < deadline:
            children = sum(is_child(r.json) for r in llm.requests)
            if children >= 2 and state.exists():
                agents = json.loads(state.read_text())["agents"]
                if len(agents) == 2 and all(a["status"] == "running" for a in agents):
                    break
            time.sleep(0.05)
        else:
            pytest.fail("children never reached running")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=CEILING_SECS)
    finally:
        if process.poll() is None:
            process.kill()
    listing = subprocess.run(
        [
            sys.executable,
            "-m",
            "codewhale",
            "agents",
            "list",
            "--json",
            "--workspace",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert listing.returncode == 0, listing.stderr
    agents = json.loads(listing.stdout)["agents"]
    assert len(agents) == 2
    for agent in agents:
        assert agent["status"] == "interrupted"
        assert agent["error"] == "Interrupted by process restart"
        transcript = Path(agent["artifacts"]["transcript"])
        lines = transcript.read_text().splitlines()
        assert len(lines) >= 2
        assert [json.loads(line)["role"] for line in lines[:2]] == ["system", "user"]
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "codewhale",
            "agents",
            "show",
            agents[0]["agent_id"],
            "-C",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert shown.returncode == 0 and "interrupted" in shown.stdout


def test_exec_waits_for_children_and_prints_their_events(llm, run_exec):
    report = (
        "SUMMARY: read it\nCHANGES: None.\nEVIDENCE:\n- calc.py:1\nRISKS: none\nBLOCKERS: None."
    )
    llm.route(
        lambda body: any("Task:\nlook at calc" in str(m.get("content")) for m in body["messages"]),
        Reply(text=report, request_delay=0.3),
    )
    llm.enqueue(
        Reply(
            tool_calls=[ToolCallSpec("agent_open", {"prompt": "look at calc", "type": "explore"})]
        ),
        Reply(text="child is working"),
        Reply(text="the child reported back"),
    )
    result = run_exec("--json", "delegate")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["envelope"]["kind"] for e in lines if e["type"] == "agent_event"]
    assert kinds[0] == "queued" and "started" in kinds and kinds[-1] == "completed"
    assert lines[-2]["type"] == "turn_complete"
    assert lines[-2]["final_text"] == "the child reported back"
    assert lines[-1]["type"] == "result"
    assert lines[-1]["final_text"] == "the child reported back"
    assert lines[-1]["children"] == {
        "total": 1,
        "completed": 1,
        "failed": 0,
        "cancelled": 0,
        "interrupted": 0,
        "running": 0,
    }


@pytest.mark.slow
def test_sigkill_then_continue_resumes_the_interrupted_child(llm, run_exec, workspace):
    """A real exec is SIGKILLed while its child waits on the model; `exec --continue` tells
    the model, continues the child from its transcript, and the result reaches the parent."""
    import signal
    import time

    def is_child(body):
        return any("Task:\nrecover me" in str(m.get("content")) for m in body["messages"])

    llm.route(is_child, Reply(fault=Fault.stall(seconds=60)), Reply(text=REPORT))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "recover me"})]),
        Reply(text="waiting for the child"),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "delegate"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=run_exec.env,
    )
    try:
        deadline = time.monotonic() + CEILING_SECS
        # What a restart continues from: the child's state (running) and its transcript.
        while not (any(is_child(r.json) for r in llm.requests) and saved_running(workspace)):
            assert time.monotonic() < deadline, "the child never ran with its state saved"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=CEILING_SECS)
    finally:
        if process.poll() is None:
            process.kill()
    agent_id = json.loads((workspace / ".codewhale" / "state" / "subagents.v1.json").read_text())[
        "agents"
    ][0]["agent_id"]
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_eval", {"agent_id": agent_id, "continue": True})]),
        Reply(text="the child finished: all good"),
    )
    before = len(llm.requests)
    result = run_exec("--continue", "--json", "where were we?")
    assert result.returncode == 0, result.stderr
    later = llm.requests[before:]
    parent = [r.json["messages"] for r in later if not is_child(r.json)]
    told = [m["content"] for m in parent[0] if m["role"] == "user"]
    assert 'kind="subagents_interrupted"' in told[-2] and agent_id in told[-2]
    assert told[-1] == "where were we?"
    resumed = next(r.json["messages"] for r in later if is_child(r.json))
    assert "Task:\nrecover me" in resumed[1]["content"]
    assert "Interrupted by process restart" in resumed[-1]["content"]
    tool_reply = [m for m in parent[1] if m["role"] == "tool"][-1]
    eval_reply = json.loads(tool_reply["content"])
    assert eval_reply["status"] == "completed" and eval_reply["continuation"] == {"resumed": True}
    assert "SUMMARY" in eval_reply["result"]
    # Its completion also reached the parent as a runtime event.
    assert (
        "subagent_completion" in parent[1][-1]["content"] and agent_id in parent[1][-1]["content"]
    )
    final = [json.loads(line) for line in result.stdout.splitlines()][-2]
    assert final["type"] == "turn_complete" and final["status"] == "completed"
    records = json.loads((workspace / ".codewhale" / "state" / "subagents.v1.json").read_text())
    assert [a["status"] for a in records["agents"]] == ["completed"]
    nickname = records["agents"][0]["nickname"]
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "codewhale",
            "agents",
            "show",
            nickname.upper(),
            "-C",
            str(workspace),
        ],
        capture_output=True,
        text=True,
        env=run_exec.env,
        timeout=30,
    )
    assert shown.returncode == 0 and agent_id in shown.stdout


def saved_running(workspace: Path) -> bool:
    """The one child's record on disk (snapshot and journal) says running, and its
    transcript holds its task."""
    store = SubagentStore(workspace)
    agents = read_state(store.files).agents
    return len(agents) == 1 and all(
        record["status"] == "running" and store.load_transcript(agent_id)
        for agent_id, record in agents.items()
    )


def test_continue_where_no_session_ran_says_so_and_runs(llm, run_exec):
    llm.enqueue(Reply(text="fresh start"))
    result = run_exec("--json", "--continue", "hello")
    assert result.returncode == 0, result.stderr
    assert "no earlier session here: started a new one" in result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[0]["type"] == "session" and records[0]["resumed"] is False
    assert records[-1]["final_text"] == "fresh start"
    # Now there is one: the next --continue resumes it, without the notice.
    llm.enqueue(Reply(text="again"))
    again = run_exec("--json", "--continue", "more")
    assert again.returncode == 0, again.stderr
    assert "no earlier session" not in again.stderr
    assert json.loads(again.stdout.splitlines()[0])["resumed"] is True


def test_a_run_with_a_child_leaves_no_state_in_git_status(llm, run_exec, workspace):
    make_repo(workspace)
    # What users commit in .codewhale/ stays visible to git; only the state is hidden.
    (workspace / ".codewhale").mkdir()
    (workspace / ".codewhale" / "config.toml").write_text("# project settings\n")
    llm.route(
        lambda body: any("Task:\nlook at calc" in str(m.get("content")) for m in body["messages"]),
        Reply(text=REPORT),
    )
    llm.enqueue(
        Reply(
            tool_calls=[ToolCallSpec("agent_open", {"prompt": "look at calc", "type": "explore"})]
        ),
        Reply(text="child is working"),
        Reply(text="the child reported back"),
    )
    result = run_exec("delegate")
    assert result.returncode == 0, result.stderr
    state = workspace / ".codewhale" / "state"
    assert [*state.glob("subagent-transcripts/*.jsonl")], "the child wrote no transcript"
    status = git(workspace, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert status == ["?? .codewhale/config.toml"]
