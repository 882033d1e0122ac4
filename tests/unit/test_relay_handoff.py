"""The app's own write of /relay's hand-off: atomic, private, never through a symlink."""

from __future__ import annotations

import pytest

from codewhale.runtime.relay import RelayError, earlier_handoff, handoff_document, save_handoff


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    return root


def test_the_answer_is_saved_as_the_handoff_file_mode_0600(workspace):
    path = save_handoff(workspace, "# Session relay\n\nNext: run the tests.\n\n")
    assert path == workspace / ".codewhale" / "handoff.md"
    assert path.read_text() == "# Session relay\n\nNext: run the tests.\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert earlier_handoff(workspace) == path.read_text()
    # Nothing but the file is left beside it (the temporary name was renamed over it).
    assert [p.name for p in path.parent.iterdir()] == ["handoff.md"]


def test_an_answer_fenced_whole_is_unwrapped():
    assert handoff_document("```markdown\n# Session relay\nx\n```") == "# Session relay\nx\n"
    assert handoff_document("text\n```py\ncode\n```") == "text\n```py\ncode\n```\n"


def test_an_empty_answer_is_refused(workspace):
    with pytest.raises(RelayError, match="answer was empty"):
        save_handoff(workspace, "  \n")
    assert earlier_handoff(workspace) == ""


def test_a_symlink_at_the_handoff_is_replaced_not_followed(workspace, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    (workspace / ".codewhale").mkdir()
    (workspace / ".codewhale" / "handoff.md").symlink_to(outside)
    path = save_handoff(workspace, "# Session relay\n")
    assert outside.read_text() == "keep me\n"
    assert not path.is_symlink() and path.read_text() == "# Session relay\n"


def test_a_symlinked_codewhale_folder_is_refused(workspace, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".codewhale").symlink_to(elsewhere)
    with pytest.raises(RelayError, match="symbolic link"):
        save_handoff(workspace, "# Session relay\n")
    assert list(elsewhere.iterdir()) == []
