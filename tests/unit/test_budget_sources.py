"""Where a child's budget comes from: agent_open's argument, else its definition's
frontmatter, else `[subagents]`; a frontmatter budget that is not a positive number fails
its file with the line and the field named."""

from __future__ import annotations

import pytest

from codewhale.config_models import SubagentsConfig
from codewhale.subagents.budget import Budget, BudgetError, parse_budget
from codewhale.subagents.catalog import AgentCatalog, format_entries
from codewhale.subagents.definition_problems import unknown_type_error
from codewhale.subagents.definitions import load_definitions, parse_definition
from codewhale.subagents.roles import served_tools
from codewhale.tools.registry import default_tools

TOOLS = default_tools()
KNOWN = served_tools(tool.name for tool in TOOLS)


def definition_text(budget_lines: str) -> str:
    return f"---\nname: timed\ndescription: a timed worker\n{budget_lines}---\nWork, then report.\n"


def test_agent_open_beats_the_definition_which_beats_the_config():
    definition = parse_definition(
        definition_text("max_runtime_secs: 120\nmax_tokens: 50000\n"), "timed.md", KNOWN
    )
    assert definition.budget == Budget(max_runtime_secs=120, max_tokens=50000)
    config = SubagentsConfig(max_runtime_secs=600, max_tokens=90_000, max_cost_usd=0.5)
    budget = parse_budget({"max_tokens": 7000}, config, definition.budget)
    # The argument's tokens, the definition's runtime, the config's cost.
    assert budget == Budget(max_runtime_secs=120, max_tokens=7000, max_cost_usd=0.5)
    assert parse_budget({}, config, None) == Budget(600, 90_000, 0.5)
    assert parse_budget({}, SubagentsConfig(), None) == Budget()


def test_agent_types_lists_a_definitions_budget(tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "timed.md").write_text(definition_text("max_runtime_secs: 120\nmax_tokens: 50000\n"))
    loaded = load_definitions([folder], KNOWN, builtins=False)
    catalog = AgentCatalog(loaded, TOOLS, SubagentsConfig(), "https://api.deepseek.com")
    entries = {entry.name: entry for entry in catalog.entries()}
    assert entries["timed"].to_json()["budget"] == {"max_runtime_secs": 120, "max_tokens": 50000}
    assert "budget" not in entries["explore"].to_json()  # a role has none
    assert "  budget: max_runtime_secs=120 · max_tokens=50,000" in format_entries(
        [entries["timed"]]
    )


def test_a_budget_reads_in_a_file_strict_yaml_refuses():
    # Claude Code files often hold unquoted descriptions with colons: not valid YAML.
    text = definition_text("max_cost_usd: 0.25\nmax_runtime_secs: 90\n").replace(
        "a timed worker", "Use it when: <example>user: hi</example>"
    )
    definition = parse_definition(text, "timed.md", KNOWN)
    assert definition.budget == Budget(max_runtime_secs=90, max_cost_usd=0.25)


def test_a_definition_without_a_budget_leaves_the_config_to_decide():
    definition = parse_definition(definition_text(""), "timed.md", KNOWN)
    assert definition.budget == Budget()
    config = SubagentsConfig(max_cost_usd=0.2)
    assert parse_budget({}, config, definition.budget) == Budget(max_cost_usd=0.2)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("max_runtime_secs: soon", "max_runtime_secs must be a positive number, got 'soon'"),
        ("max_tokens: 0", "max_tokens must be a positive number, got 0"),
        ("max_cost_usd: -1", "max_cost_usd must be a positive number, got -1"),
    ],
)
def test_a_bad_frontmatter_budget_fails_the_file_naming_line_and_field(tmp_path, line, message):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "timed.md").write_text(definition_text(f"{line}\n"))
    (folder / "fine.md").write_text(definition_text("").replace("name: timed", "name: fine"))
    loaded = load_definitions([folder], KNOWN, builtins=False)
    (error,) = loaded.errors
    assert (error.line, error.reason) == (4, message)
    assert loaded.names() == ["fine"]  # the other file still loads
    # Asking for the broken type says why it is missing and where.
    refusal = str(unknown_type_error("timed", loaded))
    assert "timed.md, but that file failed to parse (line 4: " + message in refusal


def test_an_agent_open_budget_that_is_not_a_positive_number_is_refused():
    with pytest.raises(BudgetError, match="max_runtime_secs must be a positive number, got"):
        parse_budget({"max_runtime_secs": "fast"}, SubagentsConfig(), Budget(max_tokens=9))


def test_a_saved_budget_that_was_tampered_with_means_no_limit():
    assert Budget.from_json({"max_tokens": "lots", "max_runtime_secs": 30}) == Budget(30)
    assert Budget.from_json(["max_tokens"]) == Budget()
