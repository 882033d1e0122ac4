"""The parent's side of an RLM kernel: a sandboxed Python process spoken to in frames.

The kernel runs bootstrap.py under `python -I`, inside the OS sandbox when it can start
(the workspace read-only, no network, the app's secrets hidden), with an environment
that holds no keys, in its own process group, under CPU-time and address-space limits.
While an eval runs, a watchdog stops the kernel if it starts more than `max_processes`
processes; when the eval ends, whatever it started (daemons included) is killed.
Whatever happens inside (an infinite loop, a fork or memory bomb, os._exit, a
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
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from codewhale.process_tree import descendants, kill, kill_below
from codewhale.sandbox import Launch, SandboxSpec, child_environment, runs_under_init, sandboxed

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
# How often the watchdog counts the kernel's processes while an eval runs.
WATCH_INTERVAL_SECS = 0.1
# bwrap needs a few milliseconds to start the kernel inside its namespace.
START_WAIT_SECS = 10.0
RpcHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]


class KernelError(Exception):
    """The kernel could not run the request; the message says what happened."""


@dataclass(frozen=True)
class KernelLimits:
    eval_timeout_secs: float = 120.0
    cpu_secs: int = 900
    memory_mb: int = 2048
    max_processes: int = 64


def interpreter() -> tuple[str, tuple[Path, ...]]:
    """The Python to run the kernel with, and the directories it needs to see.

    The base interpreter, not a virtualenv's: the kernel uses only the standard library
    (`-I` ignores site-packages anyway), and a venv under /tmp would be invisible in a
    sandbox whose /tmp is private.
    """
    executable = os.path.realpath(sys.executable)
    return executable, (Path(executable).parent, Path(sys.base_prefix).resolve())


class Kernel:
    """One kernel process; `sandbox` is what it may reach, None to run it unconfined."""

    def __init__(
        self,
        limits: KernelLimits,
        rpc_handler: RpcHandler,
        *,
        workspace: Path,
        sandbox: SandboxSpec | None,
    ) -> None:
        self.limits = limits
        self.rpc_handler = rpc_handler
        self.workspace = workspace
        self.sandbox = sandbox
        self.rpc_count = 0
        self._process: asyncio.subprocess.Process | None = None
        # The kernel's own processes: the python itself and, sandboxed, bwrap's init.
        self._own: frozenset[int] = frozenset()
        self._stopped_because = ""
        self._sentinel = ""
        self._stderr_tail = b""
        self._stderr_task: asyncio.Task[None] | None = None

    @property
    def _in_bwrap(self) -> bool:
        """Whether a sandbox init sits between us and the kernel (bwrap's, not seatbelt's)."""
        return self.sandbox is not None and runs_under_init()

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> None:
        limits = self.limits
        self._sentinel = "@@rlm-" + secrets.token_hex(16)
        self._stderr_tail = b""
        self._stopped_because = ""
        python, python_dirs = interpreter()
        # The source rides in argv, so the sandbox needs no view of this package.
        argv = [python, "-I", "-c", BOOTSTRAP.read_text(encoding="utf-8"), self._sentinel]
        argv += [str(limits.cpu_secs), str(limits.memory_mb)]
        launch: contextlib.AbstractContextManager[Launch] = contextlib.nullcontext(Launch(argv))
        if self.sandbox is not None:
            launch = sandboxed(argv, replace(self.sandbox, visible=python_dirs))
        with launch as started:
            self._process = await asyncio.create_subprocess_exec(
                *started.argv,
                cwd=self.workspace,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=child_environment(os.environ),
                start_new_session=True,
                limit=64 * 1024 * 1024,  # frames carry whole outputs on one line
                pass_fds=started.pass_fds,
            )
        self._stderr_task = asyncio.get_running_loop().create_task(self._drain_stderr())
        self._own = await self._own_processes()

    async def _own_processes(self) -> frozenset[int]:
        """The kernel's processes before any code runs: the python, and bwrap's init."""
        assert self._process is not None
        if not self._in_bwrap:
            return frozenset({self._process.pid})
        deadline = time.monotonic() + START_WAIT_SECS
        # bwrap (our child) -> its init, PID 1 of the namespace -> the python.
        while len(found := descendants(self._process.pid)) < 2:
            if self._process.returncode is not None or time.monotonic() > deadline:
                return frozenset()  # it failed to start; the first request reports why
            await asyncio.sleep(0.002)
        return frozenset(found[:2])

    async def _drain_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        while chunk := await self._process.stderr.read(4096):
            self._stderr_tail = (self._stderr_tail + chunk)[-2000:]

    async def request(self, payload: dict[str, Any], timeout: float | None = None) -> dict:
        """Send one request and serve the kernel's RPCs until its result frame arrives."""
        if not self.alive:
            await self.start()
        process = self._process
        assert process is not None and process.stdin is not None
        watchdog = asyncio.get_running_loop().create_task(self._watch_processes(process))
        try:
            process.stdin.write((json.dumps(payload) + "\n").encode())
            await process.stdin.drain()
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
        finally:
            watchdog.cancel()
            if self._process is process and process.returncode is None:
                # Nothing an eval started outlives it, daemons included.
                kill_below(process.pid, keep=self._own)

    async def _watch_processes(self, process: asyncio.subprocess.Process) -> None:
        """Stop the kernel once the eval runs more than `max_processes` processes."""
        limit = self.limits.max_processes
        while process.returncode is None:
            await asyncio.sleep(WATCH_INTERVAL_SECS)
            running = await asyncio.to_thread(descendants, process.pid)
            if len(set(running) - self._own) > limit:
                self._stopped_because = (
                    f"it ran more than {limit} processes at once ([rlm] max_processes)"
                )
                self._kill_tree(process)  # the reader sees the end and reports why
                return

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
        # bwrap's init exits with 128 + the signal that killed the kernel, as shells do.
        signalled = code is not None and (code < 0 or (self._in_bwrap and code > 128))
        if self._stopped_because:
            cause = f"stopped because {self._stopped_because}"
        elif code is not None and signalled:
            number = -code if code < 0 else code - 128
            cause = f"killed by signal {signal.Signals(number).name}"
            if number == signal.SIGXCPU:
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
            self._kill_tree(self._process)
            await self._process.wait()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
        self._process = None

    @staticmethod
    def _kill_tree(process: asyncio.subprocess.Process) -> None:
        """SIGKILL the kernel with all it started: its group, and everything below it.

        Sandboxed, ending bwrap ends its PID namespace and everything in it at once.
        """
        below = descendants(process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        kill([process.pid, *below])
