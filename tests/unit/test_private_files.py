"""The app's own files and folders: made 0600 and 0700 under a permissive umask, and
folders an older version left wider tightened when opened."""

from __future__ import annotations

import os
import stat

import pytest

from codewhale.atomic import atomic_write_text
from codewhale.private_files import private_dir, private_opener


@pytest.fixture(autouse=True)
def umask_022():
    """The usual umask, which would leave new files 0644 and folders 0755."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_missing_folders_are_made_private_and_a_wide_one_is_tightened(tmp_path):
    outer = tmp_path / "outer"
    outer.mkdir(mode=0o755)
    inner = private_dir(outer / "state" / "logs")
    assert mode(outer / "state") == mode(inner) == 0o700
    assert mode(outer) == 0o755  # not the app's to tighten: only the folder asked for
    private_dir(outer)
    assert mode(outer) == 0o700


def test_files_are_created_0600(tmp_path):
    with open(tmp_path / "log", "a", encoding="utf-8", opener=private_opener) as handle:
        handle.write("line\n")
    atomic_write_text(tmp_path / "new" / "state.json", "{}")
    assert mode(tmp_path / "log") == mode(tmp_path / "new" / "state.json") == 0o600
    assert mode(tmp_path / "new") == 0o700
