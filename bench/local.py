"""The offline model: load time, prompt and generation speed, time to first token,
and what our client adds over talking to llama.cpp's server directly.

Both paths hit the same server with the same request (temperature 0, so the same
tokens); they alternate run by run so drift on a noisy machine hits both equally.
Target: client wall time / direct wall time <= 1.05.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from codewhale.engine.prompt import build_system_prompt
from codewhale.permissions import Mode
from codewhale.providers.client import ChatClient, encode_body
from codewhale.providers.types import StreamFinished, TextDelta
from tests.support.local_model import local_settings, make_server

RUNS = 15
MAX_TOKENS = 64
ASK = [{"role": "user", "content": "Describe a lighthouse at night in a short paragraph."}]


async def via_client(client: ChatClient) -> tuple[float, float, int]:
    """(time to first token, total, completion tokens) through ChatClient."""
    started = time.perf_counter()
    first = 0.0
    async for event in client.stream(ASK, temperature=0, max_tokens=MAX_TOKENS):
        if isinstance(event, TextDelta) and not first:
            first = time.perf_counter() - started
        elif isinstance(event, StreamFinished):
            tokens = event.completion.usage.output_tokens
    return first, time.perf_counter() - started, tokens


async def direct(http: httpx.AsyncClient, url: str, body: bytes) -> tuple[float, float, int]:
    """The same request with nothing but httpx and a line split."""
    started = time.perf_counter()
    first = 0.0
    tokens = 0
    headers = {"Content-Type": "application/json"}
    async with http.stream("POST", url, content=body, headers=headers) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            elif chunk["choices"] and chunk["choices"][0]["delta"].get("content") and not first:
                first = time.perf_counter() - started
    return first, time.perf_counter() - started, tokens


async def first_answer(client: ChatClient) -> float:
    """Time to the first token of a new session's first answer (its prompt not cached)."""
    system = build_system_prompt(Path.cwd(), Mode.AGENT, tools=False)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Hello!"}]
    started = time.perf_counter()
    async for event in client.stream(messages, temperature=0, max_tokens=8):
        if isinstance(event, TextDelta):
            return time.perf_counter() - started
    raise AssertionError("no text")


async def prompt_speed(client: ChatClient) -> float:
    """Prompt tokens per second for a fresh (uncached) ~1,400-token prompt."""
    text = " ".join(f"item{i}" for i in range(400)) + " Which item comes first?"
    started = time.perf_counter()
    completion = await client.request(
        [{"role": "user", "content": text}], temperature=0, max_tokens=1
    )
    return completion.usage.input_tokens / (time.perf_counter() - started)


async def measure() -> None:
    server = make_server(Path(tempfile.mkdtemp()))
    started = time.perf_counter()
    base_url = await server.ensure_started()
    load = time.perf_counter() - started
    client = ChatClient(local_settings(base_url))
    body = encode_body(client.build_body(ASK, temperature=0, max_tokens=MAX_TOKENS))
    url = base_url + "/chat/completions"
    try:
        first = await first_answer(client)
        async with httpx.AsyncClient(timeout=120) as http:
            await via_client(client)  # warm the prefix cache and both connection pools
            await direct(http, url, body)
            ours, theirs = [], []
            for _ in range(RUNS):
                ours.append(await via_client(client))
                theirs.append(await direct(http, url, body))
        pp = await prompt_speed(client)
    finally:
        await client.aclose()
        await server.stop()

    def median(runs, index):
        return statistics.median(run[index] for run in runs)

    tokens = ours[0][2]
    assert all(run[2] == tokens for run in ours + theirs), "runs generated different lengths"
    generation = tokens / (median(theirs, 1) - median(theirs, 0))
    # Each run's pair ran back to back, so the ratio per pair cancels slow drift.
    ratio = statistics.median(a[1] / b[1] for a, b in zip(ours, theirs, strict=True))
    print("offline model (SmolLM2-135M Q4_1, llama.cpp server, 1 thread)")
    print(f"  server start + model load      {load * 1000:8.0f} ms")
    print(f"  prompt processing              {pp:8.0f} tokens/s")
    print(f"  generation                     {generation:8.1f} tokens/s")
    print(f"  first answer of a session      {first * 1000:8.0f} ms to its first token")
    print(f"  time to first token, direct    {median(theirs, 0) * 1000:8.1f} ms")
    print(f"  time to first token, client    {median(ours, 0) * 1000:8.1f} ms")
    print(f"  {tokens} tokens, direct (median)  {median(theirs, 1) * 1000:8.1f} ms")
    print(f"  {tokens} tokens, client (median)  {median(ours, 1) * 1000:8.1f} ms")
    print(
        f"  client / direct wall time      {ratio:8.3f}   (median of {RUNS} pairs; target <= 1.05)"
    )


if __name__ == "__main__":
    asyncio.run(measure())
