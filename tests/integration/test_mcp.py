"""MCP servers end to end: a real server written with the SDK (tests/support/mcp_server.py),
over stdio and streamable HTTP, whose tools the parent and its children call through
`codewhale exec` against the loopback model."""

from __future__ import annotations

import json

from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.mcp import (
    demo_server,
    http_demo_server,
    offered,
    project_file,
    run_exec,
    setup_home,
    toml_table,
    tool_results,
)
from tests.support.subagents import REPORT, for_task


def call(name: str, arguments: dict | None = None, id: str | None = None) -> ToolCallSpec:
    return ToolCallSpec(name, arguments or {}, id=id)


def test_the_parent_and_a_child_call_a_stdio_servers_tools(llm, tmp_path):
    workspace, home, env = setup_home(tmp_path, demo_server(), llm)
    llm.enqueue(
        Reply(
            tool_calls=[
                call("mcp__demo__echo", {"text": "hello"}, "echo"),
                call("mcp__demo__add", {"a": 2, "b": 3}, "add"),
                call("mcp__demo__picture", {}, "picture"),
                call("mcp__demo__fail", {"reason": "no such page"}, "fail"),
                call("mcp__demo__echo", {"text": 7}, "bad"),
                call("agent_open", {"prompt": "echo it", "type": "general"}, "open"),
            ]
        )
    )
    llm.route(
        for_task("echo it"),
        Reply(tool_calls=[call("mcp__demo__echo", {"text": "from the child"}, "child")]),
        Reply(text=REPORT),
    )
    llm.respond = lambda body: Reply(text="all done")

    result = run_exec(workspace, env)

    assert result.returncode == 0, result.stderr
    echo = offered(llm.requests[0].json)["mcp__demo__echo"]
    # The server's own schema and description, under Claude Code's naming.
    assert echo["parameters"]["properties"]["text"]["type"] == "string"
    assert echo["parameters"]["required"] == ["text"]
    assert echo["description"] == "Return the text unchanged."
    results = tool_results(llm)
    assert results["echo"] == "hello"
    assert json.loads(results["add"]) == {"total": 5, "terms": [2, 3]}
    assert results["picture"] == "[image image/png, 68 bytes: not shown to the model]"
    assert "mcp__demo__fail reported an error" in results["fail"]
    assert "no such page" in results["fail"]
    # Checked against the server's schema before anything is sent.
    assert "field 'text' must be string" in results["bad"]
    assert results["child"] == "from the child"
    child = next(r.json for r in llm.requests if for_task("echo it")(r.json))
    assert "mcp__demo__write_note" in offered(child)  # a general child may change things
    # The server's stderr went to its log, never to the terminal.
    log = (home / "state" / "mcp" / "demo.log").read_text()
    assert "demo server: starting over stdio" in log
    assert "demo server" not in result.stderr + result.stdout


def test_a_streamable_http_servers_tools(llm, tmp_path):
    with http_demo_server() as url:
        config = toml_table("web", url=url, headers={"X-Trace": "test"})
        workspace, _, env = setup_home(tmp_path, config, llm)
        llm.enqueue(
            Reply(
                tool_calls=[
                    call("mcp__web__echo", {"text": "over http"}, "echo"),
                    call("mcp__web__add", {"a": 40, "b": 2}, "add"),
                ]
            )
        )
        llm.respond = lambda body: Reply(text="done")
        result = run_exec(workspace, env)
    assert result.returncode == 0, result.stderr
    results = tool_results(llm)
    assert results["echo"] == "over http"
    assert json.loads(results["add"])["total"] == 42


def test_a_read_only_child_is_denied_a_servers_tools_unless_it_is_marked_read_only(llm, tmp_path):
    config = demo_server("demo") + demo_server("docs", trust="read_only")
    workspace, _, env = setup_home(tmp_path, config, llm)
    llm.enqueue(Reply(tool_calls=[call("agent_open", {"prompt": "look", "type": "explore"})]))
    llm.route(
        for_task("look"),
        Reply(
            tool_calls=[
                call("mcp__docs__echo", {"text": "reading"}, "docs"),
                # Not offered to it; called anyway, it is refused where tools run.
                call("mcp__demo__write_note", {"text": "should not land"}, "write"),
            ]
        ),
        Reply(text=REPORT),
    )
    llm.respond = lambda body: Reply(text="done")

    result = run_exec(workspace, env, "--mode", "yolo")

    assert result.returncode == 0, result.stderr
    explorer = next(r.json for r in llm.requests if for_task("look")(r.json))
    tools = offered(explorer)
    assert "mcp__docs__echo" in tools and "mcp__docs__write_note" in tools
    assert not any(name.startswith("mcp__demo__") for name in tools)
    results = tool_results(llm)
    assert results["docs"] == "reading"
    assert "mcp__demo__write_note is not available to the explore role" in results["write"]
    assert "not marked read-only" in results["write"]
    assert not (workspace / "notes-from-mcp.txt").exists()


def test_a_definition_lists_one_tool_or_a_whole_server(llm, tmp_path):
    workspace, _, env = setup_home(tmp_path, demo_server(), llm)
    agents = workspace / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "echoer.md").write_text(
        "---\nname: echoer\ndescription: echoes\ntools: Read, mcp__demo__echo\n---\nEcho.\n"
    )
    (agents / "demo-user.md").write_text(
        "---\nname: demo-user\ndescription: uses demo\ntools: mcp__demo\n---\nUse demo.\n"
    )
    (agents / "elsewhere.md").write_text(
        "---\nname: elsewhere\ndescription: x\ntools: Read, mcp__absent__tool\n---\nX.\n"
    )
    llm.enqueue(
        Reply(
            tool_calls=[
                call("agent_open", {"prompt": "one tool", "type": "echoer"}),
                call("agent_open", {"prompt": "whole server", "type": "demo-user"}),
            ]
        )
    )
    llm.route(for_task("one tool"), Reply(text=REPORT))
    llm.route(for_task("whole server"), Reply(text=REPORT))
    llm.respond = lambda body: Reply(text="done")

    result = run_exec(workspace, env)

    assert result.returncode == 0, result.stderr
    one = next(r.json for r in llm.requests if for_task("one tool")(r.json))
    assert set(offered(one)) == {"read_file", "mcp__demo__echo"}
    whole = next(r.json for r in llm.requests if for_task("whole server")(r.json))
    assert {name for name in offered(whole)} == {
        f"mcp__demo__{tool}"
        for tool in ("echo", "add", "picture", "fail", "write_note", "whoami", "crash")
    }
    # A server this session does not run: its tool is dropped from the definition, said
    # once in the start-up summary (the detail is in `codewhale agents types`).
    assert result.stderr.count("1 agent definition has warnings") == 1


def test_a_crashed_server_restarts_once_then_says_clearly_it_is_gone(llm, tmp_path):
    workspace, _, env = setup_home(tmp_path, demo_server(), llm)
    llm.enqueue(
        Reply(tool_calls=[call("mcp__demo__crash", {}, "crash1")]),
        Reply(tool_calls=[call("mcp__demo__echo", {"text": "back"}, "echo1")]),
        Reply(tool_calls=[call("mcp__demo__crash", {}, "crash2")]),
        Reply(tool_calls=[call("mcp__demo__echo", {"text": "again"}, "echo2")]),
    )
    llm.respond = lambda body: Reply(text="done")

    result = run_exec(workspace, env)

    assert result.returncode == 0, result.stderr
    results = tool_results(llm)
    assert (
        "MCP server 'demo' exited while running crash; it has been restarted" in (results["crash1"])
    )
    assert results["echo1"] == "back"
    assert "for the second time this session, so it is not restarted" in results["crash2"]
    assert (
        "MCP server 'demo' is not running: crashed 2 times (the server exited)"
        in (results["echo2"])
    )


def test_an_untrusted_mcp_json_does_not_start_until_trusted(llm, tmp_path):
    workspace, home, env = setup_home(tmp_path, "", llm)
    project_file(workspace)
    llm.respond = lambda body: Reply(text="done")

    first = run_exec(workspace, env)

    assert first.returncode == 0, first.stderr
    assert "names MCP servers you have not trusted, so they do not start: demo" in first.stderr
    assert not any(name.startswith("mcp__") for name in offered(llm.requests[0].json))
    assert not (home / "state" / "mcp" / "demo.log").exists()  # never started

    from tests.support.mcp import codewhale

    trusted = codewhale(env, "mcp", "trust", "--all", "-C", str(workspace))
    assert trusted.returncode == 0, trusted.stderr
    assert f"Trusted for {workspace}: demo" in trusted.stdout

    second = run_exec(workspace, env)

    assert second.returncode == 0, second.stderr
    assert "mcp__demo__echo" in offered(llm.requests[-1].json)
    assert "not trusted" not in second.stderr

    # The project changes what the server runs: trusted no more.
    project = json.loads((workspace / ".mcp.json").read_text())
    project["mcpServers"]["demo"]["args"].append("--changed")
    (workspace / ".mcp.json").write_text(json.dumps(project))
    third = run_exec(workspace, env)
    assert "not trusted, so they do not start: demo" in third.stderr


def test_exec_says_up_front_which_server_could_not_start_and_runs_without_it(llm, tmp_path):
    config = demo_server() + toml_table("broken", command="codewhale-no-such-mcp-server")
    workspace, _, env = setup_home(tmp_path, config, llm)
    llm.enqueue(Reply(tool_calls=[call("mcp__demo__echo", {"text": "still here"}, "echo")]))
    llm.respond = lambda body: Reply(text="done")

    result = run_exec(workspace, env)

    assert result.returncode == 0, result.stderr
    warning = next(line for line in result.stderr.splitlines() if "'broken'" in line)
    assert warning.startswith("warning: MCP server 'broken'")
    assert "broken.log" in warning
    assert tool_results(llm)["echo"] == "still here"
    assert not any(name.startswith("mcp__broken") for name in offered(llm.requests[0].json))


def test_a_claude_code_mcp_json_with_sse_disabled_tools_and_unknown_keys(llm, tmp_path):
    """A real-format .mcp.json entry (issue 29): `type: "sse"` goes through the SDK's
    HTTP+SSE client, `disabledTools` are never offered, and keys we do not read are
    named once."""
    with http_demo_server(sse=True) as url:
        workspace, _, env = setup_home(tmp_path, "", llm)
        entry = {
            "type": "sse",
            "url": url,
            "disabledTools": ["write_note"],
            "headersHelper": "get-headers.sh",
        }
        (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"legacy": entry}}))
        from tests.support.mcp import codewhale

        trusted = codewhale(env, "mcp", "trust", "--all", "-C", str(workspace))
        assert trusted.returncode == 0, trusted.stderr
        llm.enqueue(Reply(tool_calls=[call("mcp__legacy__echo", {"text": "over sse"}, "echo")]))
        llm.respond = lambda body: Reply(text="done")
        result = run_exec(workspace, env)
    assert result.returncode == 0, result.stderr
    assert tool_results(llm)["echo"] == "over sse"
    tools = offered(llm.requests[0].json)
    assert "mcp__legacy__echo" in tools and "mcp__legacy__write_note" not in tools
    assert result.stderr.count("headersHelper not supported here, ignored") == 1
