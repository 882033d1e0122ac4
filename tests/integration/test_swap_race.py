"""A directory swapped for a symlink between check and open never carries a file tool outside.

A real second process (tests/support/dir_swapper.py) exchanges a workspace directory with a
symlink to an outside directory in a tight loop while the real tools, with a real
ToolContext, write, edit and patch files under it. Each test runs a naive by-name control
in the same loop (what the tools did before: confine, then mkdir and open by name) to show
the attack is being exercised; its count is printed, not asserted, since a race may miss.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codewhale.permissions import confine
from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.edit import EditFile
from codewhale.tools.files import WriteFile
from codewhale.tools.patch import ApplyPatch
from codewhale.tools.work import RevertTurn
from codewhale.tools.workspace_fs import kernel_has_openat2, open_in, parent_directory

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the swapper uses Linux's renameat2(RENAME_EXCHANGE)"
)

SWAPPER = Path(__file__).parents[1] / "support" / "dir_swapper.py"
ATTEMPTS = 300


@dataclass
class Swaps:
    """How many times the swapper exchanged the directory and the symlink."""

    count: int = 0


@contextlib.contextmanager
def swapping(directory: Path, outside: Path) -> Iterator[Swaps]:
    """`directory` and a symlink to `outside` trading places in another process."""
    process = subprocess.Popen(
        [sys.executable, str(SWAPPER), str(directory), str(outside)],
        stdout=subprocess.PIPE,
        text=True,
    )
    swaps = Swaps()
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "swapping", "the swapper did not start"
        yield swaps
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=120)
    swaps.count = int(output.split()[-1])
    assert process.returncode == 0
    assert swaps.count > 1, "the directory was never swapped: the attack was not exercised"


@pytest.fixture
def context(tmp_path) -> ToolContext:
    (tmp_path / "ws" / "target").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return ToolContext(workspace=tmp_path / "ws", session_id="race")


@pytest.fixture
def outside(tmp_path) -> Path:
    return tmp_path / "outside"


def naive_write(workspace: Path, raw: str, text: str) -> None:
    """The control: check the path by name, then make its parents and open it by name."""
    with contextlib.suppress(OSError, ValueError):
        path = confine(workspace, raw)
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW  # guards the last component only
        with os.fdopen(os.open(path, flags, 0o644), "w") as stream:
            stream.write(text)


def naive_edit(workspace: Path, raw: str) -> None:
    """The control for an edit: read by name, then write by name."""
    with contextlib.suppress(OSError, ValueError):
        path = confine(workspace, raw)
        text = path.read_text()
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW), "w") as stream:
            stream.write(text.replace("old", "new"))


def created(directory: Path, prefix: str) -> int:
    """How many files named `prefix`… are in `directory` (none if every attempt was refused)."""
    return len(list(directory.glob(f"{prefix}*")))


def report(tool: str, escaped: int, inside: int, swaps: Swaps, naive: int | None) -> None:
    """Print the figures for the record (pytest -s shows them)."""
    control = "" if naive is None else f"; naive by-name control: {naive} of {ATTEMPTS} outside"
    print(
        f"\n{tool}: {escaped} of {ATTEMPTS} outside, {inside} inside{control}; {swaps.count} swaps"
    )


async def test_write_file_never_lands_outside_while_its_directory_is_swapped(context, outside):
    with swapping(context.workspace / "target", outside) as swaps:
        for number in range(ATTEMPTS):
            naive_write(context.workspace, f"target/naive{number}.txt", "naive\n")
            with contextlib.suppress(ToolError):
                arguments = {"path": f"target/tool{number}.txt", "content": "tool\n"}
                await WriteFile().run(arguments, context)
    escaped = created(outside, "tool")
    inside = created(context.workspace / "target", "tool")
    report("write_file", escaped, inside, swaps, created(outside, "naive"))
    assert escaped == 0


async def test_edit_file_never_writes_outside_while_its_directory_is_swapped(context, outside):
    # The same names inside and outside, all matching the edit: only the place differs.
    for number in range(ATTEMPTS):
        for directory in (context.workspace / "target", outside):
            (directory / f"tool{number}.txt").write_text("old\n")
            (directory / f"naive{number}.txt").write_text("old\n")
    with swapping(context.workspace / "target", outside) as swaps:
        for number in range(ATTEMPTS):
            naive_edit(context.workspace, f"target/naive{number}.txt")
            with contextlib.suppress(ToolError):
                arguments = {"path": f"target/tool{number}.txt", "old_string": "old\n"}
                await EditFile().run({**arguments, "new_string": "new\n"}, context)

    def edited(directory: Path, prefix: str) -> int:
        return len([p for p in directory.glob(f"{prefix}*") if p.read_text() != "old\n"])

    escaped = edited(outside, "tool")
    inside = edited(context.workspace / "target", "tool")
    report("edit_file", escaped, inside, swaps, edited(outside, "naive"))
    assert escaped == 0


async def test_apply_patch_never_creates_outside_while_its_directory_is_swapped(context, outside):
    with swapping(context.workspace / "target", outside) as swaps:
        for number in range(ATTEMPTS):
            naive_write(context.workspace, f"target/naive{number}.txt", "naive\n")
            patch = f"--- /dev/null\n+++ b/target/tool{number}.txt\n@@ -0,0 +1 @@\n+tool\n"
            with contextlib.suppress(ToolError):
                await ApplyPatch().run({"patch": patch}, context)
    escaped = created(outside, "tool")
    inside = created(context.workspace / "target", "tool")
    report("apply_patch", escaped, inside, swaps, created(outside, "naive"))
    assert escaped == 0


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "walk"])
def test_the_opener_creates_nothing_outside_on_either_path(context, outside, openat2):
    """Both ways of reaching a directory, raced: the fallback walk holds as openat2 does."""
    if openat2 and not kernel_has_openat2():
        pytest.skip("this kernel has no openat2")
    root = context.workspace
    flags = os.O_WRONLY | os.O_CREAT
    with swapping(root / "target", outside) as swaps:
        for number in range(ATTEMPTS):
            path = root / "target" / "deep" / f"tool{number}.txt"
            with (
                contextlib.suppress(ToolError),
                parent_directory(root, path, path.name, create=True, openat2=openat2) as (
                    directory,
                    name,
                ),
            ):
                os.close(open_in(directory, name, flags, path.name, "written"))
    escaped = created(outside, "deep")
    inside = created(root / "target" / "deep", "tool")
    report(f"opener ({'openat2' if openat2 else 'walk'})", escaped, inside, swaps, None)
    assert escaped == 0


async def test_revert_turn_neither_restores_nor_deletes_through_a_swapped_directory(
    context, outside
):
    """A turn changed one file and created another; then the file is deleted and their
    directory becomes a symlink to the outside. Revert must refuse both, touching nothing."""
    target = context.workspace / "target"
    (target / "kept.py").write_text("before\n")
    (outside / "made.py").write_text("outside, keep me\n")
    context.journal.begin_turn(1)
    await WriteFile().run({"path": "target/kept.py", "content": "after\n"}, context)
    await WriteFile().run({"path": "target/made.py", "content": "new\n"}, context)
    (target / "kept.py").unlink()
    target.rename(context.workspace / "parked")
    target.symlink_to(outside)

    result = await RevertTurn().run({"turns": 1}, context)

    assert not result.ok
    assert "Restored 0 file(s)" in result.output
    refusals = [line for line in result.output.splitlines() if line.startswith("Not restored")]
    assert len(refusals) == 2
    assert all("target is a symbolic link" in line for line in refusals)
    assert sorted(os.listdir(outside)) == ["made.py"]
    assert (outside / "made.py").read_text() == "outside, keep me\n"
