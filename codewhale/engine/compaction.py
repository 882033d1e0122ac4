"""Keeping a conversation inside its model's context window.

The size of the next request is the provider's own count for the last one (prompt plus
answer tokens) plus an estimate, from UTF-8 bytes, of the messages added since. When it
nears the window, the older messages are summarised by a cheap model into one message.
The conversation's message list is never rewritten (recorders append to it and children
continue from their transcripts): requests are built from a view of it, the system prompt,
the summary and the newest messages (`Conversation.request_messages`). Those are the very
same dicts as before, so their bytes on the wire do not change and the provider's prefix
cache keeps matching the system prompt, and after the compaction the new prefix too.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from codewhale.engine.events import Event
from codewhale.providers.errors import ProviderError
from codewhale.providers.presets import context_window
from codewhale.providers.types import Usage

if TYPE_CHECKING:  # annotations only: the UI imports this module's events at first paint
    from codewhale.config_models import ContextConfig
    from codewhale.engine.conversation import Conversation
    from codewhale.providers.client import ChatClient

# The fallback estimate for text the provider has not counted yet: a token is about four
# bytes of English or code and one CJK character (three bytes); three errs towards
# compacting a little early rather than sending a request past the window.
BYTES_PER_TOKEN = 3
# A compaction must free at least this share of the window to be worth a model call; below
# it (and after a failed one) automatic compaction waits until the context has grown by it.
MIN_GAIN = 0.05
# The summary's length: a share of the window, within these bounds (tokens).
SUMMARY_SHARE = 0.06
SUMMARY_TOKENS = (256, 4_096)
# Room left in the summariser's own window for its instructions and answer (tokens).
SUMMARISER_MARGIN = 2_048
# How much of one message the summariser reads (characters): tool output is mostly
# detail the summary would drop, and large outputs already live in handles.
TOOL_OUTPUT_CHARS = 4_000
MESSAGE_CHARS = 12_000
ARGUMENT_CHARS = 600

SUMMARISER_PROMPT = """\
You condense the earlier part of a conversation between a user and CodeWhale, a coding \
agent working in a software repository, so that the agent can carry on without it. Write \
the summary in the language of the conversation. Keep:
- what the user asked for and every constraint they set; quote the latest request word \
for word;
- decisions taken and why;
- files read, created or changed (with paths), commands run and their outcome, errors \
met and how they were resolved;
- what is done, what is in progress and the next steps;
- identifiers exactly as written: paths, symbols, handle ids, agent ids, URLs.
If the text begins with an earlier summary, fold it in. Leave out pleasantries and \
anything later superseded. Answer with the summary only: plain prose and bullet lists, \
no preamble."""

SUMMARY_HEADING = (
    "[Summary of the earlier conversation. It replaces {covers}, condensed to keep the "
    "context within the model's window; the messages after it are unchanged. Re-read "
    "files or handles for any detail it leaves out.]"
)


@dataclass(frozen=True)
class CompactionPolicy:
    """When to compact and what to keep: the `[context]` config section."""

    # Tokens the model takes; None: known per model and provider (presets.context_window).
    window: int | None = None
    compact_at: float = 0.8
    keep_recent: float = 0.25
    # None: the provider's fast model.
    summary_model: str | None = None
    auto: bool = True

    @classmethod
    def from_config(cls, section: ContextConfig) -> CompactionPolicy:
        return cls(
            window=section.window,
            compact_at=section.compact_at,
            keep_recent=section.keep_recent,
            summary_model=section.summary_model,
            auto=section.auto_compact,
        )


@dataclass(frozen=True)
class Compaction:
    """One compaction done: what was summarised, what was kept, the size before and after."""

    summary: dict[str, Any]
    # Index in Conversation.messages of the first message kept as it was.
    recent_start: int
    summarised: int
    kept: int
    tokens_before: int
    # Estimated until the next response reports the real figure.
    tokens_after: int
    window: int
    model: str
    usage: Usage | None

    def event(self, trigger: str, kept: int) -> ContextCompacted:
        """What the session file records: `kept`, the newest messages left as they were."""
        return ContextCompacted(
            trigger=trigger,
            summarised=self.summarised,
            kept=kept,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            window=self.window,
            summary=self.summary,
        )


class CompactionError(Exception):
    """The conversation could not be compacted; it is left exactly as it was."""


class NothingToCompact(CompactionError):
    """Everything older than the newest messages is already summarised (or there is none)."""


@dataclass(frozen=True, kw_only=True)
class ContextCompacted(Event):
    """Older messages were replaced by a summary in what the model sees from now on.

    Recorded in the session file: loading replaces every message between the system
    prompt and the last `kept` ones with `summary`, so a resumed session starts compacted.
    """

    type: ClassVar[str] = "context_compacted"
    trigger: str  # "auto" (the context neared the window) | "manual" (/compact)
    summarised: int
    kept: int
    tokens_before: int
    tokens_after: int
    window: int
    summary: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class CompactionFailed(Event):
    """A warning: the summary could not be made, so the conversation goes on uncompacted."""

    type: ClassVar[str] = "compaction_failed"
    trigger: str
    message: str


class Compactor:
    """Tracks one conversation's size and compacts it; one per engine."""

    def __init__(self, client: ChatClient, policy: CompactionPolicy) -> None:
        self.client = client
        self.policy = policy
        # Tokens of the conversation's first `_covered` messages (and the tool list), as
        # last measured or estimated; None until the first look.
        self._tokens: int | None = None
        self._covered = 0
        self._epoch = -1
        # Automatic compaction waits until the size reaches this: after a failure, or when
        # there was too little to summarise.
        self._quiet_until = 0
        self._lock = asyncio.Lock()

    def window(self, model: str) -> int:
        return self.policy.window or context_window(self.client.settings.provider, model)

    def size(self, conversation: Conversation, tools: list[dict[str, Any]]) -> int:
        """Tokens the next request would carry: measured, plus an estimate for what is new."""
        if self._tokens is None or self._epoch != conversation.epoch:
            self._epoch = conversation.epoch
            self._tokens, self._covered, self._quiet_until = self.tools_size(tools), 0, 0
        messages = conversation.messages
        if self._covered < len(messages):
            self._tokens += estimate_messages(messages, self._covered, conversation.known_sizes)
            self._covered = len(messages)
        return self._tokens

    def tools_size(self, tools: list[dict[str, Any]]) -> int:
        """Tokens the tool list adds to every request, as `size` counts them."""
        # A client that offers no tools (the offline model, chat only) sends none.
        return estimate_tokens(tools) if self.client.settings.offer_tools else 0

    def observe(self, conversation: Conversation, usage: Usage, covered: int) -> None:
        """The provider's count for a request and its answer, which covers `covered` messages."""
        if usage.input_tokens <= 0:
            return  # a server that reports no usage: the estimate goes on
        self._epoch = conversation.epoch
        self._tokens = usage.input_tokens + usage.output_tokens
        self._covered = covered

    def due(self, conversation: Conversation, tools: list[dict[str, Any]], model: str) -> bool:
        if not self.policy.auto:
            return False
        size = self.size(conversation, tools)
        return size >= self.policy.compact_at * self.window(model) and size >= self._quiet_until

    async def compact(
        self,
        conversation: Conversation,
        tools: list[dict[str, Any]],
        model: str,
        *,
        manual: bool,
    ) -> Compaction | None:
        """Summarise the older messages into one; None if (no longer) due.

        Raises CompactionError with the conversation untouched: NothingToCompact when
        there is nothing older than what must be kept, or the summary request failed.
        """
        async with self._lock:
            if not manual and not self.due(conversation, tools, model):
                return None
            try:
                return await self._compact(conversation, tools, model, manual=manual)
            except CompactionError:
                if not manual:
                    size = self.size(conversation, tools)
                    self._quiet_until = size + int(MIN_GAIN * self.window(model))
                raise

    async def _compact(
        self,
        conversation: Conversation,
        tools: list[dict[str, Any]],
        model: str,
        *,
        manual: bool,
    ) -> Compaction:
        epoch = conversation.epoch
        window = self.window(model)
        before = self.size(conversation, tools)
        messages = conversation.messages
        end = len(messages)
        previous = conversation.summary
        first = conversation.recent_start if previous is not None else 1
        sizes = [encoded_size(message) for message in messages[first:end]]
        fixed = encoded_size(messages[0]) + encoded_size(tools)
        fixed += encoded_size(previous) if previous is not None else 0
        # The provider's count spread over the bytes: converts the budgets into bytes.
        tokens_per_byte = before / max(fixed + sum(sizes), 1)
        budget = self.policy.keep_recent * window / max(tokens_per_byte, 1e-9)
        cut = choose_cut(messages, first, end, sizes, budget, manual=manual)
        dropped = sum(sizes[: cut - first])
        if not manual and dropped * tokens_per_byte < MIN_GAIN * window:
            raise NothingToCompact("the older messages are too small to be worth a summary")
        older = ([previous] if previous is not None else []) + messages[first:cut]
        summary_model = self.policy.summary_model or self.client.settings.fast_model
        summary_tokens = int(min(max(SUMMARY_SHARE * window, SUMMARY_TOKENS[0]), SUMMARY_TOKENS[1]))
        room = self.window(summary_model) - summary_tokens - SUMMARISER_MARGIN
        request = [
            {"role": "system", "content": SUMMARISER_PROMPT},
            {"role": "user", "content": render(older, max(room, 1_000) * BYTES_PER_TOKEN)},
        ]
        try:
            completion = await self.client.complete(
                request, model=summary_model, max_tokens=summary_tokens
            )
        except ProviderError as error:
            raise CompactionError(f"the summary request failed: {error.message}") from None
        text = completion.content.strip()
        if completion.finish_reason == "content_filter":
            raise CompactionError("the provider's content filter stopped the summary")
        if not text:
            raise CompactionError("the summariser answered with nothing")
        if conversation.epoch != epoch:
            raise CompactionError("the conversation was cleared while it was being summarised")
        heading = SUMMARY_HEADING.format(covers=describe(older, previous is not None))
        summary = {"role": "user", "content": f"{heading}\n\n{text}"}
        conversation.compact(summary, cut)
        kept_bytes = sum(sizes[cut - first :])
        fixed += encoded_size(summary) - (encoded_size(previous) if previous is not None else 0)
        after = round(tokens_per_byte * (fixed + kept_bytes))
        self._tokens, self._covered, self._quiet_until = after, end, 0
        return Compaction(
            summary=summary,
            recent_start=cut,
            summarised=len(older),
            kept=end - cut,
            tokens_before=before,
            tokens_after=after,
            window=window,
            model=summary_model,
            usage=completion.usage,
        )


def choose_cut(
    messages: list[dict[str, Any]],
    first: int,
    end: int,
    sizes: list[int],
    budget: float,
    *,
    manual: bool,
) -> int:
    """Where the kept messages start: as many of the newest as fit in `budget` bytes.

    Never before a tool result (a tool call and its results stay on one side), always
    after `first` (something is summarised), and keeping at least the last exchange. On
    demand, when everything fits anyway, the newest turn alone is kept, from its user
    message on.
    """
    # kept[i]: bytes of messages[first + i:end]
    kept = [0] * (len(sizes) + 1)
    for i in range(len(sizes) - 1, -1, -1):
        kept[i] = kept[i + 1] + sizes[i]
    if manual and kept[0] <= budget:
        users = (i for i in range(first, end) if messages[i].get("role") == "user")
        turn = max(users, default=first)
        cuts = [turn] if turn > first else []
    else:
        cuts = [i for i in range(first + 1, end) if messages[i].get("role") != "tool"]
    if not cuts:
        raise NothingToCompact("there is nothing older than the newest messages to summarise")
    return next((cut for cut in cuts if kept[cut - first] <= budget), cuts[-1])


def render(messages: list[dict[str, Any]], limit: int) -> str:
    """The messages as a plain transcript for the summariser, at most `limit` characters."""
    names: dict[str, str] = {}
    parts = []
    for message in messages:
        role = str(message.get("role") or "message")
        content = _text(message.get("content"))
        if role == "tool":
            name = names.get(str(message.get("tool_call_id")), "a tool")
            parts.append(f"[result of {name}]\n{_clip(content, TOOL_OUTPUT_CHARS)}")
            continue
        block = f"[{role}]\n{_clip(content, MESSAGE_CHARS)}" if content else f"[{role}]"
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            name = str(function.get("name") or "a tool")
            names[str(call.get("id"))] = name
            arguments = _clip(_text(function.get("arguments")), ARGUMENT_CHARS)
            block += f"\n[calls {name} {arguments}]"
        parts.append(block)
    return _clip("\n\n".join(parts), limit)


def describe(older: list[dict[str, Any]], with_summary: bool) -> str:
    """What a summary stands for, in words: `an earlier summary and 38 messages (...)`."""
    messages = older[1:] if with_summary else older
    requests = sum(1 for m in messages if m.get("role") == "user")
    calls = sum(len(m.get("tool_calls") or ()) for m in messages)
    count = f"{len(messages)} message{'' if len(messages) == 1 else 's'}"
    detail = f"{requests} from the user, {calls} tool call{'' if calls == 1 else 's'}"
    what = f"{count} ({detail} with their results)" if calls else f"{count} ({detail})"
    return f"an earlier summary and {what}" if with_summary else what


def encoded_size(value: Any) -> int:
    """Bytes of `value` as JSON, about as the request carries it."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def estimate_tokens(value: Any) -> int:
    """The fallback estimate (no tokenizer: it would need a vocabulary download)."""
    return tokens_for(encoded_size(value))


def tokens_for(size: int) -> int:
    """The estimate for `size` bytes of JSON."""
    return -(-size // BYTES_PER_TOKEN)


def estimate_messages(
    messages: list[dict[str, Any]], start: int, known_sizes: list[int | None]
) -> int:
    """estimate_tokens of each of messages[start:], summed; a size in `known_sizes` (by
    index) is taken as it is: a resumed session's 5,000 messages encoded cost 16 ms."""
    total = 0
    for index in range(start, len(messages)):
        size = known_sizes[index] if index < len(known_sizes) else None
        if size is None:
            size = encoded_size(messages[index])
        total += tokens_for(size)
    return total


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _clip(text: str, limit: int) -> str:
    """`text`, or its beginning and end around a note of what was left out."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit} characters left out …]\n{text[-tail:]}"
