"""Async client for OpenAI-compatible `/chat/completions`, streamed over SSE.

It retries what is worth retrying (429, 5xx, connection failures, a stream cut
before anything reached the caller) inside one deadline, and turns every other
failure into a ProviderError whose message says what to do about it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol

import httpx
from httpx_sse import EventSource

from codewhale import __version__
from codewhale.providers.endpoint import check_endpoint
from codewhale.providers.errors import (
    EmptyResponseError,
    IdleTimeoutError,
    MissingApiKeyError,
    ProtocolError,
    ProviderConnectionError,
    ProviderError,
    StreamInterruptedError,
)
from codewhale.providers.presets import preset_for
from codewhale.providers.retry import RetryBudget
from codewhale.providers.settings import ProviderSettings
from codewhale.providers.status import error_for_status
from codewhale.providers.stream import StreamAssembler, completion_from_message
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


@functools.cache
def _shared_ssl_context() -> ssl.SSLContext:
    """Loading the CA bundle costs ~20 ms; do it once per process, not once per client."""
    return httpx.create_ssl_context()


class Launcher(Protocol):
    """Something that runs the endpoint itself (the offline model server)."""

    async def ensure_started(self) -> str:
        """Start the server if needed and return its base URL."""
        ...


def encode_body(body: Mapping[str, Any]) -> bytes:
    """Serialize deterministically, so equal prefixes are equal bytes on the wire."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


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
        idle = settings.stream_idle_timeout_secs
        self._http = httpx.AsyncClient(
            verify=_shared_ssl_context(),
            # httpx's own read timeout is only a backstop: keep-alive comments reset it,
            # so the idle timeout that matters is enforced per SSE event below.
            timeout=httpx.Timeout(
                connect=settings.connect_timeout_secs, read=idle + 5, write=30.0, pool=None
            ),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
        )

    def clone(self) -> ChatClient:
        """A client for the same endpoint with its own connection pool.

        Each sub-agent gets one: httpcore scans every pooled connection on every request,
        so one shared pool slows down as the number of concurrent streams grows.
        """
        return ChatClient(
            self.settings, retry_base_delay_secs=self._retry_base_delay, launcher=self.launcher
        )

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

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
        body: dict[str, Any] = {"model": model or self.settings.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        body.update({key: value for key, value in params.items() if value is not None})
        return body

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one response: deltas as they arrive, then exactly one StreamFinished."""
        tools = tools if self.settings.offer_tools else None
        earlier_usage = None
        if tools and not self._stream_tools:
            # Such servers also read a missing tool_choice as "none", not OpenAI's "auto".
            params.setdefault("tool_choice", "auto")
            completion = await self.request(messages, tools=tools, model=model, **params)
            if completion.tool_calls or completion.content:
                if completion.content:
                    yield TextDelta(completion.content)
                yield StreamFinished(completion)
                return
            # The constrained server chose to answer in words but produced none (its
            # text path is grammar-bound too): ask again for the words, without tools.
            earlier_usage, tools = completion.usage, None
            params.pop("tool_choice")
        payload = encode_body(self.build_body(messages, tools=tools, model=model, **params))
        budget = self._budget()
        while True:
            delivered = False
            try:
                async for event in self._stream_once(payload):
                    delivered = True
                    if isinstance(event, StreamFinished) and earlier_usage is not None:
                        event = StreamFinished(_with_usage(event.completion, earlier_usage))
                    yield event
                return
            except ProviderError as error:
                # Once the caller has seen deltas, a silent retry would duplicate them.
                if delivered or not error.retryable:
                    raise
                await self._wait_before_retry(error, budget)

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> Completion:
        """Stream a response and return only the finished Completion."""
        stream = self.stream(messages, tools=tools, model=model, **params)
        async with aclosing(stream):
            async for event in stream:
                if isinstance(event, StreamFinished):
                    return event.completion
        raise ProtocolError("the stream ended without a completion")  # pragma: no cover

    async def request(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> Completion:
        """One non-streamed request (for servers whose streaming breaks with tools)."""
        tools = tools if self.settings.offer_tools else None
        body = self.build_body(messages, tools=tools, model=model, stream=False, **params)
        payload = encode_body(body)
        budget = self._budget()
        while True:
            try:
                return await self._request_once(payload)
            except ProviderError as error:
                if not error.retryable:
                    raise
                await self._wait_before_retry(error, budget)

    def _budget(self) -> RetryBudget:
        return RetryBudget(
            max_retries=self.settings.max_retries,
            deadline_secs=self.settings.retry_deadline_secs,
            base_delay_secs=self._retry_base_delay,
        )

    async def _wait_before_retry(self, error: ProviderError, budget: RetryBudget) -> None:
        delay = budget.next_delay(getattr(error, "retry_after", None))
        if delay is None:
            attempts = budget.retries_done + 1
            noun = "attempt" if attempts == 1 else "attempts"
            error.message = f"{error.message} (gave up after {attempts} {noun})"
            error.args = (error.message,)
            raise error
        logger.info("retrying %s in %.2fs: %s", self.settings.label, delay, error.message)
        await asyncio.sleep(delay)

    def _headers(self, *, streaming: bool) -> dict[str, str]:
        settings = self.settings
        if not settings.api_key and preset_for(settings.provider).needs_key:
            raise MissingApiKeyError(_missing_key_message(settings))
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if streaming else "application/json",
            "User-Agent": f"codewhale/{__version__}",
            **settings.headers,
        }
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        return headers

    async def _endpoint_url(self) -> str:
        if self.launcher is None:
            return self._url
        self._base_url = await self.launcher.ensure_started()
        return self._base_url.rstrip("/") + "/chat/completions"

    async def _stream_once(self, payload: bytes) -> AsyncIterator[StreamEvent]:
        headers = self._headers(streaming=True)
        url = await self._endpoint_url()
        started = False
        try:
            async with self._http.stream("POST", url, content=payload, headers=headers) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise error_for_status(response, self.settings)
                started = True
                if _is_json(response):
                    completion = completion_from_message(_json(await response.aread()))
                    if completion.content:
                        yield TextDelta(completion.content)
                    yield StreamFinished(completion)
                    return
                async for event in self._read_events(response):
                    yield event
        except httpx.TimeoutException as error:
            raise self._timeout_error(error, started) from None
        except httpx.TransportError as error:
            raise self._transport_error(error, started) from None

    async def _read_events(self, response: httpx.Response) -> AsyncIterator[StreamEvent]:
        """Decode SSE events, enforcing the idle timeout between data events."""
        assembler = StreamAssembler()
        idle = self.settings.stream_idle_timeout_secs
        events = EventSource(response).aiter_sse()
        saw_data = done = False
        try:
            while True:
                try:
                    # After [DONE], keep reading briefly to the end of the body: an early
                    # break closes the connection, and reconnecting for every request costs
                    # more CPU than the request when many children stream at once.
                    async with asyncio.timeout(DRAIN_TIMEOUT_SECS if done else idle):
                        sse = await anext(events)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    if done:
                        break
                    raise IdleTimeoutError(
                        f"No data from {self.settings.label} for {idle:g} s "
                        "(stream idle timeout); the request was abandoned."
                    ) from None
                data = sse.data.strip()
                if not data:
                    continue
                saw_data = True
                if data == "[DONE]" or done:
                    done = True
                    continue
                for event in assembler.feed(_json(data)):
                    yield event
        finally:
            await events.aclose()
        if not saw_data:
            raise EmptyResponseError(
                f"{self.settings.label} answered HTTP 200 with an empty body; "
                "no response was produced."
            )
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

    async def _request_once(self, payload: bytes) -> Completion:
        headers = self._headers(streaming=False)
        url = await self._endpoint_url()
        try:
            response = await self._http.post(url, content=payload, headers=headers)
        except httpx.TimeoutException as error:
            raise self._timeout_error(error, False) from None
        except httpx.TransportError as error:
            raise self._transport_error(error, False) from None
        if response.status_code != 200:
            raise error_for_status(response, self.settings)
        if not response.content.strip():
            raise EmptyResponseError(
                f"{self.settings.label} answered HTTP 200 with an empty body; "
                "no response was produced."
            )
        return completion_from_message(_json(response.content))

    def _timeout_error(self, error: httpx.TimeoutException, started: bool) -> ProviderError:
        if isinstance(error, httpx.ConnectTimeout | httpx.PoolTimeout) or not started:
            return ProviderConnectionError(
                f"Timed out connecting to {self.settings.label} at {self._base_url}."
            )
        return IdleTimeoutError(f"{self.settings.label} stopped sending data (read timed out).")

    def _transport_error(self, error: httpx.TransportError, started: bool) -> ProviderError:
        reason = str(error) or type(error).__name__
        if started:
            return StreamInterruptedError(
                f"The connection to {self.settings.label} broke mid-response: {reason}."
            )
        return ProviderConnectionError(
            f"Could not reach {self.settings.label} at {self._base_url}: {reason}. "
            "Check the network and base_url."
        )


def _is_json(response: httpx.Response) -> bool:
    return "json" in response.headers.get("content-type", "")


def _json(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        preview = data[:120] if isinstance(data, str) else data[:120].decode("utf-8", "replace")
        raise ProtocolError(f"The provider sent malformed JSON: {preview!r}") from None


def _with_text_content(message: Message) -> Message:
    return {**message, "content": ""} if message.get("content") is None else message


def _with_usage(completion: Completion, earlier: Usage) -> Completion:
    """The completion, also charged for an earlier request made on its behalf."""
    usage = earlier if completion.usage is None else completion.usage + earlier
    return dataclasses.replace(completion, usage=usage)


def _missing_key_message(settings: ProviderSettings) -> str:
    key_env = preset_for(settings.provider).key_env or "CODEWHALE_API_KEY"
    return (
        f"{settings.label} needs an API key and none is configured. "
        f"Set {key_env} (or CODEWHALE_API_KEY), or add api_key to your user config "
        "(`codewhale config path` shows where it is)."
    )
