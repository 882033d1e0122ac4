"""`@path` attachments: which words name files, the bounds, and what is refused."""

from __future__ import annotations

import os

from codewhale.tui.attachment_format import Attachment, split_attachments, with_attachments
from codewhale.tui.attachments import MAX_FILE_CHARS, MAX_FILES, MAX_TOTAL_CHARS, collect


def test_each_named_file_is_attached_once_in_order(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\nbeta\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "b.py").write_text("print(1)")
    message = "compare @a.txt with @src/b.py, then @a.txt again; mail me@host.org @nothing"
    found = collect(tmp_path, message)
    assert found == [Attachment("a.txt", "alpha\nbeta\n"), Attachment("src/b.py", "print(1)")]
    assert [item.chip() for item in found] == ["📎 a.txt (2 lines)", "📎 src/b.py (1 line)"]
    assert with_attachments(message, found) == (
        f"{message}\n\n"
        '<attachment path="a.txt" lines="2">\nalpha\nbeta\n</attachment>\n\n'
        '<attachment path="src/b.py" lines="1">\nprint(1)\n</attachment>'
    )


def test_a_message_without_files_is_sent_as_typed(tmp_path):
    assert collect(tmp_path, "hello @team, see @dir/") == []
    assert with_attachments("hello", []) == "hello"


def test_paths_outside_the_workspace_are_refused_symlinks_included(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("do not send\n")
    os.symlink(secret, workspace / "link.txt")
    (workspace / "inside.txt").write_text("ok\n")
    os.symlink(workspace / "inside.txt", workspace / "alias.txt")
    found = collect(workspace, "@../secret.txt @link.txt @" + str(secret) + " @alias.txt")
    # A link that stays inside is followed to its file; nothing outside is read.
    assert found == [Attachment("inside.txt", "ok\n")]


def test_binary_files_are_named_but_not_attached(tmp_path):
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00data")
    [item] = collect(tmp_path, "what is @logo.png?")
    assert item.omitted == "binary file"
    assert item.chip() == "📎 logo.png: not attached (binary file)"
    assert item.block() == '<attachment path="logo.png" omitted="binary file"/>'


def test_a_large_file_is_cut_and_the_total_is_bounded(tmp_path):
    for name in ("one", "two", "three"):
        (tmp_path / f"{name}.log").write_text("x" * (MAX_FILE_CHARS * 2))
    found = collect(tmp_path, "@one.log @two.log @three.log")
    assert [len(item.text) for item in found] == [
        MAX_FILE_CHARS,
        MAX_FILE_CHARS,
        MAX_TOTAL_CHARS - 2 * MAX_FILE_CHARS,
    ]
    assert all(item.truncated for item in found)
    assert found[0].chip() == f"📎 one.log (first {MAX_FILE_CHARS:,} characters)"
    assert (
        found[0]
        .block()
        .startswith(
            f'<attachment path="one.log" lines="1" truncated="first {MAX_FILE_CHARS} characters">\n'
        )
    )


def test_at_most_three_files_a_message(tmp_path):
    names = [f"f{i}.txt" for i in range(MAX_FILES + 1)]
    for name in names:
        (tmp_path / name).write_text(name)
    found = collect(tmp_path, " ".join("@" + name for name in names))
    assert [item.path for item in found] == names
    assert [bool(item.omitted) for item in found] == [False] * MAX_FILES + [True]
    assert found[-1].omitted == f"at most {MAX_FILES} files a message"


def test_special_files_are_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "shared.txt").write_text("linked\n")
    os.link(tmp_path / "shared.txt", tmp_path / "hard.txt")
    found = collect(tmp_path, "@pipe @hard.txt")
    # The FIFO is not a file at all; the hard-linked one is named with the file tools' reason.
    assert [item.path for item in found] == ["hard.txt"]
    assert "hard links" in found[0].omitted


def test_attribute_text_is_escaped(tmp_path):
    (tmp_path / 'q"<a>.txt').write_text("q\n")
    [item] = collect(tmp_path, '@q"<a>.txt')
    assert item.block().startswith('<attachment path="q&quot;&lt;a&gt;.txt" lines="1">')


def test_a_sent_message_splits_back_into_the_typed_text_and_its_chips():
    attached = [
        Attachment("notes.txt", text="a\nb\n"),
        Attachment("big.log", text="x" * 10, truncated=True),
        Attachment("logo.png", omitted="binary file"),
    ]
    sent = with_attachments("look at @notes.txt and @big.log", attached)
    typed, found = split_attachments(sent)
    assert typed == "look at @notes.txt and @big.log"
    assert [item.chip() for item in found] == [item.chip() for item in attached]
    assert split_attachments("no files here") == ("no files here", [])
