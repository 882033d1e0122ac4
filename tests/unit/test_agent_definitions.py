"""Agent definition files: locations, Claude Code's format, tools, models, names, listing."""

from __future__ import annotations

import pytest

from codewhale.config_models import SubagentsConfig
from codewhale.paths import agent_definition_dirs
from codewhale.subagents.catalog import (
    MAX_ROUTED,
    MAX_ROUTING_CHARS,
    AgentCatalog,
    first_sentence,
)
from codewhale.subagents.definition_problems import startup_notices
from codewhale.subagents.definitions import load_definitions, parse_definition
from codewhale.subagents.roles import Role, served_tools
from codewhale.subagents.spawn import SpawnError, resolve_model, resolve_type, tool_limit
from codewhale.tools.registry import default_tools

TOOLS = default_tools()
KNOWN = served_tools(tool.name for tool in TOOLS)
DEEPSEEK = "https://api.deepseek.com"

GOOD = """---
name: {name}
description: does {name} things
base_role: explore
tools: read, grep
color: blue
---
{body}
"""

# Written the way Claude Code's /agents command and public collections write them:
# an unquoted description with <example> dialogue (invalid YAML), capitalised tool
# names in a comma string, an MCP tool and a model alias.
CLAUDE_AGENT = """---
name: security-auditor
description: Use this agent when code touches authentication, secrets or user input. Examples:

<example>
Context: The user has just written a login handler.
user: "Can you check my login code for problems?"
assistant: "I'll use the security-auditor agent to review it."
<commentary>Authentication code deserves a security review.</commentary>
</example>
tools: Read, Grep, Glob, LS, WebFetch, WebSearch, TodoWrite, mcp__context7__get-library-docs
model: sonnet
color: orange
---
You are a security auditor. Find injection, secret leaks and broken access checks.
"""


def definition(text: str, source: str = "x.md"):
    return parse_definition(text, source, KNOWN)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_four_locations_in_order_of_strength(tmp_path):
    workspace, home, claude = tmp_path / "ws", tmp_path / "cw", tmp_path / "claude"
    env = {"CODEWHALE_HOME": str(home), "CLAUDE_CONFIG_DIR": str(claude)}
    dirs = agent_definition_dirs(workspace, env)
    assert dirs == [
        workspace.resolve() / ".codewhale" / "agents",
        workspace.resolve() / ".claude" / "agents",
        home / "config" / "agents",
        claude / "agents",
    ]
    for strength, directory in enumerate(dirs):
        write(
            directory / "nested" / "helper.md", GOOD.format(name="helper", body=f"from {strength}")
        )
    loaded = load_definitions(dirs, KNOWN)
    assert loaded.definitions["helper"].prompt == "from 0"
    assert [d.prompt for d in loaded.shadowed] == ["from 1", "from 2", "from 3"]
    # Without CLAUDE_CONFIG_DIR Claude Code's files are under ~/.claude.
    assert agent_definition_dirs(workspace, {"HOME": "/h"})[3].as_posix() == "/h/.claude/agents"


def test_broken_files_are_errors_with_a_line_and_the_rest_load(tmp_path):
    project = tmp_path / "agents"
    write(project / "dup-a.md", GOOD.format(name="twin", body="a"))
    write(project / "dup-b.md", GOOD.format(name="twin", body="b"))
    write(project / "noname.md", "---\ndescription: x\n---\nbody")
    write(project / "nodesc.md", "---\nname: nodesc\ntools: Read\n---\nbody")
    write(project / "bad-yaml.md", "---\nname: [unclosed\n---\nbody")
    write(project / "empty.md", "---\nname: empty\ndescription: x\n---\n\n")
    write(project / "role.md", "---\nname: r\ndescription: x\nbase_role: boss\n---\nbody")
    write(project / "fine.md", GOOD.format(name="fine", body="ok"))
    loaded = load_definitions([project], KNOWN, builtins=False)
    assert sorted(loaded.definitions) == ["fine", "twin"]
    messages = sorted(str(error).replace(f"{project}/", "") for error in loaded.errors)
    assert messages == [
        "bad-yaml.md:2: invalid YAML: expected ',' or ']', but got '<stream end>'",
        "dup-b.md:2: duplicate agent name 'twin' (also in dup-a.md)",
        "empty.md:1: the body (the agent's system prompt) is empty",
        "nodesc.md:2: 'description' is required",
        "noname.md:2: 'name' is required: lower-case letters, digits, '-', '.' or '_'",
        "role.md:4: base_role must be one of general, explore, plan, review, implementer, "
        "verifier; got 'boss'",
    ]


def test_a_claude_code_file_loads_unchanged_with_one_warning_per_problem():
    loaded = definition(CLAUDE_AGENT)
    assert loaded.name == "security-auditor" and loaded.base_role is Role.GENERAL
    assert "<example>" in loaded.description and 'user: "Can you check' in loaded.description
    assert loaded.tools == (
        "read_file",
        "grep_files",
        "file_search",
        "list_dir",
        "fetch_url",
        "checklist_write",
    )
    assert loaded.color == "dark_orange"
    assert loaded.prompt.startswith("You are a security auditor.")
    dropped = [w for w in loaded.warnings if w.startswith("tools not available")]
    assert dropped == [
        "tools not available here, dropped: WebSearch, mcp__context7__get-library-docs"
    ]
    assert any("not valid YAML" in w for w in loaded.warnings)
    assert any("'sonnet' is a Claude Code alias" in w for w in loaded.warnings)


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        (None, None),
        ("[]", ()),
        ('"*"', None),
        ("Read, Edit, MultiEdit, Write", ("read_file", "edit_file", "write_file")),
        (
            "[Bash, Task]",
            (
                "exec_shell",
                "agent_apply",
                "agent_close",
                "agent_eval",
                "agent_open",
                "agent_types",
                "agent_wait",
            ),
        ),
        ("read_file grep_files", ("read_file", "grep_files")),
        ("Bash(git:*), Read", ("read_file",)),
        ("WebSearch, NotebookEdit", ()),
    ],
)
def test_tool_lists(tools, expected):
    line = "" if tools is None else f"tools: {tools}\n"
    loaded = definition(f"---\nname: t\ndescription: d\n{line}---\nbody")
    assert loaded.tools == expected


def test_everything_dropped_says_no_tools_are_left_and_deny_lists_subtract():
    loaded = definition("---\nname: t\ndescription: d\ntools: WebSearch, Bash(rm:*)\n---\nbody")
    assert loaded.warnings == (
        "tools not available here, dropped: WebSearch, Bash(rm:*); it has no tools left",
    )
    denied = definition("---\nname: t\ndescription: d\ndisallowedTools: Write, Edit, Bash\n---\nb")
    assert denied.tools is not None and "read_file" in denied.tools
    assert not {"write_file", "edit_file", "exec_shell"} & set(denied.tools)


@pytest.mark.parametrize(
    ("model", "base_url", "expected"),
    [
        ("sonnet", DEEPSEEK, None),
        ("opus", DEEPSEEK, None),
        ("haiku", DEEPSEEK, None),
        ("inherit", DEEPSEEK, None),
        ("claude-sonnet-4-5", DEEPSEEK, None),
        ("claude-sonnet-4-5", "https://api.anthropic.com/v1", "claude-sonnet-4-5"),
        ("deepseek-reasoner", DEEPSEEK, "deepseek-reasoner"),
        # Every alias Claude Code accepts, long-context suffix and case included.
        ("opusplan", DEEPSEEK, None),
        ("default", DEEPSEEK, None),
        ("sonnet[1m]", DEEPSEEK, None),
        ("Opus[1M]", DEEPSEEK, None),
        ("best", DEEPSEEK, None),
    ],
)
def test_model_aliases_defer_to_the_configured_model(model, base_url, expected):
    loaded = definition(f"---\nname: m\ndescription: d\nbase_role: review\nmodel: {model}\n---\nb")
    assert loaded.model_for(base_url) == expected
    config = SubagentsConfig(review_model="review-model")
    resolved = resolve_model(None, Role.REVIEW, "m", loaded, config, "parent-model", base_url)
    assert resolved == (expected or "review-model")
    assert resolve_model(None, Role.REVIEW, "m", loaded, SubagentsConfig(), "p", base_url) == (
        expected or "p"
    )


def test_a_definition_named_like_a_role_loads_and_says_so_once(tmp_path):
    write(tmp_path / "a" / "reviewer.md", GOOD.format(name="reviewer", body="mine"))
    loaded = load_definitions([tmp_path / "a"], KNOWN)
    reviewer = loaded.definitions["reviewer"]
    clash = [w for w in reviewer.warnings if "also a role name" in w]
    assert clash == [
        "the name 'reviewer' is also a role name: type 'reviewer' opens this definition, "
        "role 'reviewer' the built-in review role"
    ]
    everyone = [w for definition in loaded.definitions.values() for w in definition.warnings]
    assert sum("also a role name" in warning for warning in everyone) == 1
    # The shipped code-reviewer shares a role alias by design and is not reported.
    assert not loaded.definitions["code-reviewer"].warnings
    assert resolve_type({"type": "reviewer"}, loaded)[2] is reviewer
    assert resolve_type({"role": "reviewer"}, loaded) == ("review", Role.REVIEW, None)
    assert resolve_type({"type": "reviewer", "role": "explore"}, loaded)[2] is reviewer
    with pytest.raises(SpawnError, match="Conflicting type"):
        resolve_type({"type": "reviewer", "role": "review"}, loaded)


def test_unknown_colours_and_fields_are_warnings_not_errors():
    loaded = definition(
        "---\nname: c\ndescription: d\ncolor: teal\npermissionMode: acceptEdits\n---\nb"
    )
    assert loaded.color is None
    assert loaded.warnings == (
        "unknown color 'teal' (use one of red, blue, green, yellow, magenta, cyan, white, "
        "purple, orange, pink, gray, grey); role colour used",
        "fields CodeWhale does not use, ignored: permissionMode",
    )


def test_first_sentence_skips_examples_and_is_bounded():
    assert first_sentence(definition(CLAUDE_AGENT).description) == (
        "Use this agent when code touches authentication, secrets or user input."
    )
    assert first_sentence("x" * 500).endswith("…") and len(first_sentence("x" * 500)) == 160


def collection(tmp_path, count: int):
    """`count` Claude-style agents with long descriptions, as public collections have."""
    folder = tmp_path / "many"
    for index in range(count):
        long = f"Use this agent for area {index}. " + "It knows a lot. " * 60
        write(
            folder / f"a{index:03}.md",
            f"---\nname: agent-{index:03}\ndescription: {long}<example>user: hi</example>\n"
            "tools: Read, Grep\nmodel: opus\n---\nYou help.",
        )
    return load_definitions([folder], KNOWN)


def test_agent_open_routing_is_bounded_and_the_full_text_is_listed(tmp_path):
    loaded = collection(tmp_path, 150)
    catalog = AgentCatalog(loaded, TOOLS, SubagentsConfig(), DEEPSEEK)
    text = catalog.routing_text()
    assert len(text) < MAX_ROUTING_CHARS + 300
    assert text.count("\n- agent-") == MAX_ROUTED
    assert "- agent-000: Use this agent for area 0." in text
    assert f"and {150 + 4 - MAX_ROUTED} more" in text and "agent_types" in text
    listing = catalog.listing()
    names = [entry["name"] for entry in listing["types"]]
    assert "agent-149" in names and "general" in names and "code-reviewer" in names
    full = catalog.listing("agent-149")
    assert full["description"].count("It knows a lot.") == 60 and full["model"] is None
    assert full["tools"] == ["read_file", "grep_files"]
    # An unknown name gets the few closest names, not all 154 types.
    with pytest.raises(LookupError, match="Invalid sub-agent type 'agent-1490'") as raised:
        catalog.listing("agent-1490")
    close = str(raised.value).split("the closest definitions: ", 1)[1].split(" (", 1)[0]
    assert close.startswith("agent-149, ") and len(close.split(", ")) == 5
    assert "(154 definitions in all: agent_types lists them)" in str(raised.value)


def test_listing_resolves_models_and_tools_now(tmp_path):
    write(tmp_path / "a" / "sec.md", CLAUDE_AGENT)
    write(tmp_path / "a" / "none.md", "---\nname: mute\ndescription: d\ntools: []\n---\nb")
    write(tmp_path / "a" / "own.md", "---\nname: own\ndescription: d\nmodel: m-1\n---\nb")
    write(tmp_path / "a" / "bad.md", "---\nname: Bad Name\ndescription: d\n---\nb")
    loaded = load_definitions([tmp_path / "a"], KNOWN)
    config = SubagentsConfig(worker_model="worker-m", explorer_model="explore-m")
    entries = {e.name: e for e in AgentCatalog(loaded, TOOLS, config, DEEPSEEK).entries()}
    assert entries["security-auditor"].model == "worker-m"  # 'sonnet' -> general's model
    assert entries["own"].model == "m-1"
    assert entries["explore"].model == "explore-m" and entries["plan"].model is None
    assert entries["mute"].tools == []
    assert entries["review"].tools is not None and "exec_shell" not in entries["review"].tools
    assert entries["custom"].tools is None
    assert (
        entries["bad"].error
        == "line 2: 'name' is required: lower-case letters, digits, '-', '.' or '_'"
    )
    assert entries["code-reviewer"].source == "built-in"
    assert entries["security-auditor"].color == "dark_orange"


def test_builtin_definitions_match_the_spec():
    loaded = load_definitions([], KNOWN)
    assert loaded.errors == [] and startup_notices(loaded) == []
    reviewer = loaded.definitions["code-reviewer"]
    assert (reviewer.base_role, reviewer.color, reviewer.source) == (
        Role.REVIEW,
        "yellow",
        "built-in",
    )
    assert reviewer.tools == ("read_file", "grep_files", "file_search")
    assert loaded.definitions["test-writer"].color == "cyan"
    assert loaded.definitions["doc-writer"].color == "magenta"
    refactorer = loaded.definitions["refactorer"]
    assert refactorer.color == "red" and "exec_shell" not in refactorer.tools


def test_allowed_tools_narrow_a_definitions_list_and_never_widen_it():
    lister = definition("---\nname: l\ndescription: d\ntools: Read, Grep\n---\nb")
    assert tool_limit((), lister) == ("read_file", "grep_files")
    assert tool_limit(("grep_files",), lister) == ("grep_files",)
    with pytest.raises(SpawnError, match="may only narrow the 'l' agent's tools"):
        tool_limit(("exec_shell",), lister)
    assert tool_limit((), None) is None and tool_limit(("read_file",), None) == ("read_file",)


@pytest.mark.parametrize(
    ("name", "loads"),
    [("dotnet-framework-4.8-expert", True), ("snake_case", True), ("Upper", False), ("a b", False)],
)
def test_names_as_public_collections_spell_them(name, loads):
    text = f"---\nname: {name}\ndescription: d\n---\nbody"
    if loads:
        assert definition(text).name == name
    else:
        with pytest.raises(ValueError, match="'name' is required"):
            definition(text)


@pytest.mark.parametrize("model", ["fable", "gpt-4o", "opusplan", "sonnet[1m]"])
def test_a_claude_code_file_never_sends_a_model_claude_code_would_not(tmp_path, model):
    """A `.claude/agents` file names Anthropic models only: anything else it names (an
    unknown `fable`, another vendor's id) means the configured model, with a warning."""
    path = tmp_path / ".claude" / "agents" / "teller.md"
    text = f"---\nname: teller\ndescription: d\nmodel: {model}\n---\nYou tell stories."
    loaded = parse_definition(text, str(path), KNOWN)
    assert loaded.model_for(DEEPSEEK) is None
    assert (
        resolve_model(None, Role.GENERAL, "teller", loaded, SubagentsConfig(), "p", DEEPSEEK) == "p"
    )
    assert any(f"model '{model}'" in warning for warning in loaded.warnings)
    # The same name in CodeWhale's own folder is taken as written.
    own = parse_definition(text, str(tmp_path / ".codewhale" / "agents" / "teller.md"), KNOWN)
    assert own.model_for(DEEPSEEK) == (None if model in ("opusplan", "sonnet[1m]") else model)


def test_task_in_a_claude_tools_list_maps_to_the_agent_tools():
    text = "---\nname: lead\ndescription: d\ntools: Read, Task\n---\nYou delegate."
    loaded = parse_definition(text, "/w/.claude/agents/lead.md", KNOWN)
    assert loaded.tools is not None and {"read_file", "agent_open"} <= set(loaded.tools)
    assert not any("dropped" in warning for warning in loaded.warnings)
