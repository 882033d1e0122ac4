"""exec_shell: run a command in its own process group, bounded in time and output.

Where bubblewrap works, every command runs in the sandbox (codewhale/sandbox/)
shaped by the conversation's authority and the session's mode; elsewhere it runs
as it is, and the approval rules are then the only guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

from codewhale import process_tree
from codewhale.config_models import SandboxConfig
from codewhale.permissions import ApprovalClass, CommandClass, Mode, unsandboxed_refusal
from codewhale.sandbox import (
    Launch,
    SandboxSpec,
    child_environment,
    git_settings,
    hidden_paths,
    sandbox_status,
    sandboxed,
)
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult

DEFAULT_TIMEOUT_SECS = 120
MAX_TIMEOUT_SECS = 600
HEAD_BYTES = 12_000
TAIL_BYTES = 12_000
KILL_GRACE_SECS = 2.0


def sandbox_spec(context: ToolContext, cwd: Path, hide: list[str]) -> SandboxSpec:
    """What this conversation's commands may reach, from its authority and the current mode.

    The workspace is writable only if the authority may write and the mode is not Plan,
    and even then its repository's settings (`.git/config`, hooks, info) are not. The
    network is there only for a shell that may run anything: read-only and test
    commands have no need of it, and without it a read-only agent cannot send out
    what it has read.
    """
    live = context.mode is not Mode.PLAN
    authority = context.authority
    writable = live and authority.writes
    git = git_settings(context.workspace) if writable else None
    return SandboxSpec(
        workspace=context.workspace.resolve(),
        cwd=cwd,
        writable=writable,
        network=live and authority.shell is CommandClass.OTHER,
        hidden=hidden_paths(context.workspace, hide, os.environ),
        pinned=git.pinned if git else (),
        read_only=git.read_only if git else (),
    )


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the whole group, then SIGKILL whatever is left after a grace period."""
    await process_tree.end_group(process.pid, process.wait, KILL_GRACE_SECS)


class ExecShell(Tool):
    name = "exec_shell"
    description = (
        "Run a shell command (bash) in the workspace. stdout and stderr are merged. "
        f"Default timeout {DEFAULT_TIMEOUT_SECS}s, at most {MAX_TIMEOUT_SECS}s; the whole "
        "process group is killed on timeout. Long output keeps its head and tail; the full "
        "text is stored in a handle readable with handle_read. Commands may run in a sandbox: "
        "'Read-only file system' means you may not write there, /tmp is private and discarded, "
        "and the network may be off."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout_secs": {"type": "integer", "description": f"1..{MAX_TIMEOUT_SECS}"},
            "cwd": {"type": "string", "description": "directory inside the workspace"},
            "background": {
                "type": "boolean",
                "description": "start it and answer at once with a task_id (dev servers, "
                "watchers, long runs); read it with shell_output, stop it with shell_kill",
            },
        },
        "required": ["command"],
    }
    approval = ApprovalClass.REQUIRED
    # The command's own timeout (at most MAX_TIMEOUT_SECS) kills its process group; the
    # dispatcher's limit is only a backstop above that.
    timeout_secs = MAX_TIMEOUT_SECS + 60

    def __init__(self, sandbox: SandboxConfig | None = None) -> None:
        self._sandbox = sandbox if sandbox is not None else SandboxConfig()

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        command = arguments["command"]
        if not command.strip():
            raise ToolError("command must not be empty")
        timeout = min(
            max(int(arguments.get("timeout_secs") or DEFAULT_TIMEOUT_SECS), 1), MAX_TIMEOUT_SECS
        )
        cwd = context.path(arguments.get("cwd") or ".")
        background = arguments.get("background") is True
        if background and (full := context.background.room()) is not None:
            raise ToolError(full)
        started = time.monotonic()
        with self._launch(command, context, cwd) as launch:
            process = await asyncio.create_subprocess_exec(
                *launch.argv,
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=child_environment(os.environ, self._sandbox.pass_env),
                start_new_session=True,  # its own process group, so we can kill all of it
                pass_fds=launch.pass_fds,
            )
        if background:
            task_id = context.background.add(command, context.session_id, process)
            return ToolResult(
                f"[started in the background as {task_id}] Read its output with "
                f'shell_output {{"task_id": "{task_id}"}} (block: true waits for its end); '
                "stop it with shell_kill. It is stopped when the session ends."
            )
        chunks: list[bytes] = []
        assert process.stdout is not None
        reader = asyncio.create_task(self._read_all(process.stdout, chunks))
        status = "exited"
        try:
            await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            status = "timed out"
            await _kill_group(process)
        except asyncio.CancelledError:
            reader.cancel()
            await asyncio.shield(_kill_group(process))
            raise
        # The shell is gone; anything it left running in the group would hold the pipe open.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(reader, 1.0)
        except TimeoutError:
            reader.cancel()
        duration = time.monotonic() - started
        output = b"".join(chunks).decode("utf-8", errors="replace")
        shown = self._cap(output, context)
        code = process.returncode
        header = (
            f"[timed out after {timeout}s; process group killed]"
            if status == "timed out"
            else f"[exit code {code}; {duration:.1f}s]"
        )
        return ToolResult(f"{header}\n{shown}".rstrip(), ok=status == "exited" and code == 0)

    def _launch(
        self, command: str, context: ToolContext, cwd: Path
    ) -> contextlib.AbstractContextManager[Launch]:
        """bash -c COMMAND, inside the sandbox when it can start."""
        shell = ["bash", "-c", command]
        status = sandbox_status(self._sandbox.enabled)
        if status.available:
            return sandboxed(shell, sandbox_spec(context, cwd, self._sandbox.hide))
        if self._sandbox.enabled is True:
            raise ToolError(
                f"Commands must run sandboxed ([sandbox] enabled = true), but the sandbox "
                f"cannot start: {status.reason}. The command was not run."
            )
        refusal = unsandboxed_refusal(command)
        if refusal is not None:
            raise ToolError(refusal)
        return contextlib.nullcontext(Launch(shell))

    async def _read_all(self, stream: asyncio.StreamReader, chunks: list[bytes]) -> None:
        while block := await stream.read(65536):
            chunks.append(block)

    def _cap(self, output: str, context: ToolContext) -> str:
        if len(output) <= HEAD_BYTES + TAIL_BYTES:
            return output
        name = context.handles.next_name(context.session_id, "shell_output")
        context.handles.put(context.session_id, name, output)
        omitted = len(output) - HEAD_BYTES - TAIL_BYTES
        return (
            f"{output[:HEAD_BYTES]}\n[… {omitted} characters omitted; full output in handle "
            f"'{context.session_id}/{name}' — use handle_read …]\n{output[-TAIL_BYTES:]}"
        )
