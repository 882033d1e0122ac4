"""Start, share and stop the offline model server.

Why a child process rather than llama.cpp inside CodeWhale: native code that crashes
(this CPU's AMX path segfaults in default builds) takes down only the server, never
the terminal UI; inference holds no lock our event loop needs; and the local model
then travels the same HTTP/SSE path, retries and error handling as every hosted one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from codewhale.private_files import private_dir, private_opener
from codewhale.providers.errors import LocalServerError
from codewhale.sandbox import child_environment

# SmolLM2 speaks ChatML; this format turns `tools` into grammar-constrained calls, so a
# tool call from even a 135M model is valid JSON for a tool that exists. Its catch:
# a streamed request with tools fails (HTTP 200, empty body) and a plain answer comes
# back empty; ChatClient handles both (see `stream_tools` in the presets).
CHAT_FORMAT = "chatml-function-calling"
STARTUP_TIMEOUT_SECS = 120.0
STOP_GRACE_SECS = 2.0
LOG_TAIL_CHARS = 1500


# The server needs no credentials: give it a bare environment, never the API keys.
def child_env() -> dict[str, str]:
    env = child_environment(os.environ, ("PYTHONPATH",))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def process_exited(pid: int) -> bool:
    """True once `pid` is dead, even before asyncio has reaped it (a zombie until then)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc here: asyncio's returncode is all we have
        return False
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


class LocalServer:
    """One llama.cpp server per session: started on first use, shared by every client.

    If the server dies (killed, crashed), the request in flight fails with a clear
    error and the next request starts a fresh server.
    """

    def __init__(
        self,
        model: Path,
        *,
        alias: str,
        log_file: Path,
        threads: int = 1,
        context_tokens: int = 8192,
        chat_format: str | None = CHAT_FORMAT,
        startup_timeout_secs: float = STARTUP_TIMEOUT_SECS,
    ) -> None:
        self.model = model
        self.alias = alias
        self.log_file = log_file
        self.threads = threads
        self.context_tokens = context_tokens
        self.chat_format = chat_format
        self.startup_timeout_secs = startup_timeout_secs
        self.starts = 0
        self._process: asyncio.subprocess.Process | None = None
        self._base_url = ""
        self._lock = asyncio.Lock()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self.running and self._process else None

    @property
    def running(self) -> bool:
        process = self._process
        return (
            process is not None and process.returncode is None and not process_exited(process.pid)
        )

    async def ensure_started(self) -> str:
        """The server's base URL, starting the server first if it is not running."""
        async with self._lock:
            if not self.running:
                await self._start()
            return self._base_url

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        process.terminate()
        try:
            async with asyncio.timeout(STOP_GRACE_SECS):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "codewhale.providers.local_runner",
            "--model",
            str(self.model),
            "--alias",
            self.alias,
            "--threads",
            str(self.threads),
            "--context",
            str(self.context_tokens),
        ]
        if self.chat_format:
            command += ["--chat-format", self.chat_format]
        return command

    async def _start(self) -> None:
        private_dir(self.log_file.parent)
        with open(self.log_file, "wb", opener=private_opener) as log:
            process = await asyncio.create_subprocess_exec(
                *self.command(),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=child_env(),
                # Its own session: a Ctrl-C meant for us must not kill it mid-answer;
                # we stop it ourselves, and it exits by itself if we die.
                start_new_session=True,
            )
        try:
            port = await self._read_port(process)
        except BaseException:
            # Timed out, failed or cancelled (the user gave up on the turn): never leave
            # a half-started server behind. kill() needs no await, so it survives a cancel.
            if process.returncode is None:
                process.kill()
            raise
        self._process = process
        self._base_url = f"http://127.0.0.1:{port}/v1"
        self.starts += 1

    async def _read_port(self, process: asyncio.subprocess.Process) -> int:
        assert process.stdout is not None
        try:
            async with asyncio.timeout(self.startup_timeout_secs):
                line = await process.stdout.readline()
        except TimeoutError:
            raise LocalServerError(
                f"The offline model server did not start within {self.startup_timeout_secs:g} s "
                f"(log: {self.log_file})."
            ) from None
        try:
            return int(json.loads(line)["port"])
        except (ValueError, KeyError, TypeError):
            code = await process.wait() if not line else None
            status = f"exit code {code}" if code is not None else f"it printed {line[:80]!r}"
            raise LocalServerError(
                f"The offline model server failed to start ({status}). {self._log_tail()}"
            ) from None

    def _log_tail(self) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return f"No log at {self.log_file}."
        if not text:
            return f"It wrote nothing to {self.log_file}."
        return f"Last output ({self.log_file}): {text[-LOG_TAIL_CHARS:]}"
