"""docs/ARCHITECTURE.md matches the code: its floors diagram, module tables and contracts
(issue 31, item 4). The generated parts come from tests/support/architecture_doc.py; when
a test here fails, `make docs-table` rewrites them and the message says what else to do."""

from __future__ import annotations

import ast
import difflib
import re

from tests.support import architecture_doc
from tests.support.architecture_doc import DOC, NO_FLOOR, NO_JOB, PACKAGE, contracts

REGENERATE = "run `make docs-table` to rewrite docs/ARCHITECTURE.md's generated parts"


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_top_level_module_is_on_a_floor():
    place = architecture_doc.floors()
    unplaced = [
        unit for unit in architecture_doc.top_level_units() if place.number(unit) == NO_FLOOR
    ]
    assert unplaced == [], (
        f"codewhale.{', codewhale.'.join(unplaced)}: on no floor. Add each to a layer of the"
        " `floors` contract in pyproject.toml [tool.importlinter] (an import only points"
        f" down), then {REGENERATE}"
    )


def test_the_generated_parts_are_current():
    text = doc_text()
    regenerated = architecture_doc.regenerate(text)
    changes = [
        line
        for line in difflib.unified_diff(text.splitlines(), regenerated.splitlines(), lineterm="")
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changes == [], (
        f"docs/ARCHITECTURE.md differs from the code: {REGENERATE}, then give each new row"
        " its job (it starts from the module's docstring). What it would change"
        " (- now, + regenerated):\n" + "\n".join(changes)
    )


def test_every_row_says_what_its_module_does():
    unfinished = [line for line in doc_text().splitlines() if NO_JOB in line]
    assert unfinished == [], "write the job of each of these rows:\n" + "\n".join(unfinished)


def test_the_contracts_table_names_every_contract():
    text = doc_text()
    names = [contract["name"] for contract in contracts()]
    table = text[text.index("| contract | what it forbids | why |") :].split("\n\n")[0]
    listed = re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE)
    stated = re.search(r"The (\d+) import-linter contracts in `pyproject.toml`", text)
    assert stated is not None
    assert (sorted(listed), int(stated[1])) == (sorted(names), len(names)), (
        "docs/ARCHITECTURE.md's contracts table must name each contract of pyproject.toml"
        " [tool.importlinter] by its `name` (and say why it exists), and the sentence above"
        f" it their number: {len(names)}"
    )


def test_a_module_left_out_of_the_doc_comes_back_from_the_code():
    text = doc_text()
    row = next(line for line in text.splitlines() if line.startswith("| `codewhale/sandbox/` |"))
    member = next(line for line in text.splitlines() if line.startswith("| `state_log.py` |"))
    trimmed = text.replace(row + "\n", "").replace(member + "\n", "")
    regenerated = architecture_doc.regenerate(trimmed)
    assert "| `codewhale/sandbox/` | 1 | the OS sandbox around shell commands" in regenerated
    assert "| `state_log.py` | " in regenerated


# The doc says it and codewhale/subagents/lifecycle.py is built on it: a child's status is
# written in one function, so every change is checked against the table of legal moves.
STATUS_FIELDS = frozenset({"status", "worker_status"})


def status_writes(source: str, in_lifecycle: bool = False) -> list[str]:
    """Where a module assigns a record's status (`line: .field`), outside `apply_move`."""
    tree = ast.parse(source)
    allowed: set[int] = set()
    if in_lifecycle:
        owner = next(
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name == "apply_move"
        )
        allowed = {id(node) for node in ast.walk(owner)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        found += [
            f"{node.lineno}: .{target.attr}"
            for target in targets
            if isinstance(target, ast.Attribute)
            and target.attr in STATUS_FIELDS
            and id(node) not in allowed
        ]
    return found


def test_apply_move_is_the_only_code_that_sets_a_childs_status():
    folder = PACKAGE / "subagents"
    found = [
        f"{path.relative_to(folder)}:{write}"
        for path in sorted(folder.rglob("*.py"))
        for write in status_writes(path.read_text(encoding="utf-8"), path.name == "lifecycle.py")
    ]
    assert found == [], "a child's status changes only in lifecycle.apply_move:\n" + "\n".join(
        found
    )


def test_the_status_check_sees_a_write():
    elsewhere = "def finish(record):\n    record.worker_status = 'completed'\n"
    assert status_writes(elsewhere) == ["2: .worker_status"]
