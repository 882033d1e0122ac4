"""Edits change only the asked text: every other byte of the file stays as it was.

Real files in temp dirs, in Latin-1, Windows-1252, UTF-8 with a BOM, UTF-16 and UTF-32
with a BOM, CRLF, mixed line endings, no final newline and executable mode; each is edited
with edit_file and apply_patch, and the bytes on disk are compared with the original's
bytes carrying only that change.
"""

from __future__ import annotations

import codecs
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.edit import EditFile
from codewhale.tools.files import ReadFile, WriteFile
from codewhale.tools.patch import ApplyPatch
from codewhale.tools.text_encoding import LATIN_1, UTF8, WINDOWS_1252, detect
from codewhale.tools.work import RevertTurn


@pytest.fixture
def context(tmp_path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(workspace=root, session_id="s1")


@dataclass(frozen=True)
class Stored:
    """How a sample file is stored: codec, byte-order mark, each line's ending, and mode."""

    codec: str = "utf-8"
    bom: bytes = b""
    endings: tuple[str, str, str, str] = ("\n", "\n", "\n", "\n")
    first_line: str = "# café naïve, à la"
    mode: int = 0o644

    def encode(self, lines: list[str]) -> bytes:
        text = "".join(line + end for line, end in zip(lines, self.endings, strict=True))
        return self.bom + text.encode(self.codec)


# The lines after each sample's first line, and the same with the asked change.
TAIL = ["alpha = 'déjà'", "beta = 1", "gamma = 'ok'"]
CHANGED_TAIL = ["alpha = 'déjà'", "beta = 'ü'", "gamma = 'ok'"]

FORMATS = {
    "latin-1": Stored(codec="latin-1"),
    # 0x93 0x94 0x97 0x80: letters in Windows-1252, control codes in Latin-1, valid in both.
    "cp1252": Stored(codec="cp1252", first_line="# “quoted” — 5 €"),
    "utf-8-bom": Stored(bom=codecs.BOM_UTF8),
    "utf-16-le-bom": Stored(codec="utf-16-le", bom=codecs.BOM_UTF16_LE, first_line="# 漢字 ✓"),
    "utf-16-be-bom": Stored(codec="utf-16-be", bom=codecs.BOM_UTF16_BE, first_line="# 漢字 ✓"),
    "utf-32-le-bom": Stored(codec="utf-32-le", bom=codecs.BOM_UTF32_LE, first_line="# 🐋"),
    "crlf": Stored(endings=("\r\n", "\r\n", "\r\n", "\r\n")),
    "latin-1-crlf": Stored(codec="latin-1", endings=("\r\n", "\r\n", "\r\n", "\r\n")),
    "mixed-endings": Stored(endings=("\r\n", "\n", "\r\n", "\n")),
    "no-final-newline": Stored(endings=("\n", "\n", "\n", "")),
    "utf-16-crlf-no-final-newline": Stored(
        codec="utf-16-le", bom=codecs.BOM_UTF16_LE, endings=("\r\n", "\r\n", "\r\n", "")
    ),
    "executable": Stored(mode=0o755),
}

PATCH = """--- a/f.txt
+++ b/f.txt
@@ -2,3 +2,3 @@
 alpha = 'déjà'
-beta = 1
+beta = 'ü'
 gamma = 'ok'
"""


def sample(context: ToolContext, stored: Stored) -> tuple[Path, bytes, bytes]:
    """The sample file written as `stored`; its bytes, and its bytes with the asked change."""
    path = context.workspace / "f.txt"
    before = stored.encode([stored.first_line, *TAIL])
    path.write_bytes(before)
    path.chmod(stored.mode)
    return path, before, stored.encode([stored.first_line, *CHANGED_TAIL])


@pytest.mark.parametrize("stored", FORMATS.values(), ids=FORMATS.keys())
async def test_edit_file_changes_only_the_asked_bytes(context, stored):
    path, before, expected = sample(context, stored)
    arguments = {"path": "f.txt", "old_string": "beta = 1", "new_string": "beta = 'ü'"}
    preview = EditFile().approval_preview(arguments, context)
    result = await EditFile().run(arguments, context)
    assert path.read_bytes() == expected != before
    assert stat.S_IMODE(path.stat().st_mode) == stored.mode
    # The approval showed the very change that was written.
    assert result.display == preview
    assert [line for line in preview.split("\n") if line.startswith(("+", "-"))][2:] == [
        "-beta = 1" + stored.endings[2].rstrip("\n"),
        "+beta = 'ü'" + stored.endings[2].rstrip("\n"),
    ]


@pytest.mark.parametrize("stored", FORMATS.values(), ids=FORMATS.keys())
async def test_apply_patch_changes_only_the_asked_bytes(context, stored):
    path, before, expected = sample(context, stored)
    await ApplyPatch().run({"patch": PATCH}, context)
    assert path.read_bytes() == expected != before
    assert stat.S_IMODE(path.stat().st_mode) == stored.mode


@pytest.mark.parametrize("stored", FORMATS.values(), ids=FORMATS.keys())
async def test_old_string_copied_from_read_file_matches(context, stored):
    """What read_file shows of a line, pasted back as old_string, finds that line."""
    path, _, _ = sample(context, stored)
    shown = (await ReadFile().run({"path": "f.txt"}, context)).output
    first = shown.splitlines()[0].split("\t", 1)[1]
    assert first == stored.first_line
    await EditFile().run({"path": "f.txt", "old_string": first, "new_string": "# x"}, context)
    assert path.read_bytes() == stored.encode(["# x", *TAIL])


async def test_read_file_says_which_encoding_it_shows(context):
    for name, stored in (("l.txt", FORMATS["latin-1"]), ("w.txt", FORMATS["cp1252"])):
        (context.workspace / name).write_bytes(stored.encode([stored.first_line, *TAIL]))
    latin = (await ReadFile().run({"path": "l.txt"}, context)).output
    assert latin.splitlines()[0] == "1\t# café naïve, à la"
    assert latin.splitlines()[-1] == (
        "[shown as Latin-1: the file is not valid UTF-8; edits keep its encoding]"
    )
    windows = (await ReadFile().run({"path": "w.txt"}, context)).output
    assert windows.splitlines()[0] == "1\t# “quoted” — 5 €"
    assert "[shown as Windows-1252" in windows
    (context.workspace / "u.txt").write_bytes(FORMATS["utf-16-be-bom"].encode(["#", *TAIL]))
    assert (await ReadFile().run({"path": "u.txt"}, context)).output.splitlines()[-1] == (
        "[UTF-16-BE with a byte-order mark; edits keep its encoding]"
    )


async def test_a_character_the_encoding_lacks_is_refused_and_nothing_changes(context):
    path, before, _ = sample(context, FORMATS["latin-1"])
    edit = {"path": "f.txt", "old_string": "beta = 1", "new_string": "beta = '5 €'"}
    patch = PATCH.replace("+beta = 'ü'", "+beta = '—'")
    write = {"path": "f.txt", "content": "price = '€'\n"}
    for tool, arguments, character in (
        (EditFile(), edit, "'€' (U+20AC)"),
        (ApplyPatch(), {"patch": patch}, "'—' (U+2014)"),
        (WriteFile(), write, "'€' (U+20AC)"),
    ):
        with pytest.raises(ToolError) as refused:
            await tool.run(arguments, context)
        message = str(refused.value)
        assert message.startswith("f.txt is stored as Latin-1 (not valid UTF-8)")
        assert character in message and "nothing was written" in message
        assert "iconv -f iso-8859-1 -t utf-8" in message
        assert path.read_bytes() == before
    assert context.journal.turns == []


async def test_a_lone_surrogate_is_refused_not_a_crash(context):
    path = context.workspace / "f.txt"
    path.write_text("a = 1\n")
    with pytest.raises(ToolError, match=r"'\\ud83d' \(U\+D83D\), half of a UTF-16 surrogate"):
        await EditFile().run({"path": "f.txt", "old_string": "1", "new_string": "\ud83d"}, context)
    assert path.read_text() == "a = 1\n"


async def test_utf16_without_a_mark_is_refused_as_binary_and_unchanged(context):
    """Without a byte-order mark, UTF-16 text is NUL bytes between letters: no encoding the
    tools keep can round-trip it as text, so it is refused rather than guessed."""
    path = context.workspace / "f.txt"
    before = "beta = 1\n".encode("utf-16-le")
    path.write_bytes(before)
    with pytest.raises(ToolError, match=r"^f\.txt is a binary file"):
        await EditFile().run({"path": "f.txt", "old_string": "1", "new_string": "2"}, context)
    with pytest.raises(ToolError, match=r"^f\.txt is a binary file"):
        await ApplyPatch().run({"patch": PATCH}, context)
    assert path.read_bytes() == before


async def test_utf8_with_a_stray_byte_keeps_both_kinds_of_bytes(context):
    """A mostly-UTF-8 file with one invalid byte is read as Latin-1, which round-trips every
    byte: the UTF-8 letters and the stray byte both survive an edit elsewhere."""
    path = context.workspace / "f.txt"
    path.write_bytes(b"caf\xc3\xa9 \xff\nx = 1\n")
    await EditFile().run({"path": "f.txt", "old_string": "x = 1", "new_string": "x = 2"}, context)
    assert path.read_bytes() == b"caf\xc3\xa9 \xff\nx = 2\n"


async def test_new_line_breaks_take_the_prevailing_ending_and_others_keep_theirs(context):
    path = context.workspace / "f.txt"
    path.write_bytes(b"one\r\ntwo\nthree\r\nfour\r\nfive")
    await EditFile().run(
        {"path": "f.txt", "old_string": "three", "new_string": "three\n3b\n3c"}, context
    )
    assert path.read_bytes() == b"one\r\ntwo\nthree\r\n3b\r\n3c\r\nfour\r\nfive"
    patch = (
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,3 @@\n one\n+1b\n two\n@@ -8 +9,2 @@\n five\n+six\n"
    )
    await ApplyPatch().run({"patch": patch}, context)
    assert path.read_bytes() == b"one\r\n1b\r\ntwo\nthree\r\n3b\r\n3c\r\nfour\r\nfive\r\nsix"
    # replace_all over lines of both kinds: each keeps its own ending.
    await EditFile().run(
        {"path": "f.txt", "old_string": "b", "new_string": "B", "replace_all": True}, context
    )
    assert path.read_bytes() == b"one\r\n1B\r\ntwo\nthree\r\n3B\r\n3c\r\nfour\r\nfive\r\nsix"


async def test_a_form_feed_inside_a_line_is_patched_as_one_line(context):
    path = context.workspace / "f.py"
    path.write_bytes(b"a = 1\n\x0c\nb = 1\n")
    patch = "--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n a = 1\n \x0c\n-b = 1\n+b = 2\n"
    await ApplyPatch().run({"patch": patch}, context)
    assert path.read_bytes() == b"a = 1\n\x0c\nb = 2\n"


async def test_write_file_keeps_an_existing_files_encoding_endings_and_mode(context):
    path = context.workspace / "f.txt"
    path.write_bytes("café\r\n".encode("latin-1"))
    path.chmod(0o755)
    arguments = {"path": "f.txt", "content": "déjà\nvu\n"}
    preview = WriteFile().approval_preview(arguments, context)
    result = await WriteFile().run(arguments, context)
    assert path.read_bytes() == "déjà\r\nvu\r\n".encode("latin-1")
    assert result.display == preview
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert "-café\r\n+déjà\r\n+vu\r\n" in result.display
    # Line breaks the content spells out itself are written as given.
    await WriteFile().run({"path": "f.txt", "content": "a\r\nb\n"}, context)
    assert path.read_bytes() == b"a\r\nb\n"
    marked = context.workspace / "u.txt"
    marked.write_bytes(codecs.BOM_UTF16_BE + "old\n".encode("utf-16-be"))
    await WriteFile().run({"path": "u.txt", "content": "new ✓\n"}, context)
    assert marked.read_bytes() == codecs.BOM_UTF16_BE + "new ✓\n".encode("utf-16-be")
    await WriteFile().run({"path": "fresh.txt", "content": "é\n"}, context)
    assert (context.workspace / "fresh.txt").read_bytes() == "é\n".encode()


async def test_revert_turn_restores_exact_bytes_and_mode(context):
    latin = context.workspace / "latin.txt"
    wide = context.workspace / "wide.txt"
    script = context.workspace / "run.sh"
    originals = {
        latin: "caf\xe9 \x93q\x94\r\nx = 1\r\n".encode("latin-1"),
        wide: codecs.BOM_UTF16_LE + "x = 1\r\nend".encode("utf-16-le"),
        script: b"#!/bin/sh\necho hi\n",
    }
    for path, data in originals.items():
        path.write_bytes(data)
    script.chmod(0o750)
    context.journal.begin_turn(1)
    for name in ("latin.txt", "wide.txt"):
        await EditFile().run({"path": name, "old_string": "x = 1", "new_string": "x = 2"}, context)
    delete = "--- a/run.sh\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-#!/bin/sh\n-echo hi\n"
    await ApplyPatch().run({"patch": delete}, context)
    assert not script.exists()
    context.journal.begin_turn(2)
    await WriteFile().run({"path": "latin.txt", "content": "rewritten\n"}, context)
    result = await RevertTurn().run({"turns": 2}, context)
    assert result.ok, result.output
    assert {path: path.read_bytes() for path in originals} == originals
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert os.access(script, os.X_OK)


async def test_a_file_valid_utf8_past_the_first_megabyte_boundary_reads_as_utf8(context):
    """Detection streams the file in blocks: a character split across two blocks is still
    UTF-8, and a bad byte far past the first block still makes the file Latin-1."""
    split = context.workspace / "split.txt"
    split.write_bytes(b"a" * (1024 * 1024 - 1) + "é\nlast\n".encode())
    out = (await ReadFile().run({"path": "split.txt", "start_line": 2}, context)).output
    assert out == "2\tlast"
    late = context.workspace / "late.txt"
    late.write_bytes(b"x\n" * (1024 * 1024) + b"caf\xe9\n")
    out = (await ReadFile().run({"path": "late.txt", "start_line": 1048577}, context)).output
    assert out.splitlines() == [
        "1048577\tcafé",
        "[shown as Latin-1: the file is not valid UTF-8; edits keep its encoding]",
    ]


def test_ascii_is_utf8_unless_a_later_part_of_the_file_says_otherwise():
    """An ASCII start is judged at once when it is all there is; bytes after it decide."""
    assert detect([b"plain text\n"]) is UTF8
    assert detect([b""]) is UTF8
    assert detect([b"plain ", "café".encode()]) is UTF8
    assert detect([b"plain ", b"caf\xe9"]) in (LATIN_1, WINDOWS_1252)
