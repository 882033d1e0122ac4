"""exec_shell: run a command in its own process group, bounded in time and output."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

from codewhale.permissions import ApprovalClass
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult

DEFAULT_TIMEOUT_SECS = 120
MAX_TIMEOUT_SECS = 600
HEAD_BYTES = 12_000
TAIL_BYTES = 12_000
KILL_GRACE_SECS = 2.0
_SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")


def child_environment(parent: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment minus provider settings and anything that looks secret."""
    return {
        name: value
        for name, value in parent.items()
        if not name.startswith(("CODEWHALE_", "DEEPSEEK_"))
        and not name.upper().endswith(_SECRET_SUFFIXES)
    }


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGTERM the whole group, then SIGKILL whatever is left after a grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), KILL_GRACE_SECS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()


class ExecShell(Tool):
    name = "exec_shell"
    description = (
        "Run a shell command (bash) in the workspace. stdout and stderr are merged. "
        f"Default timeout {DEFAULT_TIMEOUT_SECS}s, at most {MAX_TIMEOUT_SECS}s; the whole "
        "process group is killed on timeout. Long output keeps its head and tail; the full "
        "text is stored in a handle readable with handle_read."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout_secs": {"type": "integer", "description": f"1..{MAX_TIMEOUT_SECS}"},
            "cwd": {"type": "string", "description": "directory inside the workspace"},
        },
        "required": ["command"],
    }
    approval = ApprovalClass.REQUIRED

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        command = arguments["command"]
        if not command.strip():
            raise ToolError("command must not be empty")
        timeout = min(
            max(int(arguments.get("timeout_secs") or DEFAULT_TIMEOUT_SECS), 1), MAX_TIMEOUT_SECS
        )
        cwd = context.path(arguments.get("cwd") or ".")
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=child_environment(os.environ),
            start_new_session=True,  # its own process group, so we can kill all of it
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
