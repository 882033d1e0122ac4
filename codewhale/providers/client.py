"""Async client for OpenAI-compatible `/chat/completions`, streamed over SSE.

It is the only layer that retries: what is worth retrying (429, 5xx, connection
failures, a stream cut before anything reached the caller) is tried again inside
one deadline, announced to the caller by a Retrying notice, and every other
failure becomes a ProviderError whose message says what to do about it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import operator
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol, TypeVar

from codewhale import __version__
from codewhale.providers.endpoint import check_endpoint
from codewhale.providers.errors import (
    EmptyResponseError,
    IdleTimeoutError,
    MissingApiKeyError,
    ProtocolError,
    ProviderConnectionError,
    ProviderError,
    RequestTimeoutError,
    StreamInterruptedError,
)
from codewhale.providers.http_types import (
    ConnectTimeout,
    PoolTimeout,
    ReadTimeout,
    Response,
    TransportError,
    TransportTimeout,
    WriteTimeout,
)
from codewhale.providers.key_help import missing_key_help
from codewhale.providers.presets import preset_for
from codewhale.providers.retry import RetryBudget, Retrying
from codewhale.providers.settings import ProviderSettings
from codewhale.providers.status import error_for_status
from codewhale.providers.stream import SSEDecoder, StreamAssembler, completion_from_message
from codewhale.providers.transport import Transport
from codewhale.providers.types import (
    Completion,
    StreamEvent,
    StreamFinished,
    TextDelta,
    Usage,
)

logger = logging.getLogger("codewhale.providers")
DRAIN_TIMEOUT_SECS = 1.0

Message = Mapping[str, Any]
Event = TypeVar("Event")


class Launcher(Protocol):
    """Something that runs the endpoint itself (the offline model server)."""

    async def ensure_started(self) -> str:
        """Start the server if needed and return its base URL."""
        ...


def encode_body(body: Mapping[str, Any]) -> bytes:
    """Serialize deterministically, so equal prefixes are equal bytes on the wire."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# The encoder encode_body uses, built once: json.dumps builds one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# A piece of a request body this long is sent as it is; shorter ones are joined with their
# neighbours (ChatClient.encode_request_parts).
LARGE_PIECE = 32 * 1024
# Stand-ins for the two long arrays while a body's fields are laid out (ChatClient._fields).
_MESSAGES = object()
_TOOLS = object()


class _FragmentCache:
    """The encoded JSON of the arrays already sent, so a request encodes only what is new.

    Two levels. Each array sent recently (a conversation's message list, the tool list)
    is kept whole: its items and their encoding. The next request whose items
    start with those same objects reuses that encoding as its prefix, checked by
    identity at C speed, and encodes only the items after it; a conversation's request
    then costs the messages added since its last one, however long it is. Below that,
    each item's own encoding is kept by id(), so a list rebuilt from the same objects
    (a fork, a compacted conversation keeping its recent turns) re-encodes nothing old.

    Entries hold the objects themselves, so an id cannot be reused by another object
    while its entry lives. An object is encoded once for as long as it is cached:
    a message already sent must be replaced by a new dict, never edited in place (the
    engine only ever appends new ones), or the old bytes are sent again.

    Arrays unused for KEEP_REQUESTS requests (a cleared conversation, the full list a
    compaction replaced) are dropped at once; item entries unused as long whenever the
    cache has doubled since the last pruning, unless a kept array still needs them: the
    items whose encoding is already inside its joined first piece do not, so a long
    conversation's bytes are held once (the joined piece), not twice.
    """

    KEEP_REQUESTS = 16
    # Lists kept whole: a conversation, and the one-off calls that share its client.
    KEEP_ARRAYS = 4
    # A kept array's encoding is a list of pieces, not one string: the request sends its
    # long pieces as they are and joins the short ones (encode_request_parts). New items
    # add pieces; past this many they are joined into one (a copy every few requests).
    MAX_PIECES = 64

    def __init__(self, transform: Callable[[Any], Any] | None = None) -> None:
        self._transform = transform
        # id(obj) -> [obj, encoded bytes, request number of last use]
        self._entries: dict[int, list[Any]] = {}
        # (items, the pieces of their encoding, request number of last use, how many of
        # the items the first piece holds joined), most recent first
        self._arrays: list[tuple[list[Any], list[bytes], int, int]] = []
        self._requests = 0
        self._size_after_pruning = 0

    def __len__(self) -> int:
        return len(self._entries)

    def encode_array(self, items: Iterable[Any], out: list[bytes]) -> None:
        """Append the pieces of the JSON array of `items` to `out`."""
        self._requests += 1
        now = self._requests
        items = list(items)
        slot, known = self._longest_prefix(items)
        pieces = list(self._arrays[slot][1]) if known else []
        joined = self._arrays[slot][3] if known else 0
        for item in items[known:]:
            if pieces:
                pieces.append(b",")
            pieces.append(self._fragment(item))
        if len(pieces) > self.MAX_PIECES:
            pieces, joined = [b"".join(pieces)], len(items)
        if slot >= 0:
            del self._arrays[slot]
        self._arrays.insert(0, (items, pieces, now, joined))
        self._arrays = [
            array
            for array in self._arrays[: self.KEEP_ARRAYS]
            if array[2] > now - self.KEEP_REQUESTS
        ]
        out.append(b"[")
        out += pieces
        out.append(b"]")
        if len(self._entries) > 2 * self._size_after_pruning + 256:
            self._prune()

    def encode_once(self, items: Iterable[Any], out: list[bytes]) -> None:
        """Append the JSON array of `items` to `out`, keeping nothing of it."""
        out.append(b"[" + b",".join(map(self._encode, items)) + b"]")

    def _longest_prefix(self, items: list[Any]) -> tuple[int, int]:
        """The kept array that `items` starts with, the longest: (its slot, its length)."""
        best, known = -1, 0
        for slot, (kept, _, _, _) in enumerate(self._arrays):
            size = len(kept)
            if (
                known < size <= len(items)
                and items[0] is kept[0]
                and all(map(operator.is_, items, kept))
            ):
                best, known = slot, size
        return best, known

    def _fragment(self, item: Any) -> bytes:
        if not isinstance(item, dict):  # not what callers send; encoded, not cached
            return self._encode(item)
        entry = self._entries.get(id(item))
        if entry is None or entry[0] is not item:
            entry = self._entries[id(item)] = [item, self._encode(item), 0]
        entry[2] = self._requests
        encoded: bytes = entry[1]
        return encoded

    def _encode(self, item: Any) -> bytes:
        value = item if self._transform is None else self._transform(item)
        return _ENCODER.encode(value).encode("utf-8")

    def _prune(self) -> None:
        oldest = self._requests - self.KEEP_REQUESTS
        kept = {id(item) for items, _, _, joined in self._arrays for item in items[joined:]}
        self._entries = {
            key: entry for key, entry in self._entries.items() if entry[2] > oldest or key in kept
        }
        self._size_after_pruning = len(self._entries)


@dataclasses.dataclass(frozen=True)
class _IdleLimit:
    """How long one request may go without data, and whose limit that is."""

    secs: float
    # The caller's own (ChatClient.stream's idle_timeout_secs), not retried; else
    # [network] stream_idle_timeout_secs, retried like any transient failure.
    callers: bool

    def error(self, message: str) -> IdleTimeoutError:
        return (RequestTimeoutError if self.callers else IdleTimeoutError)(message)


class ChatClient:
    """One provider endpoint; share an instance across concurrent requests."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        retry_base_delay_secs: float = 0.5,
        launcher: Launcher | None = None,
    ) -> None:
        if launcher is None:
            check_endpoint(settings)
        self.settings = settings
        self.launcher = launcher
        self._retry_base_delay = retry_base_delay_secs
        self._url = settings.base_url.rstrip("/") + "/chat/completions"
        # What error messages name: a launcher's URL is known once it has started.
        self._base_url = settings.base_url
        preset = preset_for(settings.provider)
        self._stream_tools = preset.stream_tools
        self._needs_text_content = preset.needs_text_content
        self._header_sets: dict[bool, dict[str, str]] = {}
        # Per client: each sub-agent's clone() starts empty and holds only its own conversation.
        self._message_fragments = _FragmentCache(
            _with_text_content if self._needs_text_content else None
        )
        self._tool_fragments = _FragmentCache()
        # Each request passes its idle limit down: the transport applies it to every wait
        # for bytes (the response head's too), _read_events to the time between SSE events
        # (where keep-alive comments do not count).
        self._transport = Transport(
            settings.base_url,
            connect_timeout=settings.connect_timeout_secs,
            read_timeout=settings.stream_idle_timeout_secs,
            max_connections=64,
        )

    def clone(self) -> ChatClient:
        """A client for the same endpoint with its own connection pool.

        Each sub-agent gets one, so its kept-alive connections and its request encoding
        cache (the fragments of its own conversation) are its own.
        """
        return ChatClient(
            self.settings, retry_base_delay_secs=self._retry_base_delay, launcher=self.launcher
        )

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._transport.aclose()

    def build_body(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        stream: bool = True,
        **params: Any,
    ) -> dict[str, Any]:
        """The request body; `params` (max_tokens, temperature, tool_choice...) pass through."""
        if self._needs_text_content:
            messages = [_with_text_content(message) for message in messages]
        return self._fields(list(messages), list(tools) if tools else None, model, stream, params)

    def encode_request(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        stream: bool = True,
        **params: Any,
    ) -> bytes:
        """`encode_body(self.build_body(...))`, byte for byte, re-encoding only new messages."""
        parts = self.encode_request_parts(
            messages, tools=tools, model=model, stream=stream, **params
        )
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def encode_request_parts(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        stream: bool = True,
        remember: bool = True,
        **params: Any,
    ) -> list[bytes]:
        """encode_request's bytes in the parts they are sent in.

        A conversation's earlier messages and its tool schemas are the same objects on
        every step, so their encoded JSON is reused (see _FragmentCache) and a step costs
        the messages added since the last one, however long the conversation; the bytes
        are the same, so a forked child's prefix still matches its parent's on the wire.
        The long encoded prefix stays a part of its own: joining the body into one
        would copy the whole conversation on every request. `remember=False`: a one-off
        request that no later one extends (a summary, an RLM query); its messages are
        encoded and nothing of them is kept.
        """
        fields = self._fields(_MESSAGES, _TOOLS if tools else None, model, stream, params)
        pieces: list[bytes] = []
        for key, value in fields.items():
            pieces.append(b"," if pieces else b"{")
            pieces.append(_ENCODER.encode(key).encode("utf-8") + b":")
            if value is _MESSAGES and not remember:
                self._message_fragments.encode_once(messages, pieces)
            elif value is _MESSAGES:
                self._message_fragments.encode_array(messages, pieces)
            elif value is _TOOLS:
                assert tools is not None
                self._tool_fragments.encode_array(tools, pieces)
            else:
                pieces.append(_ENCODER.encode(value).encode("utf-8"))
        pieces.append(b"}")
        return _coalesced(pieces)

    def _fields(
        self, messages: Any, tools: Any, model: str | None, stream: bool, params: dict[str, Any]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model or self.settings.model, "messages": messages}
        if tools is not None:
            body["tools"] = tools
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        if effort := self.settings.reasoning_effort:
            field = self.settings.effort_field
            body[field] = {"effort": effort} if field == "reasoning" else effort
        body.update({key: value for key, value in params.items() if value is not None})
        return body

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        idle_timeout_secs: float | None = None,
        remember: bool = True,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent | Retrying, None]:
        """Stream one response: deltas as they arrive, then exactly one StreamFinished.

        A Retrying notice comes before each retry; no delta precedes one (see _with_retries).
        `idle_timeout_secs` is the caller's own idle limit: when no data arrives for that
        long (first byte or next event), the request ends with a RequestTimeoutError, not
        retried; [network] stream_idle_timeout_secs applies when it is the shorter one.
        `remember`: see encode_request_parts.
        """
        idle = self._idle_limit(idle_timeout_secs)
        tools = tools if self.settings.offer_tools else None
        if tools and not self._stream_tools:
            return self._whole_with_tools(messages, tools, model, idle, remember, params)
        body = self.encode_request_parts(
            messages, tools=tools, model=model, remember=remember, **params
        )
        # The retrying stream itself, not a generator around it: one layer less for every
        # event, and for closing the stream.
        return self._with_retries(lambda: self._stream_once(body, idle))

    async def _whole_with_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]],
        model: str | None,
        idle: _IdleLimit,
        remember: bool,
        params: dict[str, Any],
    ) -> AsyncGenerator[StreamEvent | Retrying, None]:
        """stream() for a server that cannot stream tool calls: the request whole, with
        tools; streamed again without them if it answered with neither calls nor words."""
        # Such servers also read a missing tool_choice as "none", not OpenAI's "auto".
        params.setdefault("tool_choice", "auto")
        completion = None
        whole_request = self._whole(messages, tools, model, params, idle, remember=remember)
        async with aclosing(whole_request) as whole:
            async for item in whole:
                if isinstance(item, StreamFinished):
                    completion = item.completion
                else:
                    yield item
        assert completion is not None
        if completion.tool_calls or completion.content:
            if completion.content:
                yield TextDelta(completion.content)
            yield StreamFinished(completion)
            return
        # The constrained server chose to answer in words but produced none (its text path
        # is grammar-bound too): ask again for the words, without tools.
        earlier_usage = completion.usage
        params.pop("tool_choice")
        body = self.encode_request_parts(messages, model=model, remember=remember, **params)
        async with aclosing(self._with_retries(lambda: self._stream_once(body, idle))) as events:
            async for event in events:
                if isinstance(event, StreamFinished) and earlier_usage is not None:
                    event = StreamFinished(_with_usage(event.completion, earlier_usage))
                yield event

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> Completion:
        """Stream a one-off request (its messages are not kept for a next one) and return
        only the finished Completion."""
        return await _completion_of(
            self.stream(messages, tools=tools, model=model, remember=False, **params)
        )

    async def request(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> Completion:
        """One non-streamed request (for servers whose streaming breaks with tools)."""
        return await _completion_of(
            self._whole(messages, tools, model, params, self._idle_limit(None))
        )

    def _whole(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        model: str | None,
        params: dict[str, Any],
        idle: _IdleLimit,
        *,
        remember: bool = True,
    ) -> AsyncGenerator[StreamFinished | Retrying, None]:
        """A non-streamed request, with the same retries and notices as a stream."""
        tools = tools if self.settings.offer_tools else None
        body = self.encode_request_parts(
            messages, tools=tools, model=model, stream=False, remember=remember, **params
        )

        async def attempt() -> AsyncGenerator[StreamFinished, None]:
            yield StreamFinished(await self._request_once(body, idle))

        return self._with_retries(attempt)

    def _idle_limit(self, caller_secs: float | None) -> _IdleLimit:
        """The shorter of the caller's idle limit and stream_idle_timeout_secs."""
        own = self.settings.stream_idle_timeout_secs
        if caller_secs is None or own < caller_secs:
            return _IdleLimit(own, callers=False)
        return _IdleLimit(caller_secs, callers=True)

    async def _with_retries(
        self, attempt: Callable[[], AsyncGenerator[Event, None]]
    ) -> AsyncGenerator[Event | Retrying, None]:
        """Run `attempt` until it succeeds or the budget is spent; the only retry loop.

        An attempt that has delivered anything is not retried: the caller has already shown
        those deltas, and a new response would show its own after them (the same text
        twice, or two different answers run together). The error says so instead.
        """
        budget = RetryBudget(
            max_retries=self.settings.max_retries,
            deadline_secs=self.settings.retry_deadline_secs,
            base_delay_secs=self._retry_base_delay,
        )
        while True:
            delivered = False
            try:
                # Closed here, not by the garbage collector's finalizer hook: that one costs
                # a thread-safe wake-up and a task for every request.
                async with aclosing(attempt()) as events:
                    async for event in events:
                        delivered = True
                        yield event
                return
            except ProviderError as error:
                if not error.retryable:
                    raise
                if delivered:
                    error.annotate("not retried: part of the response was already delivered")
                    raise
                notice = self._next_attempt(error, budget)
            yield notice
            await asyncio.sleep(notice.delay)

    def _next_attempt(self, error: ProviderError, budget: RetryBudget) -> Retrying:
        """The notice for the next attempt, or `error` raised with why there is none."""
        retry_after = getattr(error, "retry_after", None)
        delay = budget.next_delay(retry_after)
        if delay is None:
            error.annotate(budget.give_up_note(retry_after))
            raise error
        logger.info("retrying %s in %.2fs: %s", self.settings.label, delay, error.message)
        return Retrying(
            attempt=budget.attempts,
            max_attempts=budget.max_attempts,
            delay=delay,
            reason=error.reason,
        )

    def _headers(self, *, streaming: bool) -> dict[str, str]:
        """Built once per kind (the settings are frozen): the transport keys its prepared
        request head by them."""
        headers = self._header_sets.get(streaming)
        if headers is not None:
            return headers
        settings = self.settings
        if not settings.api_key and preset_for(settings.provider).needs_key:
            raise MissingApiKeyError(missing_key_help(settings))
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if streaming else "application/json",
            "User-Agent": f"codewhale/{__version__}",
            **settings.headers,
        }
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._header_sets[streaming] = headers
        return headers

    async def _endpoint_url(self) -> str:
        if self.launcher is None:
            return self._url
        self._base_url = await self.launcher.ensure_started()
        return self._base_url.rstrip("/") + "/chat/completions"

    async def _stream_once(
        self, body: list[bytes], idle: _IdleLimit
    ) -> AsyncGenerator[StreamEvent, None]:
        headers = self._headers(streaming=True)
        url = await self._endpoint_url()
        response = None
        try:
            async with self._transport.post(url, body, headers, read_timeout=idle.secs) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise error_for_status(response, self.settings)
                if _is_json(response):
                    completion = completion_from_message(_json(await response.aread()))
                    if completion.content:
                        yield TextDelta(completion.content)
                    yield StreamFinished(completion)
                    return
                async with aclosing(self._read_events(response, idle)) as events:
                    async for event in events:
                        yield event
        except TransportTimeout as error:
            raise self._timeout_error(error, response, idle) from None
        except TransportError as error:
            raise self._transport_error(error, response) from None

    async def _read_events(
        self, response: Response, idle_limit: _IdleLimit
    ) -> AsyncGenerator[StreamEvent, None]:
        """Decode SSE events, enforcing the idle timeout between events.

        Any data counts, an event that carries no delta too (a finish_reason, the usage,
        [DONE]) and the start of one still arriving (a long tool argument in one line); a
        comment (a server's keep-alive) does not: a stream of only those still times out.
        """
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" not in content_type:
            raise ProtocolError(
                f"{self.settings.label} answered with Content-Type {content_type!r}, not an "
                "event stream; check that base_url is an OpenAI-compatible endpoint."
            )
        assembler = StreamAssembler()
        decoder = SSEDecoder()
        idle = idle_limit.secs
        loop = asyncio.get_running_loop()
        deadline = loop.time() + idle
        # An async generator; closed here, not by the garbage collector's hook.
        chunks = response.iter_bytes()
        saw_data = done = False
        # Whether the next wait needs a limit of its own. The transport already ends any
        # wait for bytes after `idle`; only bytes that do not count here (a keep-alive
        # comment, the drain after [DONE]) leave an earlier deadline than its own to keep.
        # One scope for every chunk costs a timer and a task lookup each.
        limited = False
        try:
            while True:
                try:
                    if limited:
                        async with asyncio.timeout_at(deadline):
                            chunk = await anext(chunks)
                    else:
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                except (TimeoutError, ReadTimeout):
                    # Ours between events, or the transport's between bytes: one limit.
                    if done:
                        break
                    raise idle_limit.error(self._idle_message(idle_limit)) from None
                events = decoder.feed(chunk)
                for sse in events:
                    data = sse.strip()
                    if not data:
                        continue
                    saw_data = True
                    if data == "[DONE]" or done:
                        done = True
                        continue
                    for event in assembler.feed(_json(data)):
                        yield event
                if events or not _only_comments(chunk):
                    # After [DONE], keep reading briefly to the end of the body: an early
                    # break closes the connection, and reconnecting for every request
                    # costs more CPU than the request when many children stream at once.
                    deadline = loop.time() + (DRAIN_TIMEOUT_SECS if done else idle)
                    limited = done
                else:
                    limited = True
        finally:
            await chunks.aclose()
        if not saw_data:
            raise EmptyResponseError(self._empty_body_message())
        if not done and assembler.finish_reason is None:
            received = len(assembler.completion().content)
            raise StreamInterruptedError(
                f"The stream from {self.settings.label} ended before the response was complete "
                f"(no finish_reason and no [DONE]; {received} characters received)."
            )
        completion = assembler.completion()
        if not completion.finish_reason:
            completion = assembler.completion("tool_calls" if completion.tool_calls else "stop")
        yield StreamFinished(completion)

    async def _request_once(self, body: list[bytes], idle: _IdleLimit) -> Completion:
        headers = self._headers(streaming=False)
        url = await self._endpoint_url()
        response = None
        try:
            async with self._transport.post(url, body, headers, read_timeout=idle.secs) as response:
                await response.aread()
        except TransportTimeout as error:
            raise self._timeout_error(error, response, idle) from None
        except TransportError as error:
            raise self._transport_error(error, response) from None
        if response.status_code != 200:
            raise error_for_status(response, self.settings)
        if not response.content.strip():
            raise EmptyResponseError(self._empty_body_message())
        return completion_from_message(_json(response.content))

    def _timeout_error(
        self, error: TransportTimeout, response: Response | None, idle: _IdleLimit
    ) -> ProviderError:
        """`response` is None until its head arrived."""
        if isinstance(error, ConnectTimeout | PoolTimeout):
            return ProviderConnectionError(f"Timed out connecting to {self._where()}.")
        if isinstance(error, WriteTimeout):
            return ProviderConnectionError(
                f"Timed out sending the request to {self._where()} ({error})."
            )
        if response is None:
            return idle.error(
                f"{self._where()} accepted the connection but sent no response "
                f"headers within {idle.secs:g} s (idle timeout); the request was abandoned."
            )
        return idle.error(self._idle_message(idle))

    def _idle_message(self, idle: _IdleLimit) -> str:
        return (
            f"No data from {self.settings.label} for {idle.secs:g} s (idle timeout); "
            "the request was abandoned."
        )

    def _transport_error(self, error: TransportError, response: Response | None) -> ProviderError:
        """`response` is None until its head arrived."""
        reason = str(error) or type(error).__name__
        if response is not None:
            return StreamInterruptedError(
                f"The connection to {self.settings.label} broke mid-response: {reason}."
            )
        return ProviderConnectionError(
            f"Could not reach {self._where()}: {reason}. Check the network and base_url."
        )

    def _empty_body_message(self) -> str:
        return (
            f"{self.settings.label} answered HTTP 200 with an empty body: the server closed "
            "the stream without data. On a local server (llama.cpp, Ollama) this is most "
            "often a prompt longer than its context window (n_ctx) or a chat template that "
            "cannot stream tool calls."
        )

    def _where(self) -> str:
        """The endpoint named once: `DeepSeek at https://…`, or a self-hosted one's URL."""
        label, url = self.settings.label, self._base_url
        return url if label in url else f"{label} at {url}"


async def _completion_of(events: AsyncGenerator[Any, None]) -> Completion:
    """The Completion a stream finishes with; everything before it is dropped."""
    async with aclosing(events):
        async for event in events:
            if isinstance(event, StreamFinished):
                return event.completion
    raise ProtocolError("the stream ended without a completion")  # pragma: no cover


def _only_comments(chunk: bytes) -> bool:
    """Bytes that start with an SSE comment: a keep-alive, not data."""
    return chunk.lstrip(b"\r\n").startswith(b":")


def _is_json(response: Response) -> bool:
    return "json" in response.headers.get("content-type", "")


def _json(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        preview = data[:120] if isinstance(data, str) else data[:120].decode("utf-8", "replace")
        raise ProtocolError(f"The provider sent malformed JSON: {preview!r}") from None


def _coalesced(pieces: list[bytes]) -> list[bytes]:
    """`pieces` with each run of short ones joined: few parts, and no long one copied."""
    if sum(map(len, pieces)) < 2 * LARGE_PIECE:
        return [b"".join(pieces)]
    parts: list[bytes] = []
    run: list[bytes] = []
    for piece in pieces:
        if len(piece) < LARGE_PIECE:
            run.append(piece)
            continue
        if run:
            parts.append(b"".join(run))
            run = []
        parts.append(piece)
    if run:
        parts.append(b"".join(run))
    return parts


def _with_text_content(message: Message) -> Message:
    return {**message, "content": ""} if message.get("content") is None else message


def _with_usage(completion: Completion, earlier: Usage) -> Completion:
    """The completion, also charged for an earlier request made on its behalf."""
    usage = earlier if completion.usage is None else completion.usage + earlier
    return dataclasses.replace(completion, usage=usage)
