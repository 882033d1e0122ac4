"""The process where handle_read runs JSONPath queries over large payloads.

Why a process and not a thread: `json.loads` of a 15 MB document holds the GIL for
its whole run (hundreds of ms) and the query then walks millions of nodes, so in a
thread of the agent's process both would stall its event loop.

What the worker inherits: nothing it is not given. It is `python -I` (no PYTHON*
variables, no user site, and the current directory, i.e. the workspace, stays off
sys.path, so a `json.py` there is never imported) with an environment of a few
harmless keys (no API keys, no CODEWHALE_*/DEEPSEEK_* settings), no file descriptors
but its pipes, and its own session, so a Ctrl-C in the terminal does not reach it.
It gets a payload's text or a file path and returns only the truncated content and
the full length.

Protocol, one request at a time over stdin/stdout:
  request: a JSON line {"expression", "limit", "path"?, "size"?}; without "path" the
           payload follows as chunks `<n>\\n<n bytes>` ended by `0\\n` (UTF-8,
           surrogatepass, so any Python str survives the trip);
  reply:   a JSON line {"content", "total"} or {"error"}.

The parent's side blocks and is called from a worker thread (HandleStore.read_async),
so the process belongs to no event loop: there is one per agent process, started on
first use, killed at exit, and it also ends by itself when its stdin closes.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from codewhale.handles import HandleError, parse_document, read_file_text, run_jsonpath
from codewhale.sandbox import child_environment

TIMEOUT_SECS = 120.0
# Beside the common allowlist: what Python needs on Windows.
_WINDOWS_ENV_KEYS = ("SYSTEMROOT", "TEMP", "TMP")
# The payload is encoded a megabyte at a time: each encode holds the GIL, the pipe
# writes in between do not.
_PIECE_CHARS = 1 << 20
# The package root, put first on the worker's sys.path so it runs this very code.
_ROOT = str(Path(__file__).resolve().parent.parent)
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from codewhale.handles_worker import main; main()"
)


def jsonpath_in_worker(
    expression: str,
    limit: int,
    *,
    text: str | None = None,
    path: Path | None = None,
    size: int = 0,
) -> tuple[str, int]:
    """Run `run_jsonpath` in the worker on `text` or on the first `size` bytes of `path`."""
    header: dict[str, Any] = {"expression": expression, "limit": limit}
    if path is not None:
        header.update(path=os.path.abspath(path), size=size)
    return _WORKER.request(header, text if path is None else None)


class _Worker:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # one request at a time: the protocol is a dialogue
        self._process: subprocess.Popen[bytes] | None = None

    def request(self, header: dict[str, Any], text: str | None) -> tuple[str, int]:
        with self._lock:
            if self._process is not None and self._process.poll() is not None:
                self.close()  # died between requests: release its pipes, start afresh
            if self._process is None:
                self._process = _start()
            process = self._process
            assert process.stdin is not None and process.stdout is not None
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                process.kill()  # unblocks the readline below with EOF

            timer = threading.Timer(TIMEOUT_SECS, expire)
            timer.daemon = True
            timer.start()
            try:
                _send(process.stdin, header, text)
                line = process.stdout.readline()
            except OSError:  # the worker died while the request was being written
                line = b""
            finally:
                timer.cancel()
            if not line:
                self.close()
                if expired.is_set():
                    raise HandleError(
                        f"the jsonpath query ran over {TIMEOUT_SECS:g}s and was stopped; "
                        "narrow it (e.g. $.items[0:100]) or slice the handle instead"
                    )
                raise HandleError(
                    "the jsonpath worker process died (out of memory?); try a narrower "
                    "query, or slice the handle instead"
                )
        reply = json.loads(line)
        if "error" in reply:
            raise HandleError(reply["error"])
        return reply["content"], reply["total"]

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()


def _start() -> subprocess.Popen[bytes]:
    env = child_environment(os.environ, _WINDOWS_ENV_KEYS)
    return subprocess.Popen(
        [sys.executable, "-I", "-c", _BOOT, _ROOT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


def _send(stream: IO[bytes], header: dict[str, Any], text: str | None) -> None:
    stream.write(json.dumps(header).encode() + b"\n")
    if text is not None:
        for start in range(0, len(text), _PIECE_CHARS):
            data = text[start : start + _PIECE_CHARS].encode("utf-8", "surrogatepass")
            stream.write(b"%d\n" % len(data))
            stream.write(data)
        stream.write(b"0\n")
    stream.flush()


def _receive(stream: IO[bytes]) -> str:
    parts = []
    while (size := int(stream.readline())) > 0:
        parts.append(stream.read(size))
    return b"".join(parts).decode("utf-8", "surrogatepass")


_WORKER = _Worker()
atexit.register(_WORKER.close)


def main() -> None:
    """The worker's loop: answer requests until stdin closes."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while header := stdin.readline():
        request = json.loads(header)
        # The payload is read in full before anything can fail, so the dialogue stays
        # in step whatever the query does.
        text = _receive(stdin) if "path" not in request else None
        try:
            if text is None:
                text = read_file_text(request["path"], request["size"])
            document = parse_document(text)
            text = None  # the parsed document is enough; free the text before querying
            content, total = run_jsonpath(request["expression"], document, request["limit"])
            reply: dict[str, Any] = {"content": content, "total": total}
        except HandleError as error:
            reply = {"error": str(error)}
        except Exception as error:  # e.g. MemoryError, an unreadable file
            reply = {"error": f"jsonpath failed: {type(error).__name__}: {error}"}
        document = text = None
        # ensure_ascii: lone surrogates travel as escapes and come back unchanged.
        stdout.write(json.dumps(reply).encode() + b"\n")
        stdout.flush()


if __name__ == "__main__":
    main()
