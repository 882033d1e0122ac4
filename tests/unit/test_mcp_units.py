"""The MCP client's rules, piece by piece: naming, tool lists and authority, .mcp.json,
trust, config, results. The servers themselves are in tests/integration/test_mcp*.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import types

from codewhale.authority import READ_ONLY, Authority
from codewhale.config import ConfigError, load_config
from codewhale.mcp import names
from codewhale.mcp.results import result_text
from codewhale.mcp.server import McpServer
from codewhale.mcp.specs import ServerSpec, SpecError, project_specs, redact_url
from codewhale.mcp.tool import make_tool
from codewhale.mcp.trust import TrustStore
from codewhale.permissions import ApprovalClass
from codewhale.subagents.definitions import parse_definition
from codewhale.subagents.roles import Role, role_authority, served_tools
from codewhale.subagents.spawn import SpawnError, clean_tool_list, tool_limit

ASKS, FREE = ApprovalClass.REQUIRED, ApprovalClass.AUTO


# -- names, tool lists and authority --------------------------------------------------------


def test_tool_names_follow_claude_code_and_stay_valid_function_names():
    assert names.tool_name("context7", "get-library-docs") == "mcp__context7__get-library-docs"
    assert names.tool_name("fs", "read.file v2") == "mcp__fs__read_file_v2"
    assert names.server_of("mcp__fs__read_file") == "fs"
    assert names.server_of("mcp__fs") == "fs"
    assert names.server_of("read_file") is None


def test_served_tools_know_each_servers_tools_before_it_lists_them():
    served = served_tools(["read_file"], ["demo"])
    assert "mcp__demo__anything" in served and "mcp__demo" in served
    assert "mcp__other__tool" not in served and "read_file" in served
    assert "mcp__demo__anything" not in served_tools(["read_file"])


def test_a_server_entry_in_a_tool_list_allows_all_of_its_tools():
    listed = Authority(tools=frozenset({"read_file", "mcp__demo"}))
    assert listed.check("mcp__demo__echo", ASKS) is None
    assert listed.check("mcp__other__echo", ASKS) is not None
    # Narrowing keeps what both allow: one tool of the server the other allows whole.
    narrower = listed.narrowed(Authority(tools=frozenset({"mcp__demo__echo", "write_file"})))
    assert narrower.tools == frozenset({"mcp__demo__echo"})


def test_allowed_tools_name_a_servers_tools_within_a_definition_that_lists_the_server():
    served = served_tools(["read_file", "write_file"], ["docs"])
    definition = parse_definition(
        "---\nname: librarian\ndescription: d\ntools: Read, mcp__docs\n---\nLook it up.",
        "librarian.md",
        served,
    )
    allowed = clean_tool_list(["mcp__docs__search", "read_file"], served)
    assert tool_limit(allowed, definition) == ("mcp__docs__search", "read_file")
    with pytest.raises(SpawnError, match="not in it: write_file"):
        tool_limit(clean_tool_list(["write_file"], served), definition)
    with pytest.raises(SpawnError, match="unavailable tools: mcp__other__x"):
        clean_tool_list(["mcp__other__x"], served)


def test_a_read_only_authority_may_call_only_read_only_servers_tools():
    explore = Authority.full().narrowed(role_authority(Role.EXPLORE, "explore"))
    refusal = explore.check("mcp__demo__write_note", ASKS)
    assert refusal is not None and "not marked read-only" in refusal
    assert explore.check("mcp__docs__search", FREE) is None
    assert READ_ONLY.offers("mcp__demo__write_note", ASKS) is False
    # A role that may write gets every server's tools (each call still asks in Agent mode).
    assert role_authority(Role.GENERAL, "general").check("mcp__demo__write_note", ASKS) is None


# -- .mcp.json and trust ---------------------------------------------------------------------


def write_project(workspace: Path, servers: dict) -> None:
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_mcp_json_in_claude_codes_format(tmp_path):
    write_project(
        tmp_path,
        {
            "files": {"command": "npx", "args": ["-y", "fs"], "trust": "read_only"},
            "remote": {"type": "http", "url": "https://x.test/mcp", "headers": {"A": "b"}},
            "old": {"type": "sse", "url": "https://x.test/sse"},
            "bad.name": {"command": "x"},
            "both": {"command": "x", "url": "https://x.test"},
        },
    )
    warnings: list[str] = []
    specs = {spec.name: spec for spec in project_specs(tmp_path, warnings)}
    assert set(specs) == {"files", "remote", "old"}
    # The project cannot vouch for its own server: `trust` there is not read, and says so.
    assert specs["files"].read_only is False and specs["files"].project
    assert any("'files': trust not supported here, ignored" in w for w in warnings)
    assert specs["remote"].transport == "http"
    assert specs["old"].transport == "sse"
    assert any("'bad.name' may only use letters" in w for w in warnings)
    assert any("'both' is not used: " in w and "either command" in w for w in warnings)


def test_variables_expand_when_a_server_starts_and_secrets_are_scrubbed():
    spec = ServerSpec(
        name="s",
        source="config",
        command="run",
        args=("--level", "${LEVEL:-info}"),
        env={"API_TOKEN": "${TOKEN}", "PATH_LIKE": "/home/someone"},
        headers={},
    )
    resolved = spec.resolve({"TOKEN": "abcdef123456"})
    assert resolved.args == ["--level", "info"]
    assert resolved.scrub("token abcdef123456 in /home/someone") == (
        "token [redacted] in /home/someone"
    )
    assert spec.target() == "run --level ${LEVEL:-info}"  # shown as written
    with pytest.raises(SpecError, match="needs the environment variable TOKEN"):
        spec.resolve({})
    assert redact_url("https://x.test/mcp?key=s3cret&v=1") == "https://x.test/mcp?key=…&v=…"


def test_trust_is_per_workspace_and_for_the_entry_as_written(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    write_project(workspace, {"demo": {"command": "demo-server"}})
    store = TrustStore(tmp_path / "state" / "mcp-trust.json")
    [spec] = project_specs(workspace, [])
    assert not store.trusted(workspace, spec)
    store.trust(workspace, [spec])
    assert store.trusted(workspace, spec)
    assert not store.trusted(tmp_path, spec)  # another workspace
    write_project(workspace, {"demo": {"command": "demo-server", "args": ["--more"]}})
    [changed] = project_specs(workspace, [])
    assert not store.trusted(workspace, changed)
    store.revoke(workspace, ["demo"])
    assert not store.trusted(workspace, spec)
    store.path.write_text("{not json")
    assert not store.trusted(workspace, spec)  # unreadable: trusts nothing


def test_trust_covers_everything_the_prompt_shows(tmp_path):
    entry = {
        "command": "demo-server",
        "args": ["--x"],
        "env": {"LEVEL": "${LEVEL}"},
    }
    web = {"url": "https://x.test/mcp?a=1", "headers": {"X-A": "1"}}
    write_project(tmp_path, {"demo": entry, "web": web})
    store = TrustStore(tmp_path / "state" / "mcp-trust.json")
    store.trust(tmp_path, project_specs(tmp_path, []))
    changes = [
        {"demo": {**entry, "env": {"LEVEL": "${OTHER}"}}, "web": web},
        {"demo": {**entry, "env": {"LEVEL": "${LEVEL}", "MORE": "1"}}, "web": web},
        {"demo": entry, "web": {**web, "url": "https://x.test/mcp?a=2"}},
        {"demo": entry, "web": {**web, "headers": {"X-A": "${TOKEN}"}}},
        {"demo": entry, "web": {**web, "headers": {"X-A": "1", "X-B": "2"}}},
    ]
    for servers in changes:
        write_project(tmp_path, servers)
        trusted = {s.name: store.trusted(tmp_path, s) for s in project_specs(tmp_path, [])}
        assert list(trusted.values()).count(False) == 1, servers


def test_a_project_server_expands_only_allowed_variables_holding_no_secret(tmp_path):
    write_project(
        tmp_path,
        {"demo": {"command": "run", "args": ["${LABEL}", "${LEVEL:-info}"], "env": {}}},
    )
    [strict] = project_specs(tmp_path, [])
    [allowed] = project_specs(tmp_path, [], frozenset({"LABEL", "LEVEL"}))
    environ = {"LABEL": "blue", "DEEPSEEK_API_KEY": "sk-0123456789"}
    # A default does not make a refused variable fine: the name is what is judged.
    with pytest.raises(SpecError, match=r"\$\{LABEL\} in args .*\$\{LEVEL\} in args"):
        strict.resolve(environ)
    assert allowed.resolve(environ).args == ["blue", "info"]
    # An allowed name holding a secret's value is refused all the same.
    with pytest.raises(
        SpecError, match=r"\$\{LABEL\} in args \(its value holds DEEPSEEK_API_KEY's\)"
    ):
        allowed.resolve({**environ, "LABEL": "key=sk-0123456789"})
    # The user's own servers expand anything, as written.
    mine = ServerSpec(name="mine", source="config", command="run", args=("${DEEPSEEK_API_KEY}",))
    assert mine.resolve(environ).args == ["sk-0123456789"]
    assert [r.refusal for r in mine.references()] == [None]


def test_only_the_user_config_says_which_variables_project_servers_get(tmp_path):
    home, workspace = tmp_path / "home", tmp_path / "repo"
    (home / "config").mkdir(parents=True)
    (workspace / ".codewhale").mkdir(parents=True)
    env = {"CODEWHALE_HOME": str(home)}
    (home / "config" / "config.toml").write_text('[mcp]\nproject_env = ["LABEL"]\n')
    (workspace / ".codewhale" / "config.toml").write_text(
        '[mcp]\nproject_env = ["GITHUB_TOKEN"]\nproject_servers = true\n'
    )
    loaded = load_config(workspace=workspace, env=env)
    assert loaded.config.mcp.project_env == ["LABEL"]
    assert any("'mcp.project_env' is ignored in a project config" in w for w in loaded.warnings)
    (home / "config" / "config.toml").write_text("[mcp]\nproject_servers = false\n")
    assert load_config(workspace=workspace, env=env).config.mcp.project_servers is False
    (home / "config" / "config.toml").write_text('[mcp]\nproject_env = ["GITHUB_TOKEN"]\n')
    with pytest.raises(ConfigError, match="GITHUB_TOKEN looks like a secret"):
        load_config(env=env)
    (home / "config" / "config.toml").write_text('[mcp]\nproject_env = ["A=B"]\n')
    with pytest.raises(ConfigError, match="not environment variable names"):
        load_config(env=env)


# -- config -------------------------------------------------------------------------------------


def test_config_servers_are_checked_with_their_key(tmp_path):
    env = {"CODEWHALE_HOME": str(tmp_path)}
    config = tmp_path / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[mcp.servers.x]\ncommand = "a"\nurl = "https://b"\n')
    with pytest.raises(ConfigError, match="give either command"):
        load_config(env=env)
    config.write_text('[mcp.servers."a.b"]\ncommand = "a"\n')
    with pytest.raises(ConfigError, match="may only use letters"):
        load_config(env=env)
    config.write_text('[mcp.servers.ok]\ncommand = "a"\ntrust = "read_only"\n')
    assert load_config(env=env).config.mcp.servers["ok"].trust == "read_only"


# -- results and tools ------------------------------------------------------------------------


def test_results_become_text_with_placeholders():
    text = types.TextContent(type="text", text='{"a": 1}')
    image = types.ImageContent(type="image", data="iVBORw0KGgo=", mimeType="image/png")
    both = types.CallToolResult(content=[text, image], structuredContent={"a": 1})
    assert result_text(both) == '{"a": 1}\n[image image/png, 8 bytes: not shown to the model]'
    only_structured = types.CallToolResult(content=[], structuredContent={"b": [1]})
    assert json.loads(result_text(only_structured)) == {"b": [1]}
    resource = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri="file:///a.txt", text="inside"),
    )
    assert (
        result_text(types.CallToolResult(content=[resource])) == "[resource file:///a.txt]\ninside"
    )
    assert result_text(types.CallToolResult(content=[])) == "(the tool returned no content)"


def server(tmp_path: Path, read_only: bool) -> McpServer:
    spec = ServerSpec(name="srv", source="config", command="x", read_only=read_only)
    return McpServer(
        spec,
        workspace=tmp_path,
        log_file=tmp_path / "srv.log",
        startup_timeout=1,
        trusted=True,
        on_change=lambda: None,
    )


def test_server_tools_take_their_approval_from_the_users_trust(tmp_path):
    listed = types.Tool(name="look", description="Looks.", inputSchema={"type": "object"})
    asking = make_tool(server(tmp_path, read_only=False), listed)
    free = make_tool(server(tmp_path, read_only=True), listed)
    assert asking is not None and free is not None
    assert asking.approval is ASKS and free.approval is FREE
    assert asking.schema()["function"] == {
        "name": "mcp__srv__look",
        "description": "Looks.",
        "parameters": {"type": "object", "properties": {}},
    }
    too_long = types.Tool(name="x" * 70, inputSchema={"type": "object"})
    assert make_tool(server(tmp_path, read_only=False), too_long) is None
