"""The bubblewrap sandbox is the wall, not the shell classifier: tests against real bwrap.

Each attack below writes a file when its conversation may write (the control), and
writes nothing when it may not, whatever the classifier makes of the command.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from codewhale.authority import READ_ONLY, Authority
from codewhale.config_models import SandboxConfig
from codewhale.permissions import CommandClass, Mode
from codewhale.sandbox import sandbox_status
from codewhale.sandbox.seccomp import unix_socket_filter
from codewhale.tools.base import ToolContext, ToolResult
from codewhale.tools.shell import ExecShell
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.processes import daemon_marker, gone, running
from tests.support.subagents import REPORT, for_task, last_tool_results, wait_done

_STATUS = sandbox_status()
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(
        not _STATUS.available, reason=f"bubblewrap cannot start here: {_STATUS.reason}"
    ),
]
TEST_ONLY = Authority(
    writes=False, plan_artifacts=False, shell=CommandClass.TEST, label="a verifier"
)
CANARY = "sk-canary-5f0c1d2e"


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def context_for(workspace: Path, authority: Authority | None = None) -> ToolContext:
    if authority is None:
        return ToolContext(workspace=workspace, session_id="s1")
    return ToolContext(workspace=workspace, session_id="s1", authority=authority)


async def run(context: ToolContext, command: str, timeout: int = 20) -> ToolResult:
    return await ExecShell().run({"command": command, "timeout_secs": timeout}, context)


def git(workspace: Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=workspace, check=True, capture_output=True)


def tracked_file(workspace: Path) -> None:
    git(workspace, "init", "-q")
    (workspace / "notes.txt").write_text("a line to grep for\n")
    git(workspace, "add", "notes.txt")


def fsmonitor_hook(workspace: Path) -> None:
    tracked_file(workspace)
    # Set after `git add`: the hook runs on every index refresh from now on.
    git(workspace, "config", "core.fsmonitor", "touch pwned; false")


def fake_cat(workspace: Path) -> None:
    script = workspace / "cat"
    script.write_text("#!/bin/sh\ntouch pwned\n")
    script.chmod(0o755)


def evil_makefile(workspace: Path) -> None:
    (workspace / "evil.mk").write_text("all:\n\ttouch pwned\n")


# The base interpreter, not the venv's: a venv under /tmp (a CI clone) is not in the
# sandbox, whose /tmp is private.
PYTHON = shlex.quote(os.path.join(sys.base_prefix, "bin", "python3"))
# (setup, command, the file the attack creates)
ATTACKS: dict[str, tuple[Callable[[Path], None] | None, str, str]] = {
    "find -fprint0": (None, "find . -fprint0 x", "x"),
    "git grep -O": (tracked_file, "git grep --open-files-in-pager='touch pwned' a", "pwned"),
    "workspace script named cat": (fake_cat, "./cat", "pwned"),
    "pytest --junitxml style": (None, f"{PYTHON} -c \"open('x.xml', 'w')\"", "x.xml"),
    "make -f evil.mk": (evil_makefile, "make -f evil.mk", "pwned"),
    "core.fsmonitor hook": (fsmonitor_hook, "git status", "pwned"),
    # Run as root, bwrap keeps capabilities unless told to drop them.
    "remount read-write": (None, "mount -o remount,rw,bind . 2>/dev/null; touch pwned", "pwned"),
}


@pytest.mark.parametrize("authority", [READ_ONLY, TEST_ONLY], ids=["read-only", "test-only"])
@pytest.mark.parametrize("attack", ATTACKS)
async def test_read_only_and_test_only_authorities_cannot_create_files(
    workspace, attack, authority
):
    setup, command, target = ATTACKS[attack]
    if setup is not None:
        setup(workspace)
    before = sorted(p.name for p in workspace.iterdir())
    await run(context_for(workspace, authority), command)
    assert not (workspace / target).exists()
    assert sorted(p.name for p in workspace.iterdir()) == before


@pytest.mark.parametrize("attack", ATTACKS)
async def test_the_same_attack_writes_when_the_authority_may_write(workspace, attack):
    """The control: each attack is real, so the read-only test above proves the wall."""
    setup, command, target = ATTACKS[attack]
    if setup is not None:
        setup(workspace)
    await run(context_for(workspace), command)
    assert (workspace / target).exists()


async def test_plan_mode_makes_the_workspace_read_only_even_with_full_authority(workspace):
    context = context_for(workspace)
    context.modes.current = Mode.PLAN
    result = await run(context, "touch made")
    assert "Read-only file system" in result.output
    assert not (workspace / "made").exists()


async def test_a_verifier_may_not_write_either(workspace):
    result = await run(context_for(workspace, TEST_ONLY), "echo x > out.txt")
    assert not result.ok
    assert not (workspace / "out.txt").exists()


async def test_tmp_is_writable_private_and_gone_after_the_command(workspace):
    name = f"/tmp/codewhale-sandbox-{uuid.uuid4().hex}"
    context = context_for(workspace, READ_ONLY)
    result = await run(context, f"echo kept > {name} && cat {name}")
    assert result.ok and result.output.splitlines()[-1] == "kept"
    assert not Path(name).exists()
    assert not (await run(context, f"test -e {name}")).ok


async def test_the_app_environment_is_not_readable_through_proc(workspace, monkeypatch):
    """A real app process, started with the key in its environment, runs the commands."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", CANARY)
    every_process = "cat /proc/[0-9]*/environ 2>/dev/null"
    for command in ("cat /proc/$PPID/environ", "tail -n1 /proc/1/environ", every_process):
        assert CANARY not in app_runs(workspace, command, sandbox=True)
    # The control: unsandboxed, the command's parent is the app and its environ shows.
    # The plain forms above are refused there (tests/unit/test_shell_and_permissions.py);
    # this one builds `/proc/` at run time, past that tripwire: only the sandbox holds.
    hidden_path = "cat $(echo L3Byb2Mv | base64 -d)$PPID/environ"
    assert CANARY in app_runs(workspace, hidden_path, sandbox=False)


def app_runs(workspace: Path, command: str, *, sandbox: bool) -> str:
    script = f"""
import asyncio, json, sys
from pathlib import Path
from codewhale.authority import READ_ONLY
from codewhale.config_models import SandboxConfig
from codewhale.tools.base import ToolContext
from codewhale.tools.shell import ExecShell
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.processes import daemon_marker, gone, running
from tests.support.subagents import REPORT, for_task, last_tool_results, wait_done
context = ToolContext(workspace=Path(sys.argv[1]), session_id="s1", authority=READ_ONLY)
tool = ExecShell(SandboxConfig(enabled={sandbox!r}))
result = asyncio.run(tool.run({{"command": sys.argv[2]}}, context))
print(json.dumps(result.output))
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(workspace), command],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


async def test_secrets_in_home_and_hide_paths_are_hidden(workspace, monkeypatch):
    # HOME inside the workspace: paths under /tmp outside it are hidden anyway.
    home = workspace / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / ".netrc").write_text("machine example.com password hunter2")
    (workspace / ".env").write_text("TOKEN=from-dotenv")
    monkeypatch.setenv("HOME", str(home))
    tool = ExecShell(SandboxConfig(hide=[".env"]))
    context = context_for(workspace)
    # Files read as "Permission denied" (/dev/null mounted nodev), directories as empty.
    command = "cat ~/.ssh/id_ed25519 ~/.netrc .env; echo listing: $(ls -A ~/.ssh)"
    result = await tool.run({"command": command}, context)
    assert result.output.splitlines()[-1] == "listing:"
    for secret in ("PRIVATE KEY", "hunter2", "from-dotenv"):
        assert secret not in result.output
    assert (home / ".ssh" / "id_ed25519").read_text() == "PRIVATE KEY"


CONNECT = "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"


@pytest.mark.parametrize("authority", [READ_ONLY, TEST_ONLY], ids=["read-only", "test-only"])
async def test_no_network_for_read_only_or_test_shells(workspace, loopback_port, authority):
    # --unshare-net gives the command its own loopback: the app's 127.0.0.1 is not it.
    result = await run(context_for(workspace, authority), CONNECT.format(port=loopback_port))
    assert not result.ok and "connected" not in result.output.replace("connect:", "")


async def test_a_shell_that_may_run_anything_keeps_the_network(workspace, loopback_port):
    result = await run(context_for(workspace), CONNECT.format(port=loopback_port))
    assert result.ok and result.output.splitlines()[-1] == "connected"


async def test_environment_is_the_allowlist(workspace, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-canary-1")
    monkeypatch.setenv("OPENAI_KEY", "openai-canary-2")
    monkeypatch.setenv("DEEPSEEK_API_KEY", CANARY)
    monkeypatch.setenv("MY_TOOL_HOME", "/opt/tool")
    tool = ExecShell(SandboxConfig(pass_env=["MY_TOOL_HOME"]))
    result = await tool.run({"command": "env"}, context_for(workspace, READ_ONLY))
    for secret in ("aws-canary-1", "openai-canary-2", CANARY):
        assert secret not in result.output
    lines = set(result.output.splitlines())
    assert {"GIT_EDITOR=true", "PAGER=cat", "MY_TOOL_HOME=/opt/tool", "TMPDIR=/tmp"} <= lines


async def test_git_commit_without_a_message_fails_fast(workspace):
    tracked_file(workspace)
    git(workspace, "config", "user.name", "Sandbox Test")
    git(workspace, "config", "user.email", "sandbox@example.invalid")
    # Waiting for an editor, it would run into its time limit instead of this answer.
    result = await run(context_for(workspace), "git commit", timeout=30)
    assert not result.ok and "empty commit message" in result.output


def daemon(marker: str) -> str:
    return f"setsid sleep {marker} > /dev/null 2>&1 < /dev/null &"


async def test_a_setsid_daemon_dies_when_the_command_ends(workspace):
    marker = daemon_marker()
    result = await run(context_for(workspace), f"{daemon(marker)} sleep 0.2; echo started")
    assert result.ok
    assert await gone(marker)


async def test_a_setsid_daemon_dies_on_timeout(workspace):
    marker = daemon_marker()
    result = await run(context_for(workspace), f"{daemon(marker)} sleep 300", timeout=1)
    assert result.output.startswith("[timed out after 1s")
    assert await gone(marker)


async def test_a_setsid_daemon_dies_on_cancel(workspace):
    marker = daemon_marker()
    task = asyncio.create_task(run(context_for(workspace), f"{daemon(marker)} sleep 300"))
    deadline = time.monotonic() + 60  # a ceiling, not a measure
    while not running(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert running(marker), "the daemon never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(marker)


async def test_required_sandbox_runs_commands_when_it_can_start(workspace):
    tool = ExecShell(SandboxConfig(enabled=True))
    result = await tool.run({"command": "echo $$"}, context_for(workspace, READ_ONLY))
    # PID 2 in its own namespace (bwrap's init is 1): the command is inside the sandbox.
    assert result.ok and result.output.splitlines()[-1] == "2"


def test_the_status_names_the_bwrap_in_use_and_the_socket_guard():
    assert _STATUS.available
    launcher, guard = re.fullmatch(r"bubblewrap \((.+?)\); (.+)", _STATUS.reason).groups()
    assert "bwrap" in launcher and os.access(launcher, os.X_OK)
    if unix_socket_filter().program is not None:
        assert guard == "offline commands cannot open Unix sockets (seccomp)"
    else:
        assert guard.endswith("offline commands see no /run but can reach Unix sockets elsewhere")


# -- the same attacks made by real children, through the classifier and the dispatcher ----

# Commands the classifier lets through for each role, which nonetheless write.
CHILD_ATTACKS = {
    "explore": [
        "git grep -O'touch pwned' a",
        "git grep --open-files-in-pager='touch pwned' a",
        "./cat",
    ],
    "verifier": ["make test -f evil.mk"],
}


async def test_misclassified_commands_of_real_children_write_nothing(llm, make_session):
    session = make_session(mode=Mode.YOLO)
    workspace = session.workspace
    tracked_file(workspace)
    fake_cat(workspace)
    (workspace / "evil.mk").write_text("test:\n\ttouch pwned\n")
    before = listing(workspace)
    for role, commands in CHILD_ATTACKS.items():
        calls = [ToolCallSpec("exec_shell", {"command": command}) for command in commands]
        llm.route(for_task(f"attack as {role}"), Reply(tool_calls=calls), Reply(text=REPORT))
    opened = [
        session.manager.open({"prompt": f"attack as {role}", "type": role})
        for role in CHILD_ATTACKS
    ]
    for child in opened:
        assert (await wait_done(session, child["agent_id"]))["status"] == "completed"
    await session.close()
    for role, commands in CHILD_ATTACKS.items():
        results = last_tool_results(llm, f"attack as {role}")
        # The classifier let each command through: it ran, and the sandbox held.
        assert len(results) == len(commands)
        assert all(result.startswith("[exit code") for result in results), results
    assert listing(workspace) == before
    assert not (workspace / "pwned").exists()


def listing(workspace: Path) -> list[str]:
    """The workspace's entries except the app's own state (.codewhale/)."""
    return sorted(p.name for p in workspace.iterdir() if p.name != ".codewhale")
