"""Run one hook command: the moment's JSON on stdin, the allowlisted environment, a
timeout that kills its whole process group.

Hooks run outside the agent sandbox: they are the user's own programs (a project's only
once the user trusted them), and a formatter or a notifier needs the real machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codewhale import process_tree
from codewhale.hooks.settings import HookEntry

# What is kept of a hook's output: its stderr may go to the model.
MAX_OUTPUT_CHARS = 10_000
SHELL = "/bin/sh"  # what Claude Code runs hook commands with


@dataclass(frozen=True)
class HookRun:
    """What one command did; `exit_code` is None when it timed out or could not start."""

    entry: HookEntry
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool = False


async def run_hook(
    entry: HookEntry, payload: dict[str, Any], cwd: Path, env: dict[str, str]
) -> HookRun:
    started = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            entry.command,
            cwd=cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own group: a timeout ends everything it started
        )
    except OSError as error:
        return HookRun(entry, None, "", f"could not start: {error}", _since(started))
    data = json.dumps(payload).encode()
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(data), entry.timeout_secs)
    except TimeoutError:
        await _kill_group(process)
        said = f"timed out after {entry.timeout_secs:g} s; its process group was killed"
        return HookRun(entry, None, "", said, _since(started), timed_out=True)
    except asyncio.CancelledError:
        await asyncio.shield(_kill_group(process))
        raise
    return HookRun(entry, process.returncode, _text(stdout), _text(stderr), _since(started))


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the group and whatever left it (setsid) while still below this process."""

    async def ended() -> None:
        # Bounded: a process that escaped to another parent could hold the pipes open.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 5)

    await process_tree.end_group(process.pid, ended)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[:MAX_OUTPUT_CHARS]


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
