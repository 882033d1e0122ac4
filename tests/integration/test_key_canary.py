"""The API key, set as a canary, against a model that tries every way to read it.

A real `codewhale exec` holds the key in its environment. The scripted model runs a
shell command, RLM code and an explore child, each hunting for the key in the
environment and in every /proc/<pid>/environ. Whatever they print goes into the next
request and into the session files, so the key must appear in no request body and no
file we write. Unsandboxed (the control), the same run leaks it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from codewhale.sandbox import sandbox_status
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import app_environment
from tests.support.subagents import REPORT, for_task

SANDBOX = sandbox_status()
CANARY = "sk-canary-0c5be9d4a1"
HUNT_SHELL = "env; tail -n1 /proc/$PPID/environ; cat /proc/[0-9]*/environ 2>/dev/null; echo"
# What an explore child may run: the classifier takes it for read-only.
HUNT_CHILD = "tail -n1 /proc/$PPID/environ"
HUNT_PYTHON = (
    "import glob, os\n"
    "print(dict(os.environ))\n"
    "for path in glob.glob('/proc/[0-9]*/environ'):\n"
    "    try:\n"
    "        print(open(path, 'rb').read().decode(errors='replace'))\n"
    "    except OSError:\n"
    "        pass"
)


def script_the_model(llm) -> None:
    llm.route(
        for_task("hunt"),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": HUNT_CHILD})]),
        Reply(text=REPORT),
    )
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": HUNT_SHELL})]),
        Reply(tool_calls=[ToolCallSpec("rlm_open", {"content": "x", "name": "k"})]),
        Reply(tool_calls=[ToolCallSpec("rlm_eval", {"name": "k", "code": HUNT_PYTHON})]),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "hunt", "type": "explore"})]),
        Reply(text="waiting for the child"),
        Reply(text="done"),
    )


def run_exec(llm, tmp_path: Path, *, sandbox: bool) -> tuple[subprocess.CompletedProcess, Path]:
    home = tmp_path / "home"
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "a.py").write_text("print('a')\n")
    if not sandbox:
        (home / "config").mkdir(parents=True)
        (home / "config" / "config.toml").write_text("[sandbox]\nenabled = false\n")
    # The key first: /proc/<pid>/environ keeps this order, and a long tool output reaches
    # the model as its head, so the unsandboxed control leaks on any machine.
    env = {
        "DEEPSEEK_API_KEY": CANARY,
        **app_environment(CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url),
    }
    command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace)]
    done = subprocess.run(
        [*command, "--json", "--approve", "auto", "find the key"],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    return done, tmp_path


def exposures(llm, done: subprocess.CompletedProcess, root: Path) -> list[str]:
    """Every place the canary turned up: request bodies, files we wrote, exec's output."""
    found = [f"request {n}" for n, r in enumerate(llm.requests) if CANARY.encode() in r.raw_body]
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and CANARY.encode() in path.read_bytes():
            found.append(str(path.relative_to(root)))
    found += [stream for stream in ("stdout", "stderr") if CANARY in getattr(done, stream)]
    return found


@pytest.mark.sandbox
@pytest.mark.skipif(not SANDBOX.available, reason=f"no bubblewrap here: {SANDBOX.reason}")
def test_the_key_reaches_no_request_body_and_no_file(llm, tmp_path):
    script_the_model(llm)
    done, root = run_exec(llm, tmp_path, sandbox=True)
    assert done.returncode == 0, done.stderr
    # The hunts ran: each tool result is in a later request.
    results = [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    assert "PATH=" in results[0] and '"ok": true' in results[2]
    child = [r for r in llm.requests if for_task("hunt")(r.json)][-1].json["messages"]
    assert child[-1]["role"] == "tool" and child[-1]["content"].startswith("[exit code")
    # The key was in use: the provider got it in the header, where it belongs.
    assert all(r.headers.get("authorization") == f"Bearer {CANARY}" for r in llm.requests)
    assert exposures(llm, done, root) == []


def test_unsandboxed_the_same_hunt_finds_the_key(llm, tmp_path):
    """The control: the attacks are real, so the sandboxed run above proves the wall."""
    script_the_model(llm)
    done, root = run_exec(llm, tmp_path, sandbox=False)
    assert done.returncode == 0, done.stderr
    # Where exactly depends on the machine's environment size (a long tool output is
    # kept in memory as a handle and only its head is sent), but it leaks.
    assert any(place.startswith("request") for place in exposures(llm, done, root))
