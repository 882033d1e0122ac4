"""A real chat-completions server on 127.0.0.1 that answers from a script.

Tests and benchmarks point the provider client at it instead of mocking
anything. It runs in its own threads, so async tests and sync benchmarks can
both use it, serves many streams at once, records every raw request body, and
can inject the faults a real endpoint produces (error statuses, cut streams,
malformed JSON, keep-alive-only streams, stalls, pauses, resets, empty bodies).
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Predicate = Callable[[Any], bool]
Responder = Callable[[Any], "Reply"]


@dataclass(frozen=True)
class Fault:
    """A failure to inject into one response; build it with the class methods."""

    kind: str
    code: int = 200
    message: str = ""
    retry_after: float | str | None = None
    body: bytes | None = None
    after_chunks: int = 0
    interval: float = 0.05
    duration: float = 0.0
    stage: str = ""
    release: threading.Event | None = None

    @classmethod
    def status(
        cls,
        code: int,
        message: str = "scripted failure",
        retry_after: float | str | None = None,
        body: bytes | None = None,
    ) -> Fault:
        return cls("status", code=code, message=message, retry_after=retry_after, body=body)

    @classmethod
    def cut(cls, after_chunks: int) -> Fault:
        return cls("cut", after_chunks=after_chunks)

    @classmethod
    def no_done(cls) -> Fault:
        return cls("no_done")

    @classmethod
    def malformed_json(cls, after_chunks: int = 1) -> Fault:
        return cls("malformed_json", after_chunks=after_chunks)

    @classmethod
    def empty_body(cls) -> Fault:
        return cls("empty_body")

    @classmethod
    def keepalive_only(cls, interval: float = 0.05, duration: float = 5.0) -> Fault:
        return cls("keepalive_only", interval=interval, duration=duration)

    @classmethod
    def stall(cls, seconds: float = 30.0) -> Fault:
        return cls("stall", duration=seconds)

    @classmethod
    def pause(cls, after_chunks: int, seconds: float) -> Fault:
        """The stream stops for `seconds` after `after_chunks` events (in place of the
        reply's chunk_delay there), then goes on."""
        return cls("pause", after_chunks=after_chunks, duration=seconds)

    @classmethod
    def hold(cls, after_chunks: int, until: threading.Event) -> Fault:
        """The stream stops after `after_chunks` events until `until` is set, then goes on:
        the test, not the clock, decides when the answer can end."""
        return cls("hold", after_chunks=after_chunks, release=until)

    @classmethod
    def reset(cls, stage: str = "before the head") -> Fault:
        """The connection is reset (RST) before any byte of the answer; `stage` is one of
        RESET_STAGES: what is sent first (nothing, or a 200 head)."""
        if stage not in RESET_STAGES:
            raise ValueError(f"unknown reset stage {stage!r}; one of {RESET_STAGES}")
        return cls("reset", stage=stage)


# What a reset connection sent before its reset: nothing, a 200 event-stream head with
# chunked framing, or one whose body would run to the end of the connection.
RESET_STAGES = ("before the head", "after a chunked head", "after an unframed head")


@dataclass(frozen=True)
class ToolCallSpec:
    """One scripted tool call; `fragments` fixes how its arguments are split on the wire."""

    name: str
    arguments: str | dict[str, Any]
    id: str | None = None
    fragments: list[str] | None = None

    def argument_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)

    def argument_fragments(self) -> list[str]:
        if self.fragments is not None:
            return list(self.fragments)
        text = self.argument_text()
        step = max(1, -(-len(text) // 3))
        return [text[i : i + step] for i in range(0, len(text), step)] or [""]


@dataclass(frozen=True)
class Reply:
    """One scripted response (streamed or whole, as the request asks)."""

    text: str | list[str] = ""
    reasoning: str | list[str] = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    interleave: bool = False
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    # False: no usage at all, as some local servers answer (llama-cpp-python's server).
    sends_usage: bool = True
    model: str | None = None
    chunk_size: int | None = None
    chunk_delay: float = 0.0
    request_delay: float = 0.0
    fault: Fault | None = None
    # A recorded SSE body, replayed event by event in place of the scripted fields.
    recorded_sse: bytes | None = None
    # Extra response headers of a streamed reply, written as given (a folded one too).
    headers: dict[str, str] = field(default_factory=dict)

    def text_chunks(self) -> list[str]:
        return _pieces(self.text, self.chunk_size)

    def reasoning_chunks(self) -> list[str]:
        return _pieces(self.reasoning, self.chunk_size)

    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")


def _pieces(value: str | list[str], size: int | None) -> list[str]:
    if isinstance(value, list):
        return value
    if not value:
        return []
    if size:
        return [value[i : i + size] for i in range(0, len(value), size)]
    return [value]


@dataclass(frozen=True)
class RecordedRequest:
    """A request exactly as it arrived."""

    path: str
    headers: dict[str, str]
    raw_body: bytes
    json: Any
    ts: float


@dataclass
class _Route:
    predicate: Predicate | None
    replies: deque[Reply]
    respond: Responder | None


class LoopbackLLM:
    """The server; `with LoopbackLLM() as llm:` starts it on a free port and stops it after."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        # A server-side TLS context makes it an https:// endpoint (named "localhost").
        self._tls = tls
        self._lock = threading.Lock()
        self._routes: list[_Route] = []
        self._default = _Route(None, deque(), None)
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    # -- scripting -----------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Add replies to the default queue, answered in order."""
        with self._lock:
            self._default.replies.extend(replies)

    def route(
        self, predicate: Predicate, *replies: Reply, respond: Responder | None = None
    ) -> None:
        """Send requests matching `predicate` to their own queue (checked before the default)."""
        with self._lock:
            self._routes.append(_Route(predicate, deque(replies), respond))

    @property
    def respond(self) -> Responder | None:
        return self._default.respond

    @respond.setter
    def respond(self, responder: Responder | None) -> None:
        self._default.respond = responder

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    # -- lifecycle -------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("LoopbackLLM is not started")
        port = self._server.server_address[1]
        if self._tls is not None:
            return f"https://localhost:{port}/v1"
        return f"http://127.0.0.1:{port}/v1"

    def start(self) -> LoopbackLLM:
        handler = type("BoundHandler", (_Handler,), {"llm": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        if self._tls is not None:
            self._server.socket = self._tls.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; stalled and keep-alive responses end at once."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_open_connections()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def __enter__(self) -> LoopbackLLM:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- used by the handler ---------------------------------------------------

    def _record_and_pick(self, request: RecordedRequest) -> Reply | None:
        with self._lock:
            self._requests.append(request)
            self._ids += 1
            for route in [*self._routes, self._default]:
                if route.predicate is not None and not _safe_match(route.predicate, request.json):
                    continue
                if route.replies:
                    return route.replies.popleft()
                if route.respond is not None:
                    return route.respond(request.json)
                if route.predicate is not None:
                    return None
            return None

    def _wait(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True if it is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()

    def _wait_for(self, release: threading.Event) -> bool:
        """Wait until `release` is set or the server stops; True if it is stopping."""
        while not release.wait(0.05):
            if self._stopping.is_set():
                return True
        return False


def _safe_match(predicate: Predicate, body: Any) -> bool:
    try:
        return bool(predicate(body))
    except Exception:
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The default backlog of 5 drops connections when many children connect at once.
    request_queue_size = 128

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients closing pooled connections is normal; report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def close_open_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Many small writes per stream; without this, Nagle + delayed ACK add ~40 ms stalls.
    disable_nagle_algorithm = True
    llm: LoopbackLLM

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; tests read `llm.requests` instead."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        # Arrival is when the body has been read; parsing it is the server's own time.
        arrived = time.time()
        # A benchmark's yardstick request carries its JSON in this header and padding as its
        # body, which is then not parsed: no client's request costs the server that.
        stand_in = self.headers.get("X-Loopback-Json")
        try:
            body = json.loads(stand_in if stand_in is not None else raw)
        except ValueError:
            body = None
        recorded = RecordedRequest(
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            raw_body=raw,
            json=body,
            ts=arrived,
        )
        reply = self.llm._record_and_pick(recorded)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_error_json(404, f"no route for {self.path}")
            return
        if reply is None:
            self._send_error_json(500, "loopback LLM: no scripted reply for this request")
            return
        if self.llm._wait(reply.request_delay):
            return
        if reply.fault is not None and reply.fault.kind == "reset":
            self._reset(reply.fault.stage)
        elif reply.fault is not None and reply.fault.kind == "status":
            self._send_status_fault(reply.fault)
        elif isinstance(body, dict) and body.get("stream"):
            self._stream(reply, body)
        else:
            self._send_whole(reply, body if isinstance(body, dict) else {})

    # -- plain responses -------------------------------------------------------

    def _send_bytes(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send_error_json(self, status: int, message: str, extra: dict[str, str] | None = None):
        error = {"error": {"message": message, "type": "server_error", "code": status}}
        headers = {"Content-Type": "application/json", **(extra or {})}
        self._send_bytes(status, json.dumps(error).encode(), headers)

    def _send_status_fault(self, fault: Fault) -> None:
        extra = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
        if fault.body is not None:
            self._send_bytes(fault.code, fault.body, {"Content-Type": "text/plain", **extra})
        else:
            self._send_error_json(fault.code, fault.message, extra)

    def _send_whole(self, reply: Reply, body: dict[str, Any]) -> None:
        if reply.fault is not None and reply.fault.kind == "empty_body":
            self._send_bytes(200, b"", {"Content-Type": "application/json"})
            return
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.text_chunks())}
        if reply.reasoning:
            message["reasoning_content"] = "".join(reply.reasoning_chunks())
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.argument_text()},
                }
                for index, call in enumerate(reply.tool_calls)
            ]
        completion = {
            "id": f"chatcmpl-{self.llm._ids}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model", "loopback"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish()}],
            "usage": self._usage(reply),
        }
        self._send_bytes(200, json.dumps(completion).encode(), {"Content-Type": "application/json"})

    def _usage(self, reply: Reply) -> dict[str, Any]:
        if reply.usage is not None:
            return reply.usage
        prompt = max(1, int(self.headers.get("Content-Length") or 0) // 4)
        produced = "".join(reply.text_chunks()) + "".join(reply.reasoning_chunks())
        produced += "".join(call.argument_text() for call in reply.tool_calls)
        completion = max(1, len(produced) // 4)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_cache_hit_tokens": 0,
            "prompt_cache_miss_tokens": prompt,
        }

    # -- streaming ---------------------------------------------------------------

    def _stream(self, reply: Reply, body: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        fault = reply.fault
        try:
            if fault is not None and fault.kind == "empty_body":
                pass
            elif fault is not None and fault.kind == "stall":
                self.llm._wait(fault.duration)
            elif fault is not None and fault.kind == "keepalive_only":
                self._keepalives(fault)
            elif not self._stream_events(reply, body):
                return  # connection deliberately cut: no terminating chunk
            self._write_chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _reset(self, stage: str) -> None:
        """Send what `stage` names, then reset the connection: an RST, not an orderly close."""
        if stage != "before the head":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            if stage == "after a chunked head":
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
        # A zero linger makes close() send RST and drop anything unsent.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _keepalives(self, fault: Fault) -> None:
        deadline = time.monotonic() + fault.duration
        while time.monotonic() < deadline:
            self._write_chunk(b": keep-alive\n\n")
            if self.llm._wait(fault.interval):
                return

    def _stream_events(self, reply: Reply, body: dict[str, Any]) -> bool:
        """Write the SSE events; False if the fault cut the connection."""
        fault = reply.fault
        data_chunks = list(self._sse_payloads(reply, body))
        for sent, payload in enumerate(data_chunks):
            if fault is not None and fault.kind == "cut" and sent == fault.after_chunks:
                self._cut()
                return False
            if fault is not None and fault.kind == "malformed_json" and sent == fault.after_chunks:
                self._write_chunk(b"data: {not json\n\n")
            pause = reply.chunk_delay if sent else 0.0
            if fault is not None and fault.kind == "pause" and sent == fault.after_chunks:
                pause = fault.duration
            if pause and self.llm._wait(pause):
                return True
            if fault is not None and fault.kind == "hold" and sent == fault.after_chunks:
                assert fault.release is not None
                if self.llm._wait_for(fault.release):
                    return True
            self._write_chunk(payload)
        if fault is not None and fault.kind == "cut":
            self._cut()
            return False
        return True

    def _cut(self) -> None:
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _sse_payloads(self, reply: Reply, body: dict[str, Any]) -> Iterator[bytes]:
        if reply.recorded_sse is not None:
            yield from _recorded_events(reply.recorded_sse)
            return
        no_done = reply.fault is not None and reply.fault.kind == "no_done"
        deltas = list(self._deltas(reply))
        if deltas:
            deltas[0] = {"role": "assistant", **deltas[0]}
        for delta in deltas:
            yield self._chunk_line(
                reply, body, [{"index": 0, "delta": delta, "finish_reason": None}]
            )
        if no_done:
            return
        finish = [{"index": 0, "delta": {}, "finish_reason": reply.finish()}]
        yield self._chunk_line(reply, body, finish)
        if reply.sends_usage and (body.get("stream_options") or {}).get("include_usage"):
            yield self._chunk_line(reply, body, [], usage=self._usage(reply))
        yield b"data: [DONE]\n\n"

    def _deltas(self, reply: Reply) -> Iterator[dict[str, Any]]:
        for piece in reply.reasoning_chunks():
            yield {"reasoning_content": piece}
        for piece in reply.text_chunks():
            yield {"content": piece}
        yield from _tool_call_deltas(reply.tool_calls, reply.interleave)

    def _chunk_line(
        self,
        reply: Reply,
        body: dict[str, Any],
        choices: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
    ) -> bytes:
        chunk: dict[str, Any] = {
            "id": f"chatcmpl-{self.llm._ids}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": reply.model or body.get("model", "loopback"),
            "choices": choices,
        }
        if usage is not None:
            chunk["usage"] = usage
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _recorded_events(body: bytes) -> Iterator[bytes]:
    """A recorded SSE body split into its events, each written as the provider flushed it."""
    for event in body.split(b"\n\n"):
        if event.strip():
            yield event + b"\n\n"


def _tool_call_deltas(calls: list[ToolCallSpec], interleave: bool) -> Iterator[dict[str, Any]]:
    """Each call's first fragment carries id and name; the rest only argument text."""
    per_call: list[list[dict[str, Any]]] = []
    for index, call in enumerate(calls):
        fragments = call.argument_fragments()
        head = {
            "index": index,
            "id": call.id or f"call_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": fragments[0]},
        }
        rest = [{"index": index, "function": {"arguments": piece}} for piece in fragments[1:]]
        per_call.append([head, *rest])
    if interleave:
        order = [
            pieces[i]
            for i in range(max(map(len, per_call), default=0))
            for pieces in per_call
            if i < len(pieces)
        ]
    else:
        order = [piece for pieces in per_call for piece in pieces]
    for piece in order:
        yield {"tool_calls": [piece]}
