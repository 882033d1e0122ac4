"""The API key, set as a canary, against a model that tries every way to read it.

A real `codewhale exec` holds the key in its environment. The scripted model runs a
shell command, RLM code and an explore child, each hunting for the key in the
environment and in every /proc/<pid>/environ. Whatever they print goes into the next
request and into the session files, so the key must appear in no request body and no
file we write. Sandboxed, the hunts find nothing; unsandboxed, what they find is
redacted from their results. Where the key is simply in the tool output (a workspace
file holding it, a variable the user passes through), redaction alone keeps it out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from codewhale.sandbox import sandbox_status
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import app_environment
from tests.support.subagents import REPORT, for_task, last_tool_results

SANDBOX = sandbox_status()
CANARY = "sk-canary-0c5be9d4a1"
HUNT_SHELL = "env; tail -n1 /proc/$PPID/environ; cat /proc/[0-9]*/environ 2>/dev/null; echo"
# What an explore child would run: the classifier refuses it (never read-only).
HUNT_CHILD = "tail -n1 /proc/$PPID/environ"
# Its parent's first: unsandboxed, that is the app, so the key heads the output.
HUNT_PYTHON = (
    "import glob, os\n"
    "for path in [f'/proc/{os.getppid()}/environ', *glob.glob('/proc/[0-9]*/environ')]:\n"
    "    try:\n"
    "        print(open(path, 'rb').read().decode(errors='replace'))\n"
    "    except OSError:\n"
    "        pass\n"
    "print(dict(os.environ))"
)
NOTES = f"deploy key: {CANARY}\n"
# Tool output that holds the key with no classifier or sandbox to stop it.
SHOW_KEY = "printenv DEEPSEEK_API_KEY; cat notes.txt"
QUOTE_KEY_PYTHON = "print(llm_query(open('notes.txt').read()))"


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


def script_the_quoting_model(llm) -> None:
    """Parent, RLM sub-LLM and explore child each put the file holding the key in output."""
    llm.route(sub_llm_query, respond=lambda body: Reply(text="noted"))
    llm.route(
        for_task("quote"),
        Reply(
            tool_calls=[
                ToolCallSpec("read_file", {"path": "notes.txt"}),
                ToolCallSpec("exec_shell", {"command": "cat notes.txt"}),
            ]
        ),
        Reply(text=REPORT),
    )
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("exec_shell", {"command": SHOW_KEY}),
                ToolCallSpec("read_file", {"path": "notes.txt"}),
            ]
        ),
        Reply(tool_calls=[ToolCallSpec("rlm_open", {"content": "x", "name": "k"})]),
        Reply(tool_calls=[ToolCallSpec("rlm_eval", {"name": "k", "code": QUOTE_KEY_PYTHON})]),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "quote", "type": "explore"})]),
        Reply(text="waiting for the child"),
        Reply(text="done"),
    )


def sub_llm_query(body) -> bool:
    """A kernel's llm_query: a lone user message, no system prompt of a conversation."""
    return [m["role"] for m in body["messages"]] == ["user"]


def run_exec(
    llm, tmp_path: Path, *, sandbox: bool, pass_key: bool = False
) -> tuple[subprocess.CompletedProcess, Path]:
    home = tmp_path / "home"
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "a.py").write_text("print('a')\n")
    (workspace / "notes.txt").write_text(NOTES)
    settings = ["[sandbox]"]
    if not sandbox:
        settings.append("enabled = false")
    if pass_key:
        settings.append('pass_env = ["DEEPSEEK_API_KEY"]')
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text("\n".join(settings) + "\n")
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
    found.remove("repo/notes.txt")  # planted by the test, not written by the app
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
    # Answered: the classifier refuses the read, or the sandbox runs it and it finds nothing.
    assert child[-1]["role"] == "tool"
    assert child[-1]["content"].startswith(("[exit code", "Error: Only read-only commands"))
    # The key was in use: the provider got it in the header, where it belongs.
    assert all(r.headers.get("authorization") == f"Bearer {CANARY}" for r in llm.requests)
    assert exposures(llm, done, root) == []


def test_unsandboxed_the_same_hunt_reaches_no_request_body_and_no_file(llm, tmp_path):
    """Without the sandbox (the documented fallback) the RLM code reads the app's
    /proc/<pid>/environ, so only redaction keeps what it prints out of the requests."""
    script_the_model(llm)
    done, root = run_exec(llm, tmp_path, sandbox=False)
    assert done.returncode == 0, done.stderr
    results = [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    # The shell hunt is refused before it runs: unsandboxed, its parent would be the app.
    assert results[0].startswith("Error: Refused: this command reads a process's environment")
    # The RLM hunt found the key in the app's environment; its result says where it was.
    assert '"ok": true' in results[2] and "DEEPSEEK_API_KEY=[redacted]" in results[2]
    assert exposures(llm, done, root) == []


@pytest.mark.parametrize(
    "sandbox",
    [
        pytest.param(
            True,
            marks=[
                pytest.mark.sandbox,
                pytest.mark.skipif(
                    not SANDBOX.available, reason=f"no bubblewrap: {SANDBOX.reason}"
                ),
            ],
            id="sandboxed",
        ),
        pytest.param(False, id="unsandboxed"),
    ],
)
def test_the_key_quoted_by_tool_output_is_redacted_everywhere(llm, tmp_path, sandbox):
    """No classifier or sandbox stops these: `printenv` of a variable the user passes
    through, a workspace file holding the key, RLM code sending the file to a sub-LLM,
    and an explore child reading it. Redaction alone keeps the key out."""
    script_the_quoting_model(llm)
    done, root = run_exec(llm, tmp_path, sandbox=sandbox, pass_key=True)
    assert done.returncode == 0, done.stderr
    parent = [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]
    # printenv and cat, then read_file: the key's place in each is marked.
    assert parent[0].count("[redacted]") == 2 and "deploy key: [redacted]" in parent[1]
    [query] = [r.json for r in llm.requests if sub_llm_query(r.json)]
    assert query["messages"][0]["content"] == "deploy key: [redacted]\n"
    child = last_tool_results(llm, "quote")
    assert len(child) == 2 and all("deploy key: [redacted]" in result for result in child)
    assert exposures(llm, done, root) == []
