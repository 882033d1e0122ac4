"""Config tables checked by hand (config_tables.py): strict types, every problem at once
with where it is, bounds clamped with a note, frozen values, secrets kept out of repr."""

from __future__ import annotations

import subprocess
import sys

import pytest

from codewhale.config_models import Config, McpServerConfig, NetworkConfig, SubagentsConfig
from codewhale.config_tables import Problem, TableError


def problems_of(data: dict) -> list[Problem]:
    with pytest.raises(TableError) as raised:
        Config.validate(data, [])
    return raised.value.problems


def test_types_are_strict_and_a_whole_number_is_a_number():
    assert problems_of({"network": {"max_retries": True}}) == [
        Problem(("network", "max_retries"), "int_type", "Input should be a valid integer")
    ]
    assert problems_of({"network": {"connect_timeout_secs": "5"}})[0].type == "float_type"
    timeout = Config.validate({"network": {"connect_timeout_secs": 5}}).network
    assert timeout.connect_timeout_secs == 5.0
    assert isinstance(timeout.connect_timeout_secs, float)


def test_every_problem_is_listed_at_once_with_where_it_is():
    problems = problems_of(
        {
            "tui": {"notify": "loud", "colour": "red"},
            "sandbox": {"hide": ["a", 2]},
            "headers": {"X-Team": 1},
            "mcp": {"servers": {"docs": {"command": "x", "bogus": 1}}},
            "permissions": "all",
        }
    )
    # In the order the tables declare their keys; a table's unknown keys after its own.
    assert [(problem.loc, problem.type) for problem in problems] == [
        (("headers", "X-Team"), "string_type"),
        (("tui", "notify"), "literal_error"),
        (("tui", "colour"), "extra_forbidden"),
        (("sandbox", "hide", 1), "string_type"),
        (("mcp", "servers", "docs", "bogus"), "extra_forbidden"),
        (("permissions",), "model_type"),
    ]
    assert problems[1].msg == "Input should be 'bell', 'desktop' or 'off'"


def test_a_tables_own_rule_is_its_problem_and_runs_once_its_keys_are_sound():
    assert problems_of({"mcp": {"servers": {"docs": {}}}}) == [
        Problem(
            ("mcp", "servers", "docs"),
            "value_error",
            "give either command (a program over stdio) or url (streamable HTTP)",
        )
    ]
    with pytest.raises(TableError, match="unknown provider 'nope'"):
        Config(provider="nope")


def test_a_number_out_of_bounds_is_clamped_with_a_note_also_where_it_may_be_unset():
    notes: list = []
    config = Config.validate(
        {"network": {"max_retries": 50}, "subagents": {"max_tokens": 5}}, notes
    )
    assert (config.network.max_retries, config.subagents.max_tokens) == (10, 1000)
    assert notes == [
        (("network.max_retries",), "network.max_retries = 50 is above the maximum 10; using 10"),
        (
            ("subagents.max_tokens",),
            "subagents.max_tokens = 5 is below the minimum 1000; using 1000",
        ),
    ]


def test_tables_are_frozen_and_a_replaced_copy_is_checked_again():
    network = NetworkConfig()
    with pytest.raises(AttributeError, match="frozen"):
        network.max_retries = 2  # type: ignore[misc]
    assert network.replace(max_retries=2).max_retries == 2
    assert network.max_retries == 4
    with pytest.raises(TableError):
        network.replace(max_retries="2")


def test_rules_between_keys_apply_to_tables_built_from_keywords_too():
    assert SubagentsConfig(max_concurrent=5).launch_concurrency == 5
    assert SubagentsConfig(api_timeout_secs=600).heartbeat_timeout_secs == 630


def test_a_default_list_is_each_tables_own():
    first, second = McpServerConfig(command="a"), McpServerConfig(command="b")
    first.args.append("--x")
    assert second.args == []
    assert McpServerConfig(command="c").args == []


def test_repr_leaves_secrets_out_and_to_dict_gives_plain_nested_data():
    config = Config(api_key="sk-secret-1234", headers={"X-Token": "t0ken"})
    assert "sk-secret" not in repr(config) and "t0ken" not in repr(config)
    server = McpServerConfig(command="run", env={"TOKEN": "abc123"})
    assert "abc123" not in repr(server)
    data = Config(mcp={"servers": {"docs": {"command": "run"}}}).to_dict()
    assert data["mcp"]["servers"]["docs"]["command"] == "run"
    assert data["network"]["max_retries"] == 4


def test_checking_a_config_loads_no_pydantic():
    script = (
        "import sys\n"
        "from codewhale.config_models import Config\n"
        "Config.validate({'network': {'max_retries': 3}, 'mcp': {'servers': {'a': {'url': "
        "'https://example.com/mcp'}}}})\n"
        "print('pydantic' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
