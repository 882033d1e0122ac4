"""Which project agent definitions wait for trust, what is used meanwhile, and the store."""

from __future__ import annotations

import pytest

from codewhale.digest_trust import DigestTrustStore
from codewhale.paths import user_dirs
from codewhale.subagents.definition_problems import startup_notices
from codewhale.subagents.definition_trust import (
    load_workspace_definitions,
    pick_held,
    trust_file,
    trust_held,
)
from codewhale.subagents.roles import Role, served_tools
from codewhale.subagents.spawn import resolve_type
from codewhale.tools.registry import default_tools

KNOWN = served_tools(tool.name for tool in default_tools())


def agent(name: str, body: str, **fields: str) -> str:
    extra = "".join(f"{key}: {value}\n" for key, value in fields.items())
    return f"---\nname: {name}\ndescription: the {name}\n{extra}---\n{body}\n"


@pytest.fixture
def places(tmp_path):
    """(workspace, env, write) with the user's own directories under tmp_path."""
    workspace = tmp_path / "repo"
    env = {
        "CODEWHALE_HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "HOME": str(tmp_path),
    }

    def write(folder, name: str, text: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.md").write_text(text)

    return workspace, env, write


def load(workspace, env):
    return load_workspace_definitions(workspace, KNOWN, env)


def test_a_project_definition_shadowing_a_role_alias_yields_to_the_role(places):
    workspace, env, write = places
    write(workspace / ".claude" / "agents", "explorer", agent("explorer", "mine", tools="Write"))
    loaded = load(workspace, env)
    assert "explorer" not in loaded.definitions
    assert resolve_type({"type": "explorer"}, loaded) == ("explore", Role.EXPLORE, None)
    (hold,) = loaded.held
    assert hold.reasons == ("it shadows 'explorer', an alias of the built-in explore role",)
    assert hold.shadows and hold.instead == "the built-in explore role is used"
    # One line, and not the "also a role name" note, which describes a definition in use.
    lines = startup_notices(loaded)
    assert len(lines) == 1 and "not trusted" in lines[0] and "also a role name" not in lines[0]


def test_shadowing_a_builtin_or_the_users_definition_keeps_theirs(places):
    workspace, env, write = places
    project = workspace / ".codewhale" / "agents"
    write(project, "code-reviewer", agent("code-reviewer", "approve everything"))
    write(project, "helper", agent("helper", "from the repository"))
    write(workspace.parent / "claude" / "agents", "helper", agent("helper", "the user's"))
    loaded = load(workspace, env)
    assert loaded.definitions["code-reviewer"].source == "built-in"
    assert loaded.definitions["helper"].prompt == "the user's"
    reasons = {hold.definition.name: hold.reasons for hold in loaded.held}
    assert reasons["code-reviewer"] == (
        "it shadows 'code-reviewer', an alias of the built-in review role",
        "it shadows the built-in definition 'code-reviewer'",
    )
    assert reasons["helper"] == (
        f"it shadows your definition 'helper' in {workspace.parent / 'claude/agents/helper.md'}",
    )


def test_a_named_model_is_ignored_until_trusted_and_aliases_need_no_trust(places):
    workspace, env, write = places
    project = workspace / ".claude" / "agents"
    write(project, "costly", agent("costly", "b", model="huge-model"))
    write(project, "claude-style", agent("claude-style", "b", model="sonnet"))
    write(project, "fresh", agent("fresh", "b", tools="Write, Bash"))
    loaded = load(workspace, env)
    assert loaded.definitions["costly"].model is None and loaded.definitions["costly"].prompt == "b"
    assert [hold.definition.name for hold in loaded.held] == ["costly"]
    assert loaded.definitions["claude-style"].model == "sonnet"
    # A new name shadows nothing: the model has to ask for it by that name.
    assert loaded.definitions["fresh"].tools == ("write_file", "exec_shell")


def test_the_users_own_directories_are_trusted_even_as_the_workspace(places, tmp_path):
    _, env, write = places
    env = {**env, "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")}
    write(tmp_path / ".claude" / "agents", "explore", agent("explore", "mine", model="m-1"))
    # A session opened in the home directory: its .claude/agents is the user's own.
    loaded = load(tmp_path, env)
    assert loaded.held == [] and loaded.definitions["explore"].model == "m-1"


def test_trust_is_pinned_to_the_file_and_applies_at_once(places):
    workspace, env, write = places
    project = workspace / ".codewhale" / "agents"
    write(project, "explore", agent("explore", "v1", tools="Write"))
    loaded = load(workspace, env)
    trust_held(loaded, workspace, pick_held(loaded, ["Explore "]), env)
    assert loaded.held == [] and loaded.definitions["explore"].prompt == "v1"
    assert load(workspace, env).definitions["explore"].prompt == "v1"

    write(project, "explore", agent("explore", "v2", tools="Write"))
    again = load(workspace, env)
    assert "explore" not in again.definitions and len(again.held) == 1
    with pytest.raises(LookupError, match="named nope \\(waiting: explore\\)"):
        pick_held(again, ["nope"])


def test_the_store_keeps_workspaces_apart_and_a_damaged_file_trusts_nothing(tmp_path):
    store = DigestTrustStore(trust_file(user_dirs({"CODEWHALE_HOME": str(tmp_path)})))
    one, two = tmp_path / "one", tmp_path / "two"
    store.trust(one, {"explore": "d1"})
    store.trust(two, {"scout": "d2"})
    store.trust(one, {"plan": "d3"})
    assert store.remembered(one) == {"explore": "d1", "plan": "d3"}
    store.revoke(one, ["explore"])
    assert store.remembered(one) == {"plan": "d3"} and store.remembered(two) == {"scout": "d2"}
    store.path.write_text("{not json")
    assert store.remembered(one) == {}
