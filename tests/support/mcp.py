"""MCP test helpers: the demo server (tests/support/mcp_server.py) as config, as a
project's .mcp.json and over HTTP, and `codewhale` runs against the loopback model."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.settings import TEST_KEY, app_environment

REPO = Path(__file__).resolve().parents[2]
# The demo server's command line: this interpreter, the tests package importable from any
# working directory (the server runs in the workspace).
DEMO_COMMAND = sys.executable
DEMO_ARGS = ["-m", "tests.support.mcp_server", "stdio"]
DEMO_ENV = {"PYTHONPATH": str(REPO)}


def toml_table(name: str, **values: object) -> str:
    """`[mcp.servers.<name>]` with `values` (JSON strings and arrays are TOML too)."""
    lines = [f"[mcp.servers.{name}]"]
    for key, value in values.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def demo_server(name: str = "demo", *, env: dict[str, str] | None = None, **values: object) -> str:
    """The stdio demo server as a config table."""
    return toml_table(
        name, command=DEMO_COMMAND, args=DEMO_ARGS, env={**DEMO_ENV, **(env or {})}, **values
    )


def project_file(workspace: Path, name: str = "demo") -> Path:
    """The demo server in the workspace's .mcp.json, as Claude Code writes the file."""
    path = workspace / ".mcp.json"
    servers = {name: {"command": DEMO_COMMAND, "args": DEMO_ARGS, "env": DEMO_ENV}}
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


def setup_home(tmp_path: Path, config: str, llm) -> tuple[Path, Path, dict[str, str]]:
    """(workspace, CodeWhale home, environment for a real `codewhale` process)."""
    workspace, home = tmp_path / "repo", tmp_path / "home"
    workspace.mkdir()
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(config)
    env = app_environment(
        CODEWHALE_HOME=str(home),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
        CODEWHALE_BASE_URL=llm.base_url if llm is not None else "http://127.0.0.1:9/v1",
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    return workspace, home, env


def codewhale(
    env: dict[str, str], *arguments: str, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """A `codewhale` run with no terminal on stdin (it never waits for an answer)."""
    return subprocess.run(
        [sys.executable, "-m", "codewhale", *arguments],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def run_exec(
    workspace: Path, env: dict[str, str], *extra: str, prompt: str = "go"
) -> subprocess.CompletedProcess[str]:
    """`codewhale exec` answering approvals yes (MCP tools ask, as shell commands do)."""
    return codewhale(env, "exec", "-C", str(workspace), "--approve", "auto", *extra, prompt)


def tool_results(llm) -> dict[str, str]:
    """Every tool result any conversation sent, by tool call id."""
    return {
        m["tool_call_id"]: m["content"]
        for r in llm.requests
        for m in r.json["messages"]
        if m.get("role") == "tool"
    }


def offered(body) -> dict[str, dict]:
    """The tools a request offered, by name."""
    return {tool["function"]["name"]: tool["function"] for tool in body.get("tools") or []}


@contextmanager
def http_demo_server(record: Path | None = None, *, sse: bool = False) -> Iterator[str]:
    """The demo server over streamable HTTP (or the older HTTP+SSE transport) on
    127.0.0.1, in its own process; its URL. With `record`, each request's URL and headers
    are appended there as JSON lines."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.mcp_server",
            "sse" if sse else "http",
            *(["--record", str(record)] if record else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    assert server.stdout is not None
    try:
        yield server.stdout.readline().strip()
    finally:
        server.terminate()
        server.wait(timeout=10)
