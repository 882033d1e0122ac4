"""The workspace opener on both of its paths (openat2 and the O_NOFOLLOW walk), and the
writes built on it refusing symlinks in a path, in real temp dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.files import ReadFile, WriteFile, read_text, write_regular
from codewhale.tools.workspace_fs import (
    NoSuchPath,
    kernel_has_openat2,
    open_in,
    parent_directory,
    remove,
)


@pytest.fixture(params=["openat2", "walk"])
def openat2(request) -> bool:
    """Which way the opener reaches a directory (the walk is forced, not mocked)."""
    if request.param == "openat2" and not kernel_has_openat2():
        pytest.skip("this kernel has no openat2")
    return request.param == "openat2"


@pytest.fixture
def root(tmp_path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


@pytest.fixture
def outside(tmp_path) -> Path:
    (tmp_path / "outside").mkdir()
    return tmp_path / "outside"


def same_directory(descriptor: int, path: Path) -> bool:
    opened, expected = os.fstat(descriptor), path.stat()
    return (opened.st_dev, opened.st_ino) == (expected.st_dev, expected.st_ino)


def test_it_reaches_the_directory_holding_the_file(root, openat2):
    (root / "a" / "b").mkdir(parents=True)
    with parent_directory(root, root / "a" / "b" / "f.txt", "f", openat2=openat2) as (
        directory,
        name,
    ):
        assert name == "f.txt"
        assert same_directory(directory, root / "a" / "b")


def test_the_root_itself_is_its_own_directory_named_dot(root, openat2):
    with parent_directory(root, root, ".", openat2=openat2) as (directory, name):
        assert name == "."
        assert same_directory(directory, root)


def test_a_workspace_named_through_a_symlink_takes_resolved_paths(tmp_path, root, openat2):
    """The root is the user's choice and may be reached through a link; confine() hands
    over paths below its resolved form."""
    (root / "a").mkdir()
    (tmp_path / "named").symlink_to(root)
    with parent_directory(tmp_path / "named", root / "a" / "f", "f", openat2=openat2) as (
        directory,
        _,
    ):
        assert same_directory(directory, root / "a")


def test_a_symlinked_directory_is_refused_by_name_even_inside(root, openat2):
    (root / "real").mkdir()
    (root / "a").mkdir()
    (root / "a" / "link").symlink_to(root / "real")
    with (
        pytest.raises(ToolError, match=r"^x: a/link is a symbolic link; .* do not follow symlinks"),
        parent_directory(root, root / "a" / "link" / "f.txt", "x", openat2=openat2),
    ):
        pass


def test_missing_and_non_directory_components_are_named(root, openat2):
    (root / "file").write_text("x")
    with (
        pytest.raises(NoSuchPath, match=r"^x: no such file or directory \(gone does not exist\)$"),
        parent_directory(root, root / "gone" / "deeper" / "f", "x", openat2=openat2),
    ):
        pass
    with (
        pytest.raises(ToolError, match=r"^x: file is not a directory$"),
        parent_directory(root, root / "file" / "f", "x", openat2=openat2),
    ):
        pass


def test_paths_outside_the_root_or_climbing_out_are_refused(root, openat2, outside):
    with (
        pytest.raises(ToolError, match="is outside the workspace"),
        parent_directory(root, outside / "f", "x", openat2=openat2),
    ):
        pass
    with (
        pytest.raises(ToolError, match=r"'\.\.' is not allowed"),
        parent_directory(root, root / ".." / "outside" / "f", "x", openat2=openat2),
    ):
        pass


def test_create_makes_each_missing_directory(root, openat2):
    (root / "a").mkdir()
    path = root / "a" / "b" / "c" / "f.txt"
    with parent_directory(root, path, "f", create=True, openat2=openat2) as (directory, name):
        os.close(open_in(directory, name, os.O_WRONLY | os.O_CREAT, "f", "written"))
    assert path.is_file() and not (root / "a" / "b").is_symlink()


def test_creating_deep_parents_stops_at_a_symlinked_component(root, openat2, outside):
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "c").symlink_to(outside)
    path = root / "a" / "b" / "c" / "d" / "e" / "f.txt"
    with (
        pytest.raises(ToolError, match=r"^f: a/b/c is a symbolic link"),
        parent_directory(root, path, "f", create=True, openat2=openat2),
    ):
        pass
    assert os.listdir(outside) == []


def test_the_last_component_is_opened_without_following_a_symlink(root, outside):
    (outside / "secret").write_text("outside\n")
    (root / "link").symlink_to(outside / "secret")
    with (
        parent_directory(root, root / "link", "link") as (directory, name),
        pytest.raises(ToolError, match=r"^link is a symbolic link; symlinks are not followed"),
    ):
        open_in(directory, name, os.O_RDONLY, "link", "read")


def test_remove_unlinks_the_name_not_what_a_symlink_points_to(root, openat2, outside):
    (outside / "keep").write_text("outside\n")
    (root / "link").symlink_to(outside / "keep")
    remove(root, root / "link", "link")
    assert not os.path.lexists(root / "link")
    assert (outside / "keep").read_text() == "outside\n"
    remove(root, root / "link", "link", missing_ok=True)
    with pytest.raises(NoSuchPath, match=r"^link: no such file$"):
        remove(root, root / "link", "link")


def test_a_write_refuses_a_symlink_as_its_last_component(root, outside):
    """Handed a path whose last component is a symlink (as a swap after confine() would
    leave it), the write is refused and the file it points to is untouched."""
    (outside / "target.txt").write_text("outside\n")
    (root / "link.txt").symlink_to(outside / "target.txt")
    with pytest.raises(ToolError, match=r"^link\.txt is a symbolic link"):
        write_regular(root / "link.txt", "changed\n", "link.txt", workspace=root)
    assert (outside / "target.txt").read_text() == "outside\n"


def test_write_and_read_refuse_a_symlinked_parent_handed_to_them(root, outside):
    (outside / "f.txt").write_text("outside\n")
    (root / "dir").symlink_to(outside)
    with pytest.raises(ToolError, match=r"^dir/f\.txt: dir is a symbolic link"):
        write_regular(root / "dir" / "f.txt", "changed\n", "dir/f.txt", workspace=root)
    with pytest.raises(ToolError, match=r"^dir/f\.txt: dir is a symbolic link"):
        read_text(root / "dir" / "f.txt", "dir/f.txt", workspace=root)
    assert (outside / "f.txt").read_text() == "outside\n"


async def test_the_tools_still_go_through_a_symlink_that_stays_inside(root):
    """confine() resolves the path first; the opener then walks the resolved path, so a
    link inside the workspace to a place inside it keeps working for reads and writes."""
    context = ToolContext(workspace=root, session_id="s1")
    (root / "docs").mkdir()
    (root / "latest").symlink_to(root / "docs")
    (root / "notes.md").symlink_to(root / "docs" / "notes.md")
    await WriteFile().run({"path": "latest/new/page.md", "content": "hello\n"}, context)
    assert (root / "docs" / "new" / "page.md").read_text() == "hello\n"
    await WriteFile().run({"path": "notes.md", "content": "via the link\n"}, context)
    assert (root / "docs" / "notes.md").read_text() == "via the link\n"
    assert (root / "notes.md").is_symlink()
    assert (await ReadFile().run({"path": "latest/notes.md"}, context)).output == (
        "1\tvia the link"
    )


async def test_a_symlink_leading_out_is_refused_before_any_open(root, outside):
    context = ToolContext(workspace=root, session_id="s1")
    (root / "out").symlink_to(outside)
    with pytest.raises(ToolError, match="outside the workspace"):
        await WriteFile().run({"path": "out/deep/new.txt", "content": "x\n"}, context)
    assert os.listdir(outside) == []
