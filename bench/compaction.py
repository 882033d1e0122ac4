"""Request size and prefix-cache hits over a long scripted session, with and without compaction.

The engine (real system prompt, every built-in tool schema) runs TURNS turns of STEPS
read_file steps against the loopback LLM in its own process, with a WINDOW-token window.
The server counts a token per 4 bytes of the request and reports as cache hits the byte
prefix it shares with the previous request of the same conversation (the summariser's
requests are a conversation of their own), in whole 64-token blocks as DeepSeek does. The
prefix is taken over the prompt as a chat template lays it out, tool schemas first, then
the messages (the JSON body puts the tools after the messages, which a byte comparison of
bodies would count as never cached), so the hit rate means what it means there.

Run twice in one go: with compaction, and with automatic compaction off (the baseline:
what every session did before). Deterministic: no timing involved.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.targets import target
from codewhale.config_models import SandboxConfig
from codewhale.engine import events
from codewhale.engine.compaction import SUMMARISER_PROMPT, CompactionPolicy, ContextCompacted
from codewhale.engine.conversation import Conversation
from codewhale.engine.loop import Engine
from codewhale.engine.prompt import build_system_prompt
from codewhale.permissions import Mode, ModeSwitch
from codewhale.providers.client import ChatClient, encode_body
from codewhale.providers.pricing import cost_usd
from codewhale.providers.types import Usage
from codewhale.tools.base import ToolContext
from codewhale.tools.registry import ToolRegistry, default_tools
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.serve import loopback_process
from tests.support.settings import loopback_settings

WINDOW = 16_000
TURNS = 20
STEPS = 8
FILE_LINES = 60
BYTES_PER_TOKEN = 4
CACHE_BLOCK = 64
PEAK = datetime(2026, 11, 23, 2, tzinfo=UTC)  # a Monday, in DeepSeek's peak hours
SUMMARY = "The user has asked, turn after turn, for notes.txt to be read. " * 20

# The server process's memory: the last request of each conversation, by its system prompt.
_previous: dict[bytes, bytes] = {}


def respond(body: Any) -> Reply:
    """The scripted model, run inside the loopback server's process."""
    messages = body["messages"]
    # The bytes the client sent (the JSON round trip is exact), in the template's order.
    raw = encode_body(body.get("tools") or []) + encode_body(messages)
    conversation = encode_body(messages[0])
    hit = _common_prefix(_previous.get(conversation, b""), raw) // BYTES_PER_TOKEN
    _previous[conversation] = raw
    prompt = len(raw) // BYTES_PER_TOKEN
    hit -= hit % CACHE_BLOCK
    if messages[0]["content"] == SUMMARISER_PROMPT:
        reply = Reply(text=SUMMARY)
    else:
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        reads = sum(1 for m in messages[last_user:] if m["role"] == "tool")
        if reads < STEPS:
            reply = Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})])
        else:
            reply = Reply(text=f"Read it {reads} times; nothing changed.")
    answer = len(reply.text if isinstance(reply.text, str) else "") // BYTES_PER_TOKEN + 20
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": answer,
        "total_tokens": prompt + answer,
        "prompt_cache_hit_tokens": hit,
        "prompt_cache_miss_tokens": prompt - hit,
    }
    return Reply(text=reply.text, tool_calls=reply.tool_calls, usage=usage)


def _common_prefix(a: bytes, b: bytes) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # the longest equal prefix, by halves (slices compare in C)
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class Session:
    """What one run saw: each main request's usage, and where the compactions fell."""

    def __init__(self) -> None:
        self.requests: list[events.UsageEvent] = []
        self.summaries: list[events.UsageEvent] = []
        self.compacted_before: list[int] = []  # index of the first request after each
        self._pending: events.UsageEvent | None = None

    def __call__(self, event: events.Event) -> None:
        # The summariser's usage comes right before its ContextCompacted; a main
        # request's before the assistant_message.
        if isinstance(event, events.UsageEvent):
            self._pending = event
        elif isinstance(event, ContextCompacted):
            if self._pending is not None:
                self.summaries.append(self._pending)
            self._pending = None
            self.compacted_before.append(len(self.requests))
        elif isinstance(event, events.AssistantMessage) and self._pending is not None:
            self.requests.append(self._pending)
            self._pending = None


async def run(base_url: str, workspace: Path, *, compact: bool) -> Session:
    session = Session()
    client = ChatClient(loopback_settings(base_url))
    engine = Engine(
        client=client,
        tools=ToolRegistry(default_tools(SandboxConfig())),
        context=ToolContext(workspace=workspace, session_id="bench", modes=ModeSwitch(Mode.YOLO)),
        conversation=Conversation(
            [{"role": "system", "content": build_system_prompt(workspace, Mode.YOLO)}]
        ),
        emit=session,
        compaction=CompactionPolicy(window=WINDOW, auto=compact),
    )
    for turn in range(TURNS):
        await engine.run_turn(f"Read notes.txt again ({turn + 1} of {TURNS}).")
    await client.aclose()
    return session


def hit_rate(requests: list[events.UsageEvent]) -> float:
    prompt = sum(r.input for r in requests)
    return sum(r.cache_hit for r in requests) / prompt if prompt else 0.0


def dollars(requests: list[events.UsageEvent]) -> float:
    """At deepseek-v4-flash's peak prices (a hit costs 1/50 of a miss)."""
    total = 0.0
    for r in requests:
        usage = Usage(r.input, r.output, r.cache_hit, r.cache_miss)
        total += cost_usd("deepseek", "deepseek-v4-flash", usage, at=PEAK) or 0.0
    return total


def k(tokens: float) -> str:
    return f"{tokens / 1000:.1f}k"


async def measure() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        workspace = Path(scratch)
        lines = (f"line {i}: a line of a source file that is read again" for i in range(FILE_LINES))
        (workspace / "notes.txt").write_text("\n".join(lines) + "\n")
        runs = {}
        for compact in (True, False):
            with loopback_process("bench.compaction:respond") as base_url:
                runs[compact] = await run(base_url, workspace, compact=compact)
    with_, without = runs[True], runs[False]
    sizes = [r.input + r.output for r in with_.requests]
    baseline_sizes = [r.input + r.output for r in without.requests]
    print(
        f"compaction: window {k(WINDOW)} tokens, compact at 80%, {TURNS} turns of {STEPS} "
        f"reads, {len(sizes)} requests, {len(with_.compacted_before)} compactions"
    )
    every = max(len(sizes) // 12, 1)
    for label, series in (("with compaction", sizes), ("without", baseline_sizes)):
        shown = " ".join(k(size) for size in series[::every])
        print(f"compaction: request sizes {label:<15} (every {every}th) {shown}")
    print(
        f"compaction: largest request {k(max(sizes))} ({max(sizes) / WINDOW:.2f}x the window); "
        f"without compaction {k(max(baseline_sizes))} ({max(baseline_sizes) / WINDOW:.2f}x)"
    )
    target("largest request / configured window", max(sizes) / WINDOW, "≤", 1.0)
    sent = sum(r.input for r in with_.requests + with_.summaries)
    baseline_sent = sum(r.input for r in without.requests)
    missed = sum(r.cache_miss for r in with_.requests + with_.summaries)
    baseline_missed = sum(r.cache_miss for r in without.requests)
    print(
        f"compaction: prompt tokens sent {k(sent)} (summaries included); without compaction "
        f"{k(baseline_sent)} ({sent / baseline_sent:.2f}x); of them cache misses {k(missed)} "
        f"vs {k(baseline_missed)} ({missed / baseline_missed:.2f}x)"
    )
    cost, baseline_cost = dollars(with_.requests + with_.summaries), dollars(without.requests)
    print(
        f"compaction: at deepseek-v4-flash prices ${cost:.3f}; without compaction "
        f"${baseline_cost:.3f} ({cost / baseline_cost:.2f}x)"
    )
    first = with_.compacted_before[0] if with_.compacted_before else len(with_.requests)
    before, after = hit_rate(with_.requests[:first]), hit_rate(with_.requests[first:])
    right_after = [with_.requests[i] for i in with_.compacted_before if i < len(with_.requests)]
    dips = [r.cache_hit / r.input for r in right_after if r.input]
    print(
        f"compaction: cache hit rate {before:.0%} before the first compaction, {after:.0%} "
        f"after ({after / before:.2f}x); {statistics.median(dips) if dips else 0:.0%} on the "
        f"request right after one (the system prompt still hits); without compaction "
        f"{hit_rate(without.requests):.0%} ({after / hit_rate(without.requests):.2f}x)"
    )


def main() -> None:
    asyncio.run(measure())


if __name__ == "__main__":
    main()
