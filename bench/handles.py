"""Handles at 15 MB: describing a growing transcript, slicing deep into it, and JSONPath
without stalling the event loop.

- describe: a 15 MB JSONL transcript gets one more line, then is described again (what
  each sub-agent projection does). Against re-reading and re-hashing the whole file,
  which is what describing it cost before the incremental hash.
- slice: the 3rd MB of a 15 MB handle (`slice {start: 2000000, end: 3000000}`), in
  memory and file-backed; only max_chars (50000) are decoded.
- jsonpath `$..*` over a 15 MB JSON handle while a ticker task sleeps 5 ms in a loop:
  the longest gap between its ticks (5 ms when the loop never stalls) and the read's
  wall time, three ways: handle_read as the tool runs it (worker process), the same
  query in a plain thread, and inline on the loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from codewhale.handles import HandleStore

TARGET_BYTES = 15 * 1024 * 1024
TICK = 0.005
ROUNDS = 20


def make_json() -> str:
    item = {"id": 0, "name": "item", "tags": ["alpha", "beta", "ünïcode"], "meta": {"ok": True}}
    size = len(json.dumps(item, ensure_ascii=False))
    count = TARGET_BYTES // size
    items = [{**item, "id": n, "name": f"item {n}"} for n in range(count)]
    return json.dumps({"items": items}, ensure_ascii=False)


def make_transcript(path: Path) -> None:
    line = json.dumps({"role": "tool", "content": "x" * 2000 + " é"}) + "\n"
    with path.open("w", encoding="utf-8") as handle:
        handle.write(line * (TARGET_BYTES // len(line)))


def median_ms(action: Callable[[], Any], rounds: int = ROUNDS) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def bench_describe(store: HandleStore, path: Path) -> None:
    store.put_file("agent:bench", "transcript", path)  # the first look indexes it all

    def append_and_describe() -> None:
        with path.open("a", encoding="utf-8") as handle:
            handle.write('{"role": "assistant", "content": "one more line"}\n')
        store.put_file("agent:bench", "transcript", path)

    def rehash() -> None:
        hashlib.sha256(path.read_text(encoding="utf-8").encode()).hexdigest()

    incremental = median_ms(append_and_describe)
    full = median_ms(rehash)
    described = store.put_file("agent:bench", "transcript", path)
    assert described["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    print(
        f"handles: describe a {path.stat().st_size / 2**20:.0f} MB transcript after one "
        f"appended line  {incremental:7.3f} ms  (re-reading and re-hashing it: "
        f"{full:6.1f} ms, {full / incremental:,.0f}x)"
    )


def bench_slice(store: HandleStore, handle: str, label: str) -> None:
    arguments = {"handle": handle, "slice": {"start": 2_000_000, "end": 3_000_000}}
    arguments["max_chars"] = 50_000
    reply = store.read(arguments)
    assert reply["shown_chars"] == 50_000 and reply["omitted_chars"] == 950_000
    print(
        f"handles: slice of the 3rd MB, {label:<12} {median_ms(lambda: store.read(arguments)):7.3f}"
        " ms  (50000 chars shown)"
    )


async def with_ticker(work: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """Run `work` while a ticker sleeps TICK at a time; (longest tick gap, work time)."""
    done = asyncio.Event()
    longest = 0.0

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(TICK * 2)  # let the ticker start
    started = time.perf_counter()
    await work()
    elapsed = time.perf_counter() - started
    done.set()
    await ticking
    return longest * 1000, elapsed


async def bench_jsonpath(store: HandleStore) -> None:
    arguments = {"handle": "bench/json", "jsonpath": "$..*"}
    await store.read_async({"handle": "bench/json", "jsonpath": "$.items[0]"})  # start worker

    async def tool() -> None:
        await store.read_async(arguments)

    async def thread() -> None:
        await asyncio.to_thread(store.read, arguments)

    async def inline() -> None:
        store.read(arguments)

    for label, work in (("worker (handle_read)", tool), ("thread", thread), ("inline", inline)):
        stall, elapsed = await with_ticker(work)
        print(
            f"handles: jsonpath $..* over 15 MB, {label:<20} longest loop gap "
            f"{stall:7.1f} ms  read {elapsed:5.2f} s"
        )


def main() -> None:
    store = HandleStore()
    text = make_json()
    store.put("bench", "json", text)
    with tempfile.TemporaryDirectory() as scratch:
        json_file = Path(scratch) / "doc.json"
        json_file.write_text(text, encoding="utf-8")
        store.put_file("bench", "json_file", json_file)
        transcript = Path(scratch) / "transcript.jsonl"
        make_transcript(transcript)
        bench_describe(store, transcript)
        bench_slice(store, "bench/json", "in memory")
        bench_slice(store, "bench/json_file", "file-backed")
        asyncio.run(bench_jsonpath(store))


if __name__ == "__main__":
    main()
