"""The parent's side of an RLM kernel: a sandboxed Python process spoken to in frames.

The kernel runs `python -I bootstrap.py <sentinel>` with an environment that holds no
keys or provider settings, in its own process group, under CPU-time and address-space
limits. Whatever happens inside it (an infinite loop, a memory bomb, os._exit, a
segfault) ends in a KernelError here and a kernel that can be started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
SAFE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")
RpcHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]


class KernelError(Exception):
    """The kernel could not run the request; the message says what happened."""


@dataclass(frozen=True)
class KernelLimits:
    eval_timeout_secs: float = 120.0
    cpu_secs: int = 900
    memory_mb: int = 2048


def kernel_environment() -> dict[str, str]:
    """Only what Python needs: no API keys, no CODEWHALE_*/DEEPSEEK_* settings."""
    env = {key: os.environ[key] for key in SAFE_ENV_KEYS if key in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    return env


class Kernel:
    def __init__(self, limits: KernelLimits, rpc_handler: RpcHandler) -> None:
        self.limits = limits
        self.rpc_handler = rpc_handler
        self.rpc_count = 0
        self._process: asyncio.subprocess.Process | None = None
        self._sentinel = ""
        self._stderr_tail = b""
        self._stderr_task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        limits = self.limits
        self._sentinel = "@@rlm-" + secrets.token_hex(16)
        self._stderr_tail = b""
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(BOOTSTRAP),
            self._sentinel,
            str(limits.cpu_secs),
            str(limits.memory_mb),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=kernel_environment(),
            start_new_session=True,
            limit=64 * 1024 * 1024,  # frames carry whole outputs on one line
        )
        self._stderr_task = asyncio.get_running_loop().create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        while chunk := await self._process.stderr.read(4096):
            self._stderr_tail = (self._stderr_tail + chunk)[-2000:]

    async def request(self, payload: dict[str, Any], timeout: float | None = None) -> dict:
        """Send one request and serve the kernel's RPCs until its result frame arrives."""
        if not self.alive:
            await self.start()
        assert self._process is not None and self._process.stdin is not None
        try:
            self._process.stdin.write((json.dumps(payload) + "\n").encode())
            await self._process.stdin.drain()
            async with asyncio.timeout(timeout or self.limits.eval_timeout_secs):
                return await self._until_result()
        except TimeoutError:
            await self.kill()
            raise KernelError(
                f"rlm_eval timed out after {timeout or self.limits.eval_timeout_secs:g}s; the "
                "kernel was stopped and will restart on the next call (variables are lost, "
                "the context is reloaded)"
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            raise KernelError(await self._death_message()) from None

    async def _until_result(self) -> dict:
        assert self._process is not None and self._process.stdout is not None
        prefix = self._sentinel.encode() + b" "
        while True:
            line = await self._process.stdout.readline()
            if not line:
                raise KernelError(await self._death_message())
            if not line.startswith(prefix):
                continue  # bytes written straight to fd 1 by user code; never a frame
            frame = json.loads(line[len(prefix) :])
            if frame.get("type") == "rpc":
                await self._serve_rpc(frame)
            elif frame.get("type") == "result":
                return frame

    async def _serve_rpc(self, frame: dict) -> None:
        self.rpc_count += 1
        try:
            reply = {"result": await self.rpc_handler(frame["method"], frame.get("params", {}))}
        except Exception as error:  # reported inside the kernel as a RuntimeError
            reply = {"error": f"{type(error).__name__}: {error}"}
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write((json.dumps(reply) + "\n").encode())
        await self._process.stdin.drain()

    async def _death_message(self) -> str:
        assert self._process is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._process.wait(), 5)
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stderr_task, 1)
        code = self._process.returncode
        if code is not None and code < 0:
            cause = f"killed by signal {signal.Signals(-code).name}"
            if -code == signal.SIGXCPU:
                cause += f" (CPU limit of {self.limits.cpu_secs}s)"
        else:
            cause = f"exit code {code}"
        tail = self._stderr_tail.decode("utf-8", "replace").strip().splitlines()[-3:]
        detail = f": {' | '.join(tail)}" if tail else ""
        return (
            f"the RLM kernel stopped ({cause}){detail}; it will restart on the next call "
            "(variables are lost, the context is reloaded)"
        )

    async def kill(self) -> None:
        if self._process is None:
            return
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            await self._process.wait()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
        self._process = None
