"""`codewhale mcp list | trust | untrust` and `config show` with MCP servers, as
subprocesses; and the secrets in a server's env and headers kept out of what is shown
and what is saved."""

from __future__ import annotations

import json

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.mcp import (
    DEMO_ARGS,
    DEMO_COMMAND,
    DEMO_ENV,
    codewhale,
    demo_server,
    project_file,
    run_exec,
    setup_home,
    toml_table,
    tool_results,
)

TOKEN = "tok-0123456789-secret"
HEADER = "hdr-9876543210-secret"
REMOTE = "remote-5555555555-secret"


def test_mcp_list_shows_each_server_its_state_and_tools(tmp_path):
    config = (
        demo_server("demo", trust="read_only")
        + toml_table("missing", command="codewhale-no-such-server")
        + toml_table("off", url="http://127.0.0.1:9/mcp", enabled=False)
    )
    workspace, home, env = setup_home(tmp_path, config, None)
    project_file(workspace, "fromrepo")

    listed = codewhale(env, "mcp", "list", "-C", str(workspace), "--json")

    assert listed.returncode == 1, listed.stderr  # a server could not start
    servers = {s["name"]: s for s in json.loads(listed.stdout)["servers"]}
    demo = servers["demo"]
    assert demo["state"] == "ready" and demo["read_only"] and demo["transport"] == "stdio"
    assert {t["name"] for t in demo["tools"]} >= {"mcp__demo__echo", "mcp__demo__add"}
    assert demo["log"] == str(home / "state" / "mcp" / "demo.log")
    assert servers["missing"]["state"] == "failed"
    assert (
        servers["missing"]["error"]
        == "could not start: command not found: codewhale-no-such-server"
    )
    assert servers["off"]["state"] == "disabled"
    assert servers["fromrepo"]["state"] == "untrusted"
    assert servers["fromrepo"]["source"] == str(workspace / ".mcp.json")
    assert not (home / "state" / "mcp" / "fromrepo.log").exists()

    text = codewhale(env, "mcp", "list", "-C", str(workspace))
    assert "demo  ready  (stdio, config, read-only, no approval)" in text.stdout
    assert "  - mcp__demo__echo: Return the text unchanged." in text.stdout
    assert "fromrepo  untrusted  (stdio, .mcp.json, asks before each call)" in text.stdout
    assert "not started: trust it with /mcp trust" in text.stdout

    assert codewhale(env, "mcp", "trust", "fromrepo", "-C", str(workspace)).returncode == 0
    after = json.loads(codewhale(env, "mcp", "list", "-C", str(workspace), "--json").stdout)
    assert {s["name"]: s["state"] for s in after["servers"]}["fromrepo"] == "ready"
    assert codewhale(env, "mcp", "untrust", "-C", str(workspace)).returncode == 0
    again = json.loads(codewhale(env, "mcp", "list", "-C", str(workspace), "--json").stdout)
    assert {s["name"]: s["state"] for s in again["servers"]}["fromrepo"] == "untrusted"


def test_a_project_config_cannot_add_servers(tmp_path):
    workspace, _, env = setup_home(tmp_path, "", None)
    (workspace / ".codewhale").mkdir()
    (workspace / ".codewhale" / "config.toml").write_text(demo_server("sneaky"))
    listed = codewhale(env, "mcp", "list", "-C", str(workspace), "--json")
    document = json.loads(listed.stdout)
    assert document["servers"] == []
    assert "'mcp.servers' is ignored in a project config" in document["warnings"][0]


def test_secrets_in_env_and_headers_are_redacted_and_never_saved(llm, tmp_path):
    config = demo_server("demo", env={"DEMO_TOKEN": TOKEN}) + toml_table(
        "remote",
        url=f"http://127.0.0.1:9/mcp?api_key={TOKEN}",
        headers={"Authorization": f"Bearer {HEADER}", "X-Ref": "${REMOTE_TOKEN}"},
    )
    workspace, home, env = setup_home(tmp_path, config, llm)

    shown = codewhale(env, "config", "show", "-C", str(workspace))
    as_json = codewhale(env, "config", "show", "--json", "-C", str(workspace))
    for output in (shown.stdout, as_json.stdout):
        assert TOKEN not in output and HEADER not in output
        assert "${REMOTE_TOKEN}" in output  # a variable's name is no secret
    servers = json.loads(as_json.stdout)["values"]["mcp"]["servers"]
    assert servers["demo"]["env"]["DEMO_TOKEN"] == "…cret"
    assert servers["demo"]["env"]["PYTHONPATH"] != ""  # shown redacted, like every value
    assert servers["remote"]["url"] == "http://127.0.0.1:9/mcp?api_key=…"

    # The server hands its token back: the model, the screen and the session file get it
    # scrubbed. The unreachable remote server's log names its URL without the key.
    env["REMOTE_TOKEN"] = REMOTE
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("mcp__demo__whoami", {}, id="who")]))
    llm.respond = lambda body: Reply(text="done")
    result = run_exec(workspace, env, "--json", prompt="who are you")

    assert result.returncode == 0, result.stderr
    assert tool_results(llm)["who"] == "token=[redacted]"
    saved = "".join(p.read_text() for p in (home / "data").rglob("*") if p.is_file())
    assert "token=[redacted]" in saved
    for text in (saved, result.stdout, result.stderr):
        assert TOKEN not in text and HEADER not in text
    log = (home / "state" / "mcp" / "remote.log").read_text()
    assert TOKEN not in log and "api_key=" in log


def test_agents_types_keeps_a_definitions_mcp_tools_of_a_configured_server(tmp_path):
    workspace, _, env = setup_home(tmp_path, demo_server("docs"), None)
    agents = workspace / ".codewhale" / "agents"
    agents.mkdir(parents=True)
    (agents / "librarian.md").write_text(
        "---\nname: librarian\ndescription: Looks things up.\n"
        "tools: Read, mcp__docs, mcp__docs__search, mcp__elsewhere__x\n---\nLook it up.\n"
    )

    listed = codewhale(env, "agents", "types", "-C", str(workspace), "--json")

    assert listed.returncode == 0, listed.stderr
    types = {entry["name"]: entry for entry in json.loads(listed.stdout)["types"]}
    librarian = types["librarian"]
    assert librarian["tools"] == ["read_file", "mcp__docs", "mcp__docs__search"]
    assert any("mcp__elsewhere__x" in warning for warning in librarian["warnings"])


def test_mcp_list_reports_a_server_that_never_finishes_its_handshake(tmp_path):
    hanging = [*DEMO_ARGS, "--hang", "handshake"]
    config = (
        "[mcp]\nstartup_timeout_secs = 1\n"
        + toml_table("hung", command=DEMO_COMMAND, args=hanging, env=DEMO_ENV)
        + demo_server("demo")
    )
    workspace, _, env = setup_home(tmp_path, config, None)

    listed = codewhale(env, "mcp", "list", "-C", str(workspace), "--json")

    assert listed.returncode == 1  # a server could not start
    assert "Traceback" not in listed.stderr
    servers = {s["name"]: s for s in json.loads(listed.stdout)["servers"]}
    assert servers["hung"]["state"] == "failed"
    assert servers["hung"]["error"] == (
        "could not start: no answer to its handshake within 1 s (startup_timeout_secs)"
    )
    assert servers["demo"]["state"] == "ready" and servers["demo"]["tools"]
    text = codewhale(env, "mcp", "list", "-C", str(workspace))
    assert "hung  failed" in text.stdout and "Traceback" not in text.stderr
