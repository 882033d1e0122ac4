"""RLM sessions at scale: a 20 MB context, a regex search, chunking, and a 16-prompt batch.

The loopback LLM (its own process) answers each sub-LLM call after 100 ms; a batch
runs its prompts concurrently, so it should take about one call's time, not 16.
"""

from __future__ import annotations

import asyncio
import time

from codewhale.config_models import RlmConfig
from codewhale.handles import HandleStore
from codewhale.providers.client import ChatClient
from codewhale.rlm.sessions import RlmManager
from tests.support.llm_server import Reply
from tests.support.serve import loopback_process
from tests.support.settings import loopback_settings

SIZE_MB = 20
LATENCY = 0.1


def responder(body: dict) -> Reply:
    return Reply(text="ok", request_delay=LATENCY)


def make_context() -> str:
    line = "2026-11-22T10:00:00Z INFO request served in 12ms path=/api/items status=200\n"
    lines = (SIZE_MB * 1024 * 1024) // len(line)
    text = line * lines
    return (
        text[: len(text) // 2] + "2026-11-22T10:00:01Z ERROR disk full\n" + text[len(text) // 2 :]
    )


async def timed(manager: RlmManager, code: str) -> tuple[float, dict]:
    started = time.perf_counter()
    reply = await manager.evaluate("big", code)
    assert reply["ok"], reply
    return time.perf_counter() - started, reply


async def measure(base_url: str) -> None:
    client = ChatClient(loopback_settings(base_url))
    manager = RlmManager(client=client, config=RlmConfig(), handles=HandleStore())
    context = make_context()
    started = time.perf_counter()
    await manager.open("big", context, {"source": "bench"})
    opened = time.perf_counter() - started
    search, _ = await timed(manager, "hits = search(r'ERROR .*')")
    chunking, _ = await timed(manager, "parts = chunk(max_chars=20000)")
    await timed(manager, "llm_query('warm up')")
    single, _ = await timed(manager, "llm_query('one')")
    batch, _ = await timed(manager, "llm_query_batched([f'q{i}' for i in range(16)])")
    await manager.close_all()
    await client.aclose()
    print(f"rlm: open {SIZE_MB} MB context        {opened * 1000:7.1f} ms")
    print(f"rlm: search(r'ERROR .*')          {search * 1000:7.1f} ms")
    print(f"rlm: chunk(max_chars=20000)       {chunking * 1000:7.1f} ms")
    print(
        f"rlm: one llm_query                {single * 1000:7.1f} ms  ({LATENCY * 1000:.0f} ms "
        "server latency)"
    )
    print(
        f"rlm: 16-prompt batch              {batch * 1000:7.1f} ms  ({batch / single:.2f}x one "
        "call)"
    )


def main() -> None:
    with loopback_process("bench.rlm:responder") as base_url:
        asyncio.run(measure(base_url))


if __name__ == "__main__":
    main()
