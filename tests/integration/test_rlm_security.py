"""RLM code is code execution: approval, the sandbox, process limits and cleanup.

The kernels here are real: sandboxed ones run in real bubblewrap (marked `sandbox`),
unconfined ones (`[sandbox] enabled = false`) show what holds without it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codewhale.config_models import RlmConfig, SandboxConfig
from codewhale.engine import events
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.handles import HandleStore
from codewhale.permissions import Mode, ModeSwitch
from codewhale.providers.client import ChatClient
from codewhale.providers.types import ToolCall
from codewhale.rlm.kernel import KernelLimits
from codewhale.rlm.sessions import RlmError, RlmManager
from codewhale.rlm.tools import rlm_tools
from codewhale.sandbox import sandbox_status
from codewhale.tools.base import ToolContext
from codewhale.tools.registry import ToolRegistry
from tests.support.processes import count_running, daemon_marker, gone, running
from tests.support.settings import loopback_settings

SANDBOX = sandbox_status()
needs_sandbox = [
    pytest.mark.sandbox,
    pytest.mark.skipif(not SANDBOX.available, reason=f"no bubblewrap here: {SANDBOX.reason}"),
]
CANARY = "sk-canary-rlm-7d41e0"
SANDBOXED, UNCONFINED = SandboxConfig(), SandboxConfig(enabled=False)
BOTH = [
    pytest.param(SANDBOXED, id="sandboxed", marks=needs_sandbox),
    pytest.param(UNCONFINED, id="unconfined"),
]


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("kept as is\n")
    return root


@pytest.fixture
async def client(llm):
    client = ChatClient(loopback_settings(llm.base_url), retry_base_delay_secs=0.01)
    yield client
    await client.aclose()


def manager_for(client, workspace: Path, sandbox: SandboxConfig, **limits) -> RlmManager:
    return RlmManager(
        client=client,
        config=RlmConfig(),
        handles=HandleStore(),
        limits=KernelLimits(eval_timeout_secs=20, memory_mb=512, **limits),
        workspace=workspace,
        sandbox=sandbox,
    )


@pytest.fixture
async def opened(client, workspace, request):
    """An RLM session 'doc' in the sandbox configuration the test is parametrized with."""
    manager = manager_for(client, workspace, request.param, max_processes=8)
    await manager.open("doc", "some context", {"source": "test"})
    yield manager
    await manager.close_all()


def code_result(reply: dict) -> str:
    assert reply["ok"], reply.get("error")
    return reply["stdout"].strip()


@pytest.mark.parametrize("opened", BOTH, indirect=True)
async def test_the_kernel_works_in_the_workspace(opened, workspace):
    cwd = code_result(await opened.evaluate("doc", "import os\nprint(os.getcwd())"))
    assert cwd == str(workspace.resolve())
    assert code_result(await opened.evaluate("doc", "print(open('notes.txt').read())")) == (
        "kept as is"
    )


ATTEMPTS = {
    "edit a workspace file": "open('notes.txt', 'w').write('pwned')",
    "create a workspace file": "open('new.txt', 'w').write('pwned')",
    "write outside the workspace": "open(OUTSIDE, 'w').write('pwned')",
    "start a shell that writes": "import subprocess\n"
    "subprocess.run(['sh', '-c', 'echo pwned > made.txt'], check=True)",
    "connect to the host's loopback": "import socket\n"
    "socket.create_connection(('127.0.0.1', PORT), timeout=2).close()",
}


@pytest.mark.parametrize("opened", BOTH, indirect=True)
@pytest.mark.parametrize("attempt", ATTEMPTS)
async def test_sandboxed_code_cannot_write_or_connect(
    opened, workspace, outside_dir, loopback_port, attempt
):
    """Each attempt succeeds unconfined (the control) and fails in the sandbox."""
    outside = outside_dir / "outside.txt"
    code = f"OUTSIDE, PORT = {str(outside)!r}, {loopback_port}\n" + ATTEMPTS[attempt]
    reply = await opened.evaluate("doc", code)
    assert reply["ok"] is not opened.sandboxed, reply
    changed = (
        sorted(p.name for p in workspace.iterdir()) != ["notes.txt"]
        or (workspace / "notes.txt").read_text() != "kept as is\n"
        or outside.exists()
    )
    assert changed is (not opened.sandboxed and attempt != "connect to the host's loopback")


@pytest.mark.parametrize("opened", [pytest.param(SANDBOXED, marks=needs_sandbox)], indirect=True)
async def test_scratch_files_go_to_a_private_tmp(opened):
    name = f"/tmp/rlm-scratch-{daemon_marker()}"
    scratch = f"open({name!r}, 'w').write('ok')\nprint(open({name!r}).read())"
    assert code_result(await opened.evaluate("doc", scratch)) == "ok"
    assert not Path(name).exists()


@pytest.fixture
def outside_dir() -> Iterator[Path]:
    """A host directory outside the workspace and outside /tmp (private in the sandbox)."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as name:
        yield Path(name)


@pytest.mark.parametrize("opened", BOTH, indirect=True)
async def test_a_setsid_daemon_ends_with_the_eval(opened):
    marker = daemon_marker()
    code = (
        "import subprocess\n"
        f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "import os, time\n"
        "if os.fork() == 0:\n"  # a double fork: the grandchild is orphaned at once
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '{marker}'])\n"
        "    os._exit(0)\n"
        # Both sleeps have started (the grandchild has exec'd) before the eval ends.
        "def started():\n"
        "    found = 0\n"
        "    for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "        try:\n"
        "            with open('/proc/' + pid + '/cmdline') as command:\n"
        f"                found += '{marker}' in command.read()\n"
        "        except OSError:\n"
        "            pass\n"
        "    return found\n"
        "while started() < 2:\n"
        "    time.sleep(0.01)\n"
        "print('started')"
    )
    assert code_result(await opened.evaluate("doc", code)) == "started"
    assert await gone(marker)  # still alive at the ceiling: it outlived the eval
    assert code_result(await opened.evaluate("doc", "print('still here')")) == "still here"


@pytest.mark.parametrize("opened", BOTH, indirect=True)
async def test_closing_the_session_ends_the_kernel(opened):
    session = opened.get("doc")
    marker = session.kernel._sentinel
    assert running(marker)
    await opened.close_all()
    assert await gone(marker)


@pytest.mark.parametrize("opened", BOTH, indirect=True)
async def test_a_fork_bomb_stops_the_kernel_and_leaves_nothing(opened):
    marker = daemon_marker()
    bomb = (
        "import os\n"
        "for _ in range(1000):\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', '{marker}'])\n"
        "import time\ntime.sleep(30)"
    )
    with (
        peak_count(marker) as peak,
        pytest.raises(RlmError, match=r"more than 8 processes at once \(\[rlm\] max_processes\)"),
    ):
        await opened.evaluate("doc", bomb)
    assert await gone(marker)
    print(f"fork bomb: at most {peak[0]} of 1000 forks alive at once (limit 8)")
    # Stopped well before the bomb's end. How far it got depends on the machine: the
    # watchdog looks every 0.1 s, and on a loaded machine 212 had started by then.
    assert peak[0] < 500
    # The next call starts a fresh kernel with the context reloaded.
    assert code_result(await opened.evaluate("doc", "print(len(_context))")) == "12"


@contextlib.contextmanager
def peak_count(marker: str) -> Iterator[list[int]]:
    """Samples, in a thread, the most processes with `marker` alive at once."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], count_running(marker))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


# -- approval: through the real dispatcher ------------------------------------------------


async def dispatch_eval(manager: RlmManager, workspace: Path, mode: Mode, answer: str | None):
    """One rlm_eval call as the engine makes it; `answer` resolves any approval request."""
    context = ToolContext(workspace=workspace, session_id="s", modes=ModeSwitch(mode))
    seen: list[events.Event] = []

    def emit(event: events.Event) -> None:
        seen.append(event)
        if isinstance(event, events.ApprovalRequested) and answer is not None:
            event.resolve(answer)

    tools = ToolRegistry(rlm_tools(manager, lambda: ""))
    code = "open('made.txt', 'w').write('x')\nprint('ran')"
    arguments = json.dumps({"name": "doc", "code": code})
    [outcome] = await ToolDispatcher(tools, context, emit).run(
        [ToolCall("c1", "rlm_eval", arguments)]
    )
    asked = [e for e in seen if isinstance(e, events.ApprovalRequested)]
    return outcome.result, asked


@pytest.mark.parametrize("opened", BOTH, indirect=True)
async def test_agent_mode_asks_showing_the_code_and_a_denial_runs_nothing(opened, workspace):
    result, asked = await dispatch_eval(opened, workspace, Mode.AGENT, "deny")
    assert len(asked) == 1
    assert "open('made.txt', 'w')" in asked[0].summary
    assert asked[0].scope == "rlm_eval code in RLM session `doc`"
    where = "in the sandbox" if opened.sandboxed else "WITHOUT a sandbox"
    assert where in asked[0].summary
    assert not result.ok and "denied" in result.output
    assert not (workspace / "made.txt").exists()


@pytest.mark.parametrize("opened", [pytest.param(SANDBOXED, marks=needs_sandbox)], indirect=True)
async def test_plan_mode_runs_approved_code_only_inside_the_read_only_sandbox(opened, workspace):
    result, asked = await dispatch_eval(opened, workspace, Mode.PLAN, "approve")
    assert len(asked) == 1
    reply = json.loads(result.output)
    assert reply["ok"] is False and "Read-only file system" in reply["error"]
    assert not (workspace / "made.txt").exists()


@pytest.mark.parametrize("opened", [UNCONFINED], indirect=True)
async def test_plan_mode_refuses_rlm_code_without_a_sandbox(opened, workspace):
    result, asked = await dispatch_eval(opened, workspace, Mode.PLAN, "approve")
    assert asked == []
    assert not result.ok and "Plan mode" in result.output
    assert not (workspace / "made.txt").exists()


async def test_a_required_sandbox_that_cannot_start_refuses_rlm(client, workspace, monkeypatch):
    from codewhale import sandbox
    from codewhale.sandbox.spec import Probe

    monkeypatch.setattr(sandbox, "_probe", lambda: Probe(None, "bwrap not found"))
    manager = manager_for(client, workspace, SandboxConfig(enabled=True))
    with pytest.raises(RlmError, match=r"must run sandboxed.*bwrap not found"):
        await manager.open("doc", "x", {})


# -- the key ------------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", [pytest.param(True, marks=needs_sandbox), False])
def test_the_api_key_is_out_of_the_kernels_reach(tmp_path, sandbox):
    """A real app process holds the key in its environment; RLM code looks everywhere."""
    looks = (
        "import glob, os\n"
        "seen = ''.join(os.environ.values())\n"
        "for path in glob.glob('/proc/[0-9]*/environ'):\n"
        "    try:\n"
        "        seen += open(path, 'rb').read().decode(errors='replace')\n"
        "    except OSError:\n"
        "        pass\n"
        f"print({CANARY!r} in seen)"
    )
    found = _app_evaluates(tmp_path, looks, sandbox=sandbox)
    # Unconfined, the kernel sees the host's /proc, the app's environ included.
    assert found == ("False" if sandbox else "True")


def _app_evaluates(workspace: Path, code: str, *, sandbox: bool) -> str:
    script = f"""
import asyncio, sys
from pathlib import Path
from codewhale.config_models import RlmConfig, SandboxConfig
from codewhale.handles import HandleStore
from codewhale.providers.client import ChatClient
from tests.support.settings import loopback_settings
from codewhale.rlm.sessions import RlmManager

async def main():
    client = ChatClient(loopback_settings("http://127.0.0.1:9"))
    manager = RlmManager(client=client, config=RlmConfig(), handles=HandleStore(),
                         workspace=Path(sys.argv[1]), sandbox=SandboxConfig(enabled={sandbox!r}))
    await manager.open("doc", "x", {{}})
    reply = await manager.evaluate("doc", sys.argv[2])
    await manager.close_all()
    print(reply.get("stdout", reply).strip())

asyncio.run(main())
"""
    env = {"PATH": "/usr/bin:/bin", "DEEPSEEK_API_KEY": CANARY, "HOME": str(workspace)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(workspace), code],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],
        check=True,
        timeout=60,
    )
    return done.stdout.strip()
