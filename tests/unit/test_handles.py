"""The handle store at size: deep slices, growing transcripts, JSONPath off the loop."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys

import jsonpath_rfc9535
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codewhale import handles_worker
from codewhale.handles import HARD_MAX_CHARS, WORKER_MIN_CHARS, HandleError, HandleStore
from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.work import HandleRead

MB = 1_000_000


def big_text(chars: int) -> str:
    # Multi-byte characters everywhere, so char offsets and byte offsets part ways.
    line = "line ünïcödé € 😀 " + "x" * 60 + "\n"
    return (line * (chars // len(line) + 1))[:chars]


def big_json(min_chars: int) -> str:
    items, size = [], 0
    while size < min_chars:
        item = {"id": len(items), "name": f"ïtem {len(items)}", "tags": ["a", "b"], "ok": True}
        items.append(item)
        size += len(json.dumps(item, ensure_ascii=False)) + 2
    return json.dumps({"items": items, "total": len(items)}, ensure_ascii=False)


def expected_jsonpath(expression: str, document: object, limit: int) -> tuple[str, int]:
    """What the query gives computed directly with the library, no handle code involved."""
    matches = [node.value for node in jsonpath_rfc9535.find(expression, document)]
    content = json.dumps(matches, ensure_ascii=False, indent=2)
    return content[:limit], len(content)


@pytest.fixture(scope="module")
def text_15mb() -> str:
    return big_text(15 * MB)


@pytest.mark.parametrize("backing", ["memory", "file"])
async def test_a_slice_of_the_third_megabyte_of_a_15_mb_handle(tmp_path, text_15mb, backing):
    store = HandleStore()
    if backing == "memory":
        handle = store.put("s", "big", text_15mb)
    else:
        path = tmp_path / "big.txt"
        path.write_text(text_15mb, encoding="utf-8")
        handle = store.put_file("s", "big", path)
    assert handle["length"] == len(text_15mb) and handle["type"] == "str"
    arguments = {"handle": "s/big", "slice": {"start": 2 * MB, "end": 3 * MB}, "max_chars": 50_000}
    for reply in (store.read(arguments), await store.read_async(arguments)):
        assert reply["content"] == text_15mb[2 * MB : 2 * MB + 50_000]
        assert reply["truncated"] and reply["shown_chars"] == 50_000
        assert reply["omitted_chars"] == 950_000
    # max_chars is capped at 50000; an open end runs to the end of the text.
    capped = store.read({"handle": "s/big", "slice": {"start": 14 * MB}, "max_chars": 10**6})
    assert capped["shown_chars"] == HARD_MAX_CHARS
    assert capped["content"] == text_15mb[14 * MB : 14 * MB + HARD_MAX_CHARS]
    assert capped["omitted_chars"] == len(text_15mb) - 14 * MB - HARD_MAX_CHARS
    lines = text_15mb.splitlines(keepends=True)
    ranged = store.read({"handle": "s/big", "range": {"start": 150_001, "end": 150_003}})
    assert ranged["content"] == "".join(lines[150_000:150_003])
    counted = store.read({"handle": "s/big", "count": True})
    assert counted == {
        "handle": "s/big",
        "projection": "count",
        "chars": len(text_15mb),
        "lines": len(lines),
        "bytes": len(text_15mb.encode()),
    }


def test_a_growing_transcript_stays_described_and_indexed(tmp_path):
    path = tmp_path / "t.jsonl"
    store = HandleStore()
    empty = store.put_file("agent:x", "transcript", path)  # before its first line
    assert (empty["length"], empty["sha256"]) == (0, hashlib.sha256(b"").hexdigest())
    written = []
    for n in range(1, 40):
        line = json.dumps({"n": n, "text": "é" * n + "😀"}, ensure_ascii=False) + "\n"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line)
        written.append(line)
        described = store.put_file("agent:x", "transcript", path)
        data = path.read_bytes()
        assert described["sha256"] == hashlib.sha256(data).hexdigest()
        assert described["length"] == len(data.decode())
        assert described["repr_preview"] == data.decode()[:160]
        reply = store.read({"handle": "agent:x/transcript", "range": {"start": n, "end": n}})
        assert reply["content"] == line
    middle = store.read({"handle": "agent:x/transcript", "range": {"start": 10, "end": 12}})
    assert middle["content"] == "".join(written[9:12])
    assert store.read({"handle": "agent:x/transcript", "count": True})["lines"] == 39


def test_a_character_split_across_two_appends_is_counted_once_complete(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("ab€".encode()[:-1])  # the euro sign's last byte is not written yet
    store = HandleStore()
    partial = store.put_file("s", "t", path)
    assert partial["length"] == 2
    assert partial["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    with path.open("ab") as handle:
        handle.write("€".encode()[-1:] + b"\ncd")
    complete = store.put_file("s", "t", path)
    assert complete["length"] == len("ab€\ncd")
    assert complete["sha256"] == hashlib.sha256("ab€\ncd".encode()).hexdigest()
    assert store.read({"handle": "s/t", "slice": {"start": 2, "end": 4}})["content"] == "€\n"


def test_a_rewritten_file_is_indexed_again(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("one\ntwo\nthree\n")
    store = HandleStore()
    store.put_file("s", "t", path)
    path.write_text("new\n")  # shorter: truncated and rewritten
    described = store.put_file("s", "t", path)
    assert described["sha256"] == hashlib.sha256(b"new\n").hexdigest()
    assert store.read({"handle": "s/t", "count": True})["lines"] == 1
    replacement = tmp_path / "other.txt"
    replacement.write_text("replaced file, longer than before\n")
    os.replace(replacement, path)  # another file under the same name
    assert store.read({"handle": "s/t", "slice": {"start": 0}})["content"] == (
        "replaced file, longer than before\n"
    )


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab\n\r\x0b\x0c\x1c\x85\u2028é😀")), max_size=40),
    start=st.integers(0, 12),
    end=st.one_of(st.none(), st.integers(0, 12)),
)
def test_in_memory_lines_are_those_of_splitlines(text, start, end):
    store = HandleStore()
    store.put("s", "t", text)
    reply = store.read({"handle": "s/t", "slice": {"start": start, "end": end, "unit": "lines"}})
    assert reply["content"] == "".join(text.splitlines(keepends=True)[start:end])
    assert store.read({"handle": "s/t", "count": True})["lines"] == len(text.splitlines())


JSONPATHS = ["$.items[0:3]", "$.items[?@.id > 2000 && @.id < 2004].name", "$..tags[1]", "$.total"]


@pytest.mark.parametrize("backing", ["str", "dict", "file"])
async def test_jsonpath_on_a_big_payload_runs_in_the_worker_and_agrees(tmp_path, backing):
    text = big_json(WORKER_MIN_CHARS + 100_000)
    document = json.loads(text)
    store = HandleStore()
    if backing == "str":
        store.put("s", "doc", text)
    elif backing == "dict":
        store.put("s", "doc", document)
    else:
        (tmp_path / "doc.json").write_text(text, encoding="utf-8")
        store.put_file("s", "doc", tmp_path / "doc.json")
    handles_worker._WORKER.close()
    for expression in JSONPATHS:
        for limit in (200, 50_000):
            arguments = {"handle": "s/doc", "jsonpath": expression, "max_chars": limit}
            in_process = store.read(arguments)
            in_worker = await store.read_async(arguments)
            assert in_worker == in_process
            shown, total = expected_jsonpath(expression, document, limit)
            assert in_worker["content"] == shown
            assert in_worker["omitted_chars"] == max(total - limit, 0)
            assert in_worker["truncated"] == (total > limit)
    worker = handles_worker._WORKER._process
    assert worker is not None and worker.poll() is None  # the async reads went to it


async def test_the_worker_reports_errors_like_the_in_process_path():
    store = HandleStore()
    store.put("s", "prose", "not json at all " * 50_000)
    arguments = {"handle": "s/prose", "jsonpath": "$.a"}
    with pytest.raises(HandleError, match="plain text, not JSON"):
        store.read(arguments)
    with pytest.raises(HandleError, match="plain text, not JSON"):
        await store.read_async(arguments)
    with pytest.raises(HandleError, match="invalid JSONPath"):
        await store.read_async({"handle": "s/prose", "jsonpath": "$.["})


def test_payloads_cross_to_the_worker_unchanged():
    # Lone surrogates (from surrogateescape-decoded output) and astral characters.
    text = json.dumps({"odd": "\udcff and 😀", "pad": "é" * WORKER_MIN_CHARS}, ensure_ascii=False)
    content, total = handles_worker.jsonpath_in_worker("$.odd", 100, text=text)
    assert (content, total) == expected_jsonpath("$.odd", json.loads(text), 100)


async def test_the_loop_keeps_running_while_the_worker_queries():
    store = HandleStore()
    store.put("s", "doc", big_json(2 * MB))
    await store.read_async({"handle": "s/doc", "jsonpath": "$.total"})  # worker started
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.001)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    reply = await store.read_async({"handle": "s/doc", "jsonpath": "$..*", "max_chars": 100})
    done.set()
    await ticking
    assert reply["truncated"] and reply["shown_chars"] == 100
    # `$..*` over 2 MB takes the worker a good part of a second; inline, the ticker
    # would not have advanced at all.
    assert ticks >= 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/environ")
async def test_the_worker_sees_no_keys_and_restarts_after_dying(monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-must-not-leak")
    handles_worker._WORKER.close()
    store = HandleStore()
    store.put("s", "doc", big_json(WORKER_MIN_CHARS))
    arguments = {"handle": "s/doc", "jsonpath": "$.total"}
    first = await store.read_async(arguments)
    process = handles_worker._WORKER._process
    assert process is not None
    with open(f"/proc/{process.pid}/environ", "rb") as handle:
        environ = handle.read()
    assert b"sk-must-not-leak" not in environ and b"DEEPSEEK" not in environ
    process.kill()
    process.wait()
    assert await store.read_async(arguments) == first  # a fresh worker answers


async def test_the_tool_reads_off_the_loop_and_bounds_its_own_output(tmp_path):
    assert HandleRead.bounded_output is True
    context = ToolContext(workspace=tmp_path, session_id="s")
    context.handles.put("s", "out", big_text(3 * MB))
    result = await HandleRead().run(
        {"handle": "s/out", "slice": {"start": 2 * MB}, "max_chars": 30_000}, context
    )
    reply = json.loads(result.output)
    assert reply["content"] == big_text(3 * MB)[2 * MB : 2 * MB + 30_000]
    assert reply["omitted_chars"] == MB - 30_000
    with pytest.raises(ToolError, match="exactly one projection"):
        await HandleRead().run({"handle": "s/out"}, context)
